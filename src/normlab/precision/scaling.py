"""Scaling before rounding: per-tensor, delayed (TransformerEngine), and MX blocks (OCP MX v1.0).

A narrow format covers a narrow range (float8_e4m3fn: 2^-9 to 448), so values are multiplied by a
scale s before rounding and divided by it afterwards:

    y = quantize(x * s, fmt, overflow="saturate") * (1 / s)          (quantize-dequantize)

* **Per-tensor ("current") scaling**: s = fmt.max / amax(x) / 2^margin from the tensor itself.
* **Delayed scaling** (TransformerEngine's ``DelayedScaling``): s comes from a history of the
  amax of previous steps, ``max`` over it or the ``most_recent`` entry, so the cast needs no
  extra pass over the data. After each step: amax <- max(history) (or history[0]); the history
  rolls by one and its slot 0 is cleared for the next step; s <- fmax / amax / 2^margin, keeping
  the previous s when amax is 0 or not finite and using float32's max when s overflows.
* **MX block scaling** (OCP Microscaling v1.0): blocks of k = 32 consecutive values along an axis
  share a power-of-two scale X stored as E8M0, and the elements are P_i = quantize(V_i / X) in
  an element format, saturating. The spec's rule is X = 2^(floor(log2 amax) - emax_elem), which
  can clip the block's largest value (amax = 7 in E2M1: X = 1, 7 -> 6); ``scale_rule="ceil"``
  is the round-up rule of TransformerEngine and cuBLAS (the smallest power of two with
  amax / X <= max: X = 2, 7/2 = 3.5 -> 4, i.e. 8), which never clips; ``"rceil"`` is the same
  rule as TransformerEngine, cuBLAS and torchao's ``RCEIL`` compute it, on float32 bits;
  ``"even"`` and ``"ceil_amax"`` are torchao's ``EVEN`` and ``CEIL``; ``"nearest"`` is
  ml_dtypes' E8M0 cast of amax / max. ``mx_scale`` gives each rule's source and definition. A
  block holding inf or NaN gets the NaN scale, and the whole block dequantizes to NaN.

  The element formats saturate inside MX blocks (OCP MX v1.0 section 6.3: normal numbers are
  clamped, infinities and NaN are not): microxcaling (``saturate_normals=True``), torchao (a
  clamp before the cast for E5M2; PyTorch's E4M3 cast saturates from 2.13) and
  TransformerEngine (``satfinite``) all do; ``mx_quantize`` always saturates.

**One interface.** A scaling dialect is frozen data with one protocol (:class:`Scaling`):
``qdq(x, fmt, *, rounding, overflow, rng, state, axis, sr_bits, quantizer) -> array`` (the
quantize-dequantize), ``quantize(...)`` (the same as a :class:`Quantized` value: its elements,
its scales and ``stats(x)``), ``new_state(fmt)`` (what it keeps from step to step, or None),
``describe()`` and ``to_dict()`` / ``from_dict()`` (its name and parameters as data). The table
:data:`SCALINGS` maps each dialect's name (``kind``) to its class; ``register_scaling`` adds one.
A ``PrecisionPolicy`` holds dialects as data, ``normlab.nn.numerics`` and ``normlab.torch``
apply them through the protocol alone (``normlab.torch`` in torch operations where it has them
for a kind, else through the NumPy path on a CPU copy: the same bits), so a new dialect is one
class and one ``register_scaling`` call.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat, get_format
from .rounding import _check_rounding, quantize
from .tiles import Tiling, block_amax

_F32_MAX = float(np.finfo(np.float32).max)
SCALE_RULES = ("floor", "ceil", "rceil", "even", "ceil_amax", "nearest")
AMAX_ALGOS = ("max", "most_recent")


def amax(x: Any) -> float:
    """max |x| as a Python float (NaN if x holds a NaN; 0 for an empty array)."""
    x = ck.float_array(x, "x")
    if x.size == 0:
        return 0.0
    return float(np.max(np.abs(x.astype(ck.compute_dtype(x.dtype), copy=False))))


def tensor_scale(amax_value: float, fmt: Any, *, margin: int = 0, power_of_two: bool = False,
                 previous: float = 1.0) -> float:
    """s = fmax / amax / 2^margin, in float32 as TransformerEngine computes it.

    amax = 0 or non-finite keeps ``previous``; an overflowing s becomes float32's max;
    ``power_of_two`` rounds s down to a power of two (2^floor(log2 s), older TE versions).
    """
    fmt = get_format(fmt)
    margin = ck.integer(margin, "margin", lo=-64, hi=64)
    a = np.float32(amax_value)
    if not (np.isfinite(a) and a > 0):
        return float(previous)
    with np.errstate(over="ignore"):
        s = np.float32(np.float32(fmt.max_finite) / a) / np.float32(2.0**margin)
    if not np.isfinite(s):
        s = np.float32(_F32_MAX)
    if power_of_two:
        s = np.float32(math.ldexp(1.0, math.frexp(float(s))[1] - 1))
    return float(s)


def scaled_qdq(x: Any, fmt: Any, scale: float, *, rounding: str = "nearest_even",
               overflow: str | None = "saturate",
               rng: np.random.Generator | None = None, quantizer: Callable | None = None) -> Array:
    """quantize(x * s, fmt, overflow=overflow) * float32(1 / s), the multiplications in float32
    (float64 for float64 input) as on hardware; scaled casts saturate by default, as TE's.
    ``quantizer`` replaces ``quantize`` (a function with its signature and results).
    Returns x's shape, float32 or float64."""
    return _scaled(x, fmt, scale, rounding, overflow, rng, quantizer or quantize).dequantize()


class ErrorStats(NamedTuple):
    """How a quantize-dequantize treated a tensor (finite values of x only)."""

    rel_error: float  # ||y - x||_2 / ||x||_2
    max_abs_error: float  # max |y - x|
    flushed: float  # fraction of the non-zero values that became 0
    saturated: float  # fraction that round-to-nearest would take past max after scaling


def error_stats(x: Any, y: Any, fmt: Any, scale: Any = 1.0) -> ErrorStats:
    """Error statistics of ``y``, a quantize-dequantize of ``x`` to ``fmt`` after multiplying by
    ``scale`` (a scalar, or an array broadcastable to x: for MX, ``1 / X`` per element).

    ``saturated`` counts the values that a non-saturating cast would have sent to inf/NaN (or
    past max): |x * scale| beyond max + ulp(max) / 2, the same test for every rounding."""
    x = ck.float_array(x, "x").astype(np.float64)
    y = ck.float_array(y, "y").astype(np.float64)
    ck.same_shape(y, "y", x.shape, "the shape of x")
    fmt = get_format(fmt)
    keep = np.isfinite(x)
    xs = (x * np.asarray(scale, dtype=np.float64))[keep]
    x, y = x[keep], y[keep]
    norm = float(np.linalg.norm(x))
    err = np.abs(y - x)
    nonzero = x != 0
    # round to nearest leaves the format from max + ulp(max)/2 on; at the tie itself only when
    # max is odd (IEEE-style and fp6/fp4 formats; e4m3fn's max 448 = 1.110b x 2^8 is even)
    beyond = fmt.max_finite + 2.0 ** (fmt.emax - fmt.mantissa_bits - 1)
    even_max = fmt.inf_nan == "fn" and fmt.mantissa_bits > 0
    over = np.abs(xs) > beyond if even_max else np.abs(xs) >= beyond
    return ErrorStats(
        rel_error=float(np.linalg.norm(y - x)) / norm if norm > 0 else float(np.max(err,
                                                                                    initial=0)),
        max_abs_error=float(np.max(err, initial=0.0)),
        flushed=float(np.mean(y[nonzero] == 0)) if nonzero.any() else 0.0,
        saturated=float(np.mean(over)) if x.size else 0.0,
    )


# --- the interface ------------------------------------------------------------------------------

class Quantized(Protocol):
    """A quantized tensor: its elements on the format's grid and what decodes them."""

    @property
    def elements(self) -> Array:
        """x's shape, values of the element format (float32; float64 for float64 x)."""
        ...

    @property
    def fmt(self) -> FloatFormat:
        """The element format."""
        ...

    def dequantize(self) -> Array:
        """The values represented: x's shape."""
        ...

    def stats(self, x: Any) -> ErrorStats:
        """Error statistics against the original x."""
        ...


class ScalingState(Protocol):
    """What a dialect keeps for one tensor from step to step (delayed scaling's amax history)."""

    def update(self) -> float:
        """End of an optimizer step: the state for the next one. Returns its scale."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-able state, for a checkpoint."""
        ...

    def load(self, saved: Any, where: str) -> None:
        """Restore what ``to_dict`` gave, each value checked (errors name ``where``)."""
        ...


@runtime_checkable
class Scaling(Protocol):
    """A scaling dialect (the module docstring): frozen data, named by ``kind`` in SCALINGS."""

    kind: ClassVar[str]

    def qdq(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
            overflow: str | None = "saturate", rng: np.random.Generator | None = None,
            state: Any = None, axis: int | None = None, sr_bits: int | None = None,
            quantizer: Callable | None = None) -> Array: ...

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> Quantized: ...

    def new_state(self, fmt: Any) -> ScalingState | None: ...

    def describe(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class ScalingDialect:
    """What every dialect shares (a base for frozen dataclasses): its parameters as data
    (``to_dict`` / ``from_dict``), no state, and ``qdq`` as ``quantize(...).dequantize()``. A
    subclass sets ``kind`` and defines ``quantize`` and ``describe``; one with a state defines
    ``new_state``; one with a faster path than the dequantize defines ``qdq``."""

    kind: ClassVar[str] = ""

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> Quantized:
        raise NotImplementedError

    def qdq(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
            overflow: str | None = "saturate", rng: np.random.Generator | None = None,
            state: Any = None, axis: int | None = None, sr_bits: int | None = None,
            quantizer: Callable | None = None) -> Array:
        """Quantize-dequantize x: float32 (float64 for float64 x), x's shape."""
        return self.quantize(x, fmt, rounding=rounding, overflow=overflow, rng=rng, state=state,
                             axis=axis, sr_bits=sr_bits, quantizer=quantizer).dequantize()

    def new_state(self, fmt: Any) -> ScalingState | None:
        """The per-tensor state (None: the dialect keeps none)."""
        return None

    def describe(self) -> str:
        return self.kind

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., <parameters>}``: JSON-able, read back by :func:`scaling_from_dict`."""
        assert dataclasses.is_dataclass(self)
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any], where: str = "scaling") -> Any:
        """The dialect from its parameters (``kind`` left out); unknown ones refused by name."""
        assert dataclasses.is_dataclass(cls)
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = set(fields) - set(known)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} for kind "
                             f"{cls.kind!r}; known: {', '.join(known) or 'none'}")
        try:
            return cls(**fields)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{where}: {exc}") from None


#: The dialects by name (``kind``): the one table a policy, the model and ``normlab.torch`` read.
SCALINGS: dict[str, Any] = {}


def register_scaling(cls: Any) -> Any:
    """Add a dialect class to :data:`SCALINGS` under its ``kind`` (usable as a decorator).
    It must implement :class:`Scaling`; a kind already taken is refused."""
    kind = getattr(cls, "kind", None)
    if not isinstance(cls, type) or not isinstance(kind, str) or not kind:
        raise TypeError(f"a scaling dialect is a class with a non-empty 'kind'; got {cls!r}")
    missing = [m for m in ("qdq", "quantize", "new_state", "describe", "to_dict", "from_dict")
               if not callable(getattr(cls, m, None))]
    if missing:
        raise TypeError(f"scaling dialect {kind!r} lacks {', '.join(missing)}")
    if kind in SCALINGS and SCALINGS[kind] is not cls:
        raise ValueError(f"a scaling dialect named {kind!r} exists: {SCALINGS[kind].__name__}")
    SCALINGS[kind] = cls
    return cls


def unregister_scaling(kind: str) -> None:
    """Remove a dialect from :data:`SCALINGS` (a test's throwaway dialect)."""
    if kind not in SCALINGS:
        raise KeyError(f"no scaling dialect named {kind!r}; known: {', '.join(SCALINGS)}")
    del SCALINGS[kind]


def scaling_from_dict(value: Any, where: str = "scaling") -> Any:
    """A dialect from ``{"kind": ..., <parameters>}`` (a dialect object is returned as it is,
    None stays None); the kind and each parameter are checked, errors naming ``where``."""
    if value is None or isinstance(value, ScalingDialect) or (
            isinstance(value, Scaling) and not isinstance(value, type)):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be null, or an object with a 'kind' "
                        f"({', '.join(SCALINGS)}); got {value!r}")
    fields = dict(value)
    kind = fields.pop("kind", None)
    if kind not in SCALINGS:
        raise ValueError(f"{where}.kind must be one of {tuple(SCALINGS)}; got {kind!r}")
    return SCALINGS[kind].from_dict(fields, where)


def _element_quantizer(quantizer: Callable | None, sr_bits: int | None) -> Callable:
    """The element rounding: ``quantizer`` (default ``quantize``), drawing ``sr_bits`` random
    bits per stochastic rounding when given."""
    q = quantizer or quantize
    return q if sr_bits is None else functools.partial(q, sr_bits=sr_bits)


class ScaledTensor(NamedTuple):
    """A tensor quantized with one scale: ``elements = quantize(x * scale)``, decoded as
    ``elements * decode`` (``decode`` = float32(1 / scale) for float32 x, as hardware)."""

    elements: Array  # x's shape, values of the element format (float32; float64 for float64 x)
    scale: float  # the encoding scale s
    decode: float  # the decoding multiplier
    fmt: FloatFormat  # the element format

    def dequantize(self) -> Array:
        """elements * decode: x's shape."""
        return self.elements * self.elements.dtype.type(self.decode)

    def stats(self, x: Any) -> ErrorStats:
        """Error statistics against the original x."""
        return error_stats(x, self.dequantize(), self.fmt, self.scale)


def _scaled(x: Any, fmt: Any, s: float, rounding: str, overflow: str | None,
            rng: np.random.Generator | None, quantizer: Callable) -> ScaledTensor:
    """``scaled_qdq``'s steps, kept apart: the rounded x * s and its decode multiplier."""
    x = ck.float_array(x, "x")
    s = ck.positive(s, "scale")
    fmt = get_format(fmt)
    ct = ck.compute_dtype(x.dtype)
    q = quantizer(x.astype(ct, copy=False) * ct.type(s), fmt, rounding=rounding,
                  overflow=overflow, rng=rng)
    decode = float(np.float32(1.0) / np.float32(s)) if ct == np.float32 else 1.0 / s
    return ScaledTensor(q, float(s), decode, fmt)


# --- per-tensor and delayed scaling -----------------------------------------------------------

@register_scaling
@dataclass(frozen=True)
class TensorScaling(ScalingDialect):
    """Per-tensor current scaling: s = fmax / amax(x) / 2^margin from x itself (TE's
    ``Float8CurrentScaling``; ``power_of_two`` rounds s down to a power of two)."""

    margin: int = 0
    power_of_two: bool = False
    kind: ClassVar[str] = "tensor"

    def __post_init__(self) -> None:
        ck.integer(self.margin, "margin", lo=-64, hi=64)
        ck.flag(self.power_of_two, "power_of_two")

    def scale_of(self, x: Any, fmt: Any) -> float:
        """The scale s this recipe gives x."""
        return tensor_scale(amax(x), fmt, margin=self.margin, power_of_two=self.power_of_two)

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> ScaledTensor:
        """x * s rounded to ``fmt`` with s from x's own amax (``state``, ``axis``: unused)."""
        return _scaled(x, fmt, self.scale_of(x, fmt), rounding, overflow, rng,
                       _element_quantizer(quantizer, sr_bits))

    def describe(self) -> str:
        return f"per-tensor scaling (margin {self.margin})"


@register_scaling
@dataclass(frozen=True)
class DelayedScaling(ScalingDialect):
    """TransformerEngine's DelayedScaling recipe: the scale of step t comes from the amax of the
    steps before it. Defaults are TE's (margin 0, history 1024, 'max'); Megatron's older default
    was ``amax_history_len=1, amax_compute_algo="most_recent"``."""

    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"
    kind: ClassVar[str] = "delayed"

    def __post_init__(self) -> None:
        ck.integer(self.margin, "margin", lo=-64, hi=64)
        ck.integer(self.amax_history_len, "amax_history_len", lo=1, hi=1 << 20)
        ck.choice(self.amax_compute_algo, "amax_compute_algo", AMAX_ALGOS)

    def new_state(self, fmt: Any) -> DelayedScalingState:
        """The per-tensor state (amax history and scale) for one tensor cast to ``fmt``."""
        return DelayedScalingState(self, fmt)

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> ScaledTensor:
        """x * s rounded to ``fmt`` with the state's scale s, x's amax recorded in its history
        (``state``: from ``new_state(fmt)``, one per tensor, updated every step)."""
        if not isinstance(state, DelayedScalingState):
            raise TypeError("this precision uses delayed scaling: pass state= (from "
                            "precision.new_state(), one per tensor, updated every step)")
        t = _scaled(x, state.fmt, state.scale, rounding, overflow, rng,
                    _element_quantizer(quantizer, sr_bits))
        state.record(x)
        return t

    def describe(self) -> str:
        return (f"delayed scaling (history {self.amax_history_len}, {self.amax_compute_algo}, "
                f"margin {self.margin})")


class DelayedScalingState:
    """The state of one delayed-scaled tensor: ``scale`` (float32, 1.0 at first) and
    ``amax_history`` (float32, length L; slot 0 collects the current step)."""

    def __init__(self, recipe: DelayedScaling, fmt: Any) -> None:
        if not isinstance(recipe, DelayedScaling):
            raise TypeError(f"recipe must be a DelayedScaling; got {type(recipe).__name__}")
        self.recipe = recipe
        self.fmt = get_format(fmt)
        self.scale = 1.0
        self.amax_history = np.zeros(recipe.amax_history_len, dtype=np.float32)

    def qdq(self, x: Any, *, rounding: str = "nearest_even",
            rng: np.random.Generator | None = None, quantizer: Callable | None = None) -> Array:
        """Quantize-dequantize x with the current scale and record amax(x) in slot 0 (the
        maximum over the calls of this step, e.g. over gradient-accumulation micro-batches)."""
        return self.recipe.qdq(x, self.fmt, rounding=rounding, rng=rng, state=self,
                               quantizer=quantizer)

    def record(self, x: Any) -> None:
        """amax(x) into slot 0 of the history (the maximum over this step's calls; NaN stays)."""
        self.record_amax(amax(x))

    def record_amax(self, value: float) -> None:
        """An amax into slot 0 of the history, as :meth:`record` does for a tensor's."""
        a = np.float32(value)
        self.amax_history[0] = np.nan if np.isnan(a) else max(self.amax_history[0], a)

    def update(self) -> float:
        """End of step: amax from the history, roll it, new scale (TE's
        ``_default_get_amax_and_update_history`` and ``_default_sf_compute``). Returns it."""
        h = self.amax_history
        a = float(np.max(h)) if self.recipe.amax_compute_algo == "max" else float(h[0])
        self.amax_history = np.roll(h, -1)
        self.amax_history[0] = 0.0
        self.scale = tensor_scale(a, self.fmt, margin=self.recipe.margin, previous=self.scale)
        return self.scale

    def to_dict(self) -> dict[str, Any]:
        """``{"scale", "amax_history"}`` as JSON-able numbers."""
        return {"scale": float(self.scale), "amax_history": self.amax_history.tolist()}

    def load(self, saved: Any, where: str = "state") -> None:
        """Restore what :meth:`to_dict` returned, checked first (a TypeError or ValueError naming
        ``where``): its scale a finite number > 0, its amax history as long as the recipe's, of
        amaxes (>= 0, or the NaN or inf a step recorded)."""
        if not isinstance(saved, dict) or not {"scale", "amax_history"} <= set(saved):
            raise TypeError(f"{where} must hold scale and amax_history")
        scale = ck.positive(saved["scale"], f"{where}: scale")
        try:
            history = np.asarray(saved["amax_history"], np.float64)
        except (TypeError, ValueError):
            history = None
        if history is None or history.shape != self.amax_history.shape or (history < 0).any():
            raise ValueError(f"{where}: amax_history must be {self.amax_history.size} numbers "
                             f">= 0 (NaN or inf where a step saw one)")
        with np.errstate(over="ignore"):  # an amax beyond float32 is inf, as a step records it
            self.scale, self.amax_history = scale, history.astype(np.float32)


# --- MX block scaling -------------------------------------------------------------------------

class MXTensor(NamedTuple):
    """An MX-quantized tensor: element values and one shared power-of-two scale per block."""

    elements: Array  # float32 (float64 for float64 input), x's shape: values of the element format
    scales: Array  # X per block: x's shape with the block axis of size ceil(n / block_size)
    #                (2D tiles: the last two axes divided)
    axis: int  # the block axis (non-negative; 2D tiles: the last)
    block_size: int  # k
    fmt: FloatFormat  # the element format
    two_d: bool = False  # k x k tiles of the last two axes

    @property
    def tiling(self) -> Tiling:
        """The blocks' geometry."""
        return Tiling(self.elements.shape, self.axis, self.block_size, self.two_d)

    def dequantize(self) -> Array:
        """elements * X, x's shape: exact (X is a power of two) wherever the value is a number
        of the elements' dtype. The one MX value of a finite float32 block beyond float32's
        range, 2^128 (a round-up scale rule with amax within half an element spacing of
        float32's max: element 2^(emax + 1) x X = 2^128), becomes float32's max, the nearest
        finite float32, never inf."""
        return _saturated_product(self.elements, self.expanded_scales())

    def expanded_scales(self) -> Array:
        """X repeated over each block's elements: x's shape."""
        return self.tiling.expand(self.scales)

    def stats(self, x: Any) -> ErrorStats:
        """Error statistics against the original x."""
        return error_stats(x, self.dequantize(), self.fmt, 1.0 / self.expanded_scales())


def _saturated_product(elements: Array, scales: Array) -> Array:
    """elements * scales (x's dtype); a product of finite factors beyond the dtype's range
    becomes its largest finite value, with the product's sign (``MXTensor.dequantize``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = elements * scales
    if out.dtype == np.float32:
        over = np.isinf(out) & np.isfinite(elements) & np.isfinite(scales)
        if over.any():
            out[over] = np.copysign(np.float32(_F32_MAX), out[over])
    return out


def mx_scale(block_amax: Any, fmt: Any, scale_rule: str = "floor", scale_bits: int = 8
             ) -> Array:
    """The shared scale X of blocks with the given amax: float64 powers of two in
    [2^-127, 2^127] (E8M0's range), NaN for a non-finite amax. ``emax`` is the element
    format's largest exponent (E4M3 8, E5M2 15, E3M2 4, E2M3 2, E2M1 2; the integer MX
    formats 0), ``max`` its largest value.

    ``scale_bits`` narrows the shared exponent to ``scale_bits`` bits: exponents in
    [-(2^(b-1) - 1), 2^(b-1) - 1], microxcaling's ``scale_bits`` (``_quantize_mx``: above the
    range NaN, below it clamped; 8 is E8M0). Every rule but ``nearest`` takes it; each keeps its
    own behaviour at the top (NaN, or saturation for ``ceil``) at the narrower bound.

    floor: X = 2^(floor(log2 amax) - emax); amax = 0 gives 2^-127; an exponent above 127 gives
        NaN. The OCP MX v1.0 spec (section 6.3) and Rouhani et al. arXiv:2310.10537 Alg. 1;
        microxcaling's ``_quantize_mx`` (``shared_exp = floor(log2(amax)) - emax_elem``, > 127
        NaN, < -127 clamped); torchao's ``ScaleCalculationMode.FLOOR`` (the float32 exponent
        field of amax, minus ``*_MAX_POW2``); pychop's ``mx_formats``; gfloat. Can clip the
        block maximum (amax = 7 in E2M1: X = 1 and 7 -> 6; pytorch/ao#436).
    ceil: X = 2^ceil(log2(amax / max)), the smallest power of two with amax / X <= max, in exact
        arithmetic, saturating at 2^127: the round-up rule of TransformerEngine's MXFP8
        (``float_to_e8m0(amax * max_norm_rcp)``, ``cvt.rp.satfinite.ue8m0x2.f32``), cuBLAS's
        block quantization and Mishra et al. arXiv:2506.08027. Never clips.
    rceil: the ceil rule as TransformerEngine, cuBLAS and torchao main's ``RCEIL``
        (``_to_mx_rceil``) compute it: d = float32(amax) * float32(1 / max) rounded to float32,
        then E8M0 of d rounded up (the exponent field of d, plus one when its mantissa is not
        zero; a float32 subnormal d rounds up only above 2^-127). Differs from ``ceil`` where
        the float32 product crosses a power of two that the exact quotient does not. torchao
        0.18.0 (the pinned one) takes ceil(log2(amax / max)) with a float32 log2 instead,
        one binade low where amax / max lies just above a power of two (docs/numerics.md,
        class ao-rceil-log2).
    even: torchao's ``ScaleCalculationMode.EVEN``: amax is first rounded to the element's
        precision by adding half an element ulp to its float32 bits (2^(22 - M)) and dropping
        the mantissa, then the floor rule applies. Despite the name this rounds amax half up.
        Where the element format's max ends its binade (fp4, fp6, E5M2) the largest element
        then never saturates beyond round-to-nearest's own error; in E4M3 (max 448 = 1.75 2^8)
        amax / X in (464, 496) still saturates to 448.
    ceil_amax: torchao's ``ScaleCalculationMode.CEIL``: X = 2^(ceil(log2 amax) - emax), amax
        rounded up to a power of two, then the floor rule (not the same as ``ceil``: amax = 5
        in E2M1 gives X = 2 here and 1 under ``ceil``).
    nearest: ml_dtypes' E8M0 cast of amax / max (RNE on the implicit bit: 1.5 2^k rounds up).

    floor, rceil, even and ceil_amax read amax as float32, as torchao does; floor and ceil_amax
    give the same result for float64 amax.
    """
    fmt = get_format(fmt)
    rule = ck.choice(scale_rule, "scale_rule", SCALE_RULES)
    top = 2 ** (ck.integer(scale_bits, "scale_bits", lo=2, hi=8) - 1) - 1  # 127 for E8M0
    if rule == "nearest" and top != 127:
        raise ValueError("scale_rule='nearest' (ml_dtypes' E8M0 cast) has 8 scale bits; got "
                         f"scale_bits={scale_bits}")
    a = np.asarray(block_amax, dtype=np.float64)
    finite = np.isfinite(a)
    if rule in ("floor", "ceil", "nearest"):
        X = _mx_scale_exact(a, fmt, rule, top)
    else:
        X = _mx_scale_float32_bits(np.where(finite, a, 0.0), fmt, rule, top)
    return np.where(finite, X, np.nan)


def _mx_scale_exact(a: Array, fmt: FloatFormat, rule: str, top: int) -> Array:
    """floor, ceil and nearest on float64 amax (``mx_scale``)."""
    safe = np.where(np.isfinite(a) & (a > 0), a, 1.0)
    if rule == "floor":
        _, e = np.frexp(safe)
        e = (e - 1) - fmt.emax
        e = np.where(a > 0, e, -top)
        return np.where(e > top, np.nan, np.ldexp(1.0, np.clip(e, -top, top)))
    if rule == "ceil":  # the smallest e with amax <= max * 2^e, by exact comparisons
        _, e = np.frexp(safe / fmt.max_finite)  # within one of the answer
        e = e + (safe > np.ldexp(fmt.max_finite, e))
        e = e - (safe <= np.ldexp(fmt.max_finite, e - 1))
        return np.where(a > 0, np.ldexp(1.0, np.clip(e, -top, top)), 2.0**-top)
    return np.where(a > 0, quantize(safe / fmt.max_finite, "float8_e8m0fnu"), 2.0**-127)


def _mx_scale_float32_bits(a: Array, fmt: FloatFormat, rule: str, top: int = 127) -> Array:
    """rceil, even and ceil_amax on the float32 bits of amax (finite, >= 0), as torchao;
    exponents above ``top`` are NaN, below ``-top`` clamped."""
    with np.errstate(over="ignore"):
        a32 = a.astype(np.float32)
    if rule == "rceil":
        d = a32 * np.float32(1.0 / fmt.max_finite)  # float32 * float32, rounded to float32
        b = d.view(np.uint32).astype(np.int64)
        field, mant = b >> 23, b & 0x7FFFFF
        up = np.where(field == 0, mant > 0x400000, mant != 0)
        e = field + up - 127  # field + up = 255 (beyond 2^127) is E8M0's NaN
    else:
        b = a32.view(np.uint32).astype(np.int64)
        if rule == "even":  # round amax to the element's precision, half up, keep the exponent
            b = (b + (1 << (22 - fmt.mantissa_bits))) & 0xFF800000
            extra = 0
        else:  # ceil_amax: the next power of two unless amax is one
            extra = (b & 0x7FFFFF) != 0
        e = ((b >> 23) & 0xFF) - 127 + extra - fmt.emax
    e = np.clip(e, -top, top + 1)  # top + 1: NaN
    return np.where(e > top, np.nan, np.ldexp(1.0, np.minimum(e, top)))


def mx_quantize(x: Any, fmt: Any = "float8_e4m3fn", *, block_size: int = 32, axis: int = -1,
                scale_rule: str = "floor", rounding: str = "nearest_even",
                rng: np.random.Generator | None = None, sr_bits: int | None = None,
                two_d: bool = False, scale_bits: int = 8) -> MXTensor:
    """MX block quantization (OCP MX v1.0).

    Args:
        x: float array; blocks run along ``axis`` (a length that is not a multiple of
            ``block_size`` ends with a shorter block).
        fmt: element format: float8_e4m3fn / float8_e5m2 (MXFP8), float6_e3m2fn /
            float6_e2m3fn (MXFP6), float4_e2m1fn (MXFP4), ``MXINT8`` (OCP's integer elements;
            ``MX_INT_FORMATS``), or any FloatFormat.
        block_size: k, 32 in every concrete MX format.
        scale_rule: ``"floor"`` (the spec, microxcaling, torchao's default), ``"ceil"``
            (TE/cuBLAS in exact arithmetic), ``"rceil"`` (TE/cuBLAS/torchao RCEIL on float32
            bits), ``"even"`` / ``"ceil_amax"`` (torchao's EVEN / CEIL) or ``"nearest"``
            (ml_dtypes' E8M0 cast); see ``mx_scale``.
        rounding, rng, sr_bits: as ``quantize``; elements saturate at the format's max.
        two_d: k x k tiles of the last two axes share a scale (TransformerEngine's MXFP8
            ``enable_2d_quantization``, 32x32 weight tiles; microxcaling's blocks over two
            axes); ``axis`` is then not used.
        scale_bits: the shared exponent's bits (8: E8M0; microxcaling's ``scale_bits``).

    Returns:
        MXTensor; ``.dequantize()`` gives the values, ``.stats(x)`` the error statistics.
    """
    x = ck.float_array(x, "x")
    fmt = get_format(fmt)
    k = ck.integer(block_size, "block_size", lo=1, hi=1 << 16)
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension for MX blocks; got a scalar")
    tiling = Tiling.of(x.shape, k, axis, ck.flag(two_d, "two_d"))
    ck.choice(scale_rule, "scale_rule", SCALE_RULES)
    _check_rounding(rounding)
    ct = ck.compute_dtype(x.dtype)
    xb = tiling.split(x.astype(ct, copy=False))  # (..., nb, k) or (..., gm, gn, k * k)
    X = mx_scale(block_amax(xb), fmt, scale_rule, scale_bits)  # per block, float64
    wt = _quotient_dtype(ct, fmt, rounding)
    with np.errstate(invalid="ignore"):
        v = xb.astype(wt, copy=False) * (1.0 / X[..., None]).astype(wt)
    p = quantize(v, fmt, rounding=rounding, overflow="saturate", rng=rng, sr_bits=sr_bits)
    return MXTensor(elements=tiling.merge(p.astype(ct, copy=False)),
                    scales=tiling.to_grid(X.astype(ct)), axis=tiling.axis, block_size=k,
                    fmt=fmt, two_d=tiling.two_d)


def _quotient_dtype(ct: np.dtype, fmt: FloatFormat, rounding: str) -> np.dtype:
    """The dtype V / X is formed in before the element rounding. float32 V / X is exact unless
    it falls below float32's smallest normal 2^-126. Rounding to nearest or toward zero to a
    format whose smallest positive value q is at least 2^-124 cannot tell such a quotient from
    its float32 rounding (both lie below q / 2, or at it only when q = 2^-125: excluded); every
    other case (directed and stochastic rounding, and custom element formats reaching below:
    FloatFormat(8, 3, bias=140)) forms V / X in float64, where it is exact."""
    near = rounding.startswith("nearest") or rounding == "toward_zero"
    return ct if near and fmt.min_subnormal >= 2.0**-124 else np.dtype(np.float64)


def mx_dequantize(t: MXTensor) -> Array:
    """elements * X per block: x's shape."""
    if not isinstance(t, MXTensor):
        raise TypeError(f"t must be an MXTensor (from mx_quantize); got {type(t).__name__}")
    return t.dequantize()


#: OCP MX's integer elements as formats on the same grid: k / 2^(b-2) for |k| <= 2^(b-1) - 1, the
#: grid of a FloatFormat with one exponent bit (its subnormals below 1, one normal binade
#: [1, 2)) and emax 0, as OCP MX v1.0 section 5.3.3 (MXINT8: an implicit scale of 2^-6) and
#: microxcaling's ``int8`` / ``int4`` / ``int2`` (``ebits=0``, ``emax=0``, clamped to the
#: symmetric range +-max_norm, so the two's-complement code -2^(b-1) is not used).
MX_INT_FORMATS = {
    "mxint8": FloatFormat(1, 6, bias=1, inf_nan="none", name="mxint8"),
    "mxint4": FloatFormat(1, 2, bias=1, inf_nan="none", name="mxint4"),
    "mxint2": FloatFormat(1, 0, bias=1, inf_nan="none", name="mxint2"),
}
MXINT8 = MX_INT_FORMATS["mxint8"]


@register_scaling
@dataclass(frozen=True)
class MXScaling(ScalingDialect):
    """MX block scaling as a recipe: blocks of ``block_size`` along ``axis`` (``two_d``: tiles of
    ``block_size`` x ``block_size`` of the last two axes) share an E8M0 scale (``scale_bits``
    narrower: microxcaling's) chosen by ``scale_rule`` (``SCALE_RULES``; ``mx_scale`` gives
    each rule's source)."""

    block_size: int = 32
    scale_rule: str = "floor"
    axis: int = -1
    two_d: bool = False
    scale_bits: int = 8
    kind: ClassVar[str] = "mx"

    def __post_init__(self) -> None:
        ck.integer(self.block_size, "block_size", lo=1, hi=1 << 16)
        ck.choice(self.scale_rule, "scale_rule", SCALE_RULES)
        ck.integer(self.axis, "axis", lo=-32, hi=31)
        ck.flag(self.two_d, "two_d")
        ck.integer(self.scale_bits, "scale_bits", lo=2, hi=8)
        if self.scale_rule == "nearest" and self.scale_bits != 8:
            raise ValueError("scale_rule='nearest' (ml_dtypes' E8M0 cast) has 8 scale bits")

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> MXTensor:
        """x in MX blocks along ``axis`` (default: the recipe's); the elements always saturate
        (``overflow``, ``state``, ``quantizer``: unused)."""
        return mx_quantize(x, fmt, block_size=self.block_size,
                           axis=self.axis if axis is None else axis,
                           scale_rule=self.scale_rule, rounding=rounding, rng=rng,
                           sr_bits=sr_bits, two_d=self.two_d, scale_bits=self.scale_bits)

    def to_dict(self) -> dict[str, Any]:
        """As the base's, without ``two_d`` and ``scale_bits`` at their defaults (a recipe
        written before they existed reads and writes the same JSON)."""
        out = super().to_dict()
        for name, default in (("two_d", False), ("scale_bits", 8)):
            if out[name] == default:
                del out[name]
        return out

    def describe(self) -> str:
        shape = (f"{self.block_size}x{self.block_size} tiles" if self.two_d
                 else f"blocks of {self.block_size}")
        scale = "E8M0" if self.scale_bits == 8 else f"{self.scale_bits}-bit exponent"
        return f"MX {shape} ({self.scale_rule} {scale} scale)"
