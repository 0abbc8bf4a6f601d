"""Precision policies: a format (with rounding and scaling) for every role a tensor can play.

Roles:

=============  =================================================================================
params         the weights the forward pass reads (the low-precision copy when there is a master)
compute        matmul inputs in the forward pass (fp8 recipes scale them)
accumulate     the matmul accumulator (``accumulate_every`` terms are summed exactly in float32
               before each rounding to a lower accumulate format)
activations    outputs of ops, matmul outputs included, and what is saved for backward
gradients      activation gradients flowing backward: the inputs of the backward matmuls
optimizer      optimizer moments (Adam's m and v)
master         the master copy of the weights that the optimizer updates; None when there is none
               (the optimizer updates ``params`` in place, in their format)
communication  gradient reduction buffers (FSDP's reduce dtype)
=============  =================================================================================

Accumulation roles (``Accumulation``: a format and a chunk), the sums inside the reductions:

===================  ==========================================================================
norm_accumulate      LayerNorm's mean and variance sums, RMSNorm's mean square
softmax_accumulate   the softmax denominator and the log-sum-exp sum of the cross-entropy
accumulate_chunk     with a lower ``accumulate`` format, the matmul's promotion interval: every
                     ``accumulate_chunk`` products the accumulator is added to a float32 total
                     and restarted (fp8 GEMMs promote every 128 products, DeepSeek-V3)
===================  ==========================================================================

Their defaults (float32, no chunk, no promotion) are the reductions as they are without them, bit
for bit, and a policy's JSON leaves them out; ``policy.norm_accumulate`` is passed to the ops as
``accumulate=`` (``normlab.functional``, ``normlab.kernels``).

The format ``float32`` means "no rounding" for float32 data: ``Precision("float32").rounds`` is
False. Policies are data: ``to_json`` / ``from_json`` round-trip, and every value is checked when
a policy is built, with errors that name the role.

Presets: ``fp32``; ``amp_bf16`` and ``amp_fp16`` (bf16/fp16 params, compute, activations and
gradients; fp32 accumulation, optimizer and master weights; fp16 with torch's dynamic loss
scaler); ``pure_bf16`` (everything bf16, no master copy); ``fp8_hybrid`` (TransformerEngine's
HYBRID: E4M3 forward, E5M2 backward, delayed scaling; bf16 elsewhere, fp32 master); ``mxfp8``
(TE's MXFP8BlockScaling: E4M3 both ways in blocks of 32 with the round-up E8M0 rule that TE and
cuBLAS use; ``scale_rule="floor"`` is the OCP spec's).

Recipes (``RECIPES``, named as presets are), with bf16 weights and
activations and fp32 master weights and optimizer, their linear layers' operands set per GEMM
(``operands``, below): ``nvfp4`` (TransformerEngine's NVFP4BlockScaling: E2M1 in TE's NVFP4,
16x16 tiles for the weight, 1x16 blocks elsewhere, the 16-point random Hadamard transform on the
weight gradient's two operands, stochastic rounding of the output's gradient); ``mxfp8_2d``
(``mxfp8`` with 32x32 weight tiles); ``fp8_blockwise`` (DeepSeek-V3: E4M3 in DeepGEMM's dialect,
1x128 blocks along each GEMM's reduction axis, 128x128 weight tiles).

**Operands** (``operands``: GEMM operand -> Precision, ``GEMM_OPERANDS``): a linear layer's
three GEMMs (y = x W^T, dx = dY W, dW = dY^T x) each quantize their two operands from the
high-precision tensors along that GEMM's reduction axis, as TransformerEngine's recipes do; an
operand not named takes its role's precision (``OPERAND_ROLES``). ``normlab.torch.emulate``
and normlab's NumPy model apply all six (``normlab.nn.numerics``: the weight gradient from
x and dY quantized along the token axis, dx from ``dgrad.weight``). ``nvfp4_recipe`` builds
``nvfp4`` with each of its parts switchable (the Hadamard transform, the 2D weight tiles,
stochastic rounding of the gradients, the layers kept in bf16). **keep_layers**: module names
or patterns (``fnmatch``, a name or a module around it) that compute in ``params``' format,
unscaled (``kept()``), in normlab's model; ``normlab.torch.emulate`` gives them the same policy
through its per-module overrides. Both fields are empty in the older presets and left out of a
policy's JSON when empty.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .accumulate import Accumulation
from .blocks import FP8BlockScaling
from .formats import FORMATS, FloatFormat, get_format
from .hadamard import GEMM_OPERANDS, HadamardScaling
from .loss_scaling import DynamicLossScaler, StaticLossScaler
from .nvfp4 import NVFP4Scaling
from .rounding import _check_overflow, _check_rounding, quantize
from .scaling import (
    DelayedScaling,
    MXScaling,
    Quantized,
    ScaledTensor,
    Scaling,
    ScalingState,
    scaling_from_dict,
)

ROLES = ("params", "compute", "accumulate", "activations", "gradients", "optimizer", "master",
         "communication")
ACCUMULATION_ROLES = ("norm_accumulate", "softmax_accumulate")
_NO_ACCUMULATION = Accumulation()  # the default: float32, the reductions as they are
_FLOAT32 = FORMATS["float32"]
_FORMAT_FIELDS = ("exponent_bits", "mantissa_bits", "bias", "inf_nan", "subnormals", "signed",
                  "zero", "name")

#: The role each GEMM operand of a linear layer refines (``PrecisionPolicy.operand``): the
#: forward's operands and the weight in the backward are matrix-multiply operands (``compute``),
#: the output's gradient is ``gradients``.
OPERAND_ROLES: Mapping[str, str] = MappingProxyType(dict(zip(GEMM_OPERANDS, (
    "compute", "compute", "gradients", "compute", "compute", "gradients"))))


def _format_from(value: Any, where: str) -> FloatFormat:
    if isinstance(value, Mapping):
        unknown = set(value) - set(_FORMAT_FIELDS)
        if unknown:
            raise ValueError(f"{where}: unknown format field(s) {sorted(unknown)}; a custom "
                             f"format has {', '.join(_FORMAT_FIELDS)}")
        try:
            return FloatFormat(**value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{where}: {exc}") from None
    try:
        return get_format(value, where)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc)) from None


def _format_to(fmt: FloatFormat) -> Any:
    if FORMATS.get(fmt.name or "") == fmt:
        return fmt.name
    return {f: getattr(fmt, f) for f in _FORMAT_FIELDS}


@dataclass(frozen=True)
class Precision:
    """How one role's tensors are represented.

    Args:
        format: a FloatFormat or a name in FORMATS (``"float32"``: no rounding of float32 data).
        rounding: as ``quantize`` (``"stochastic"`` needs an rng when applied).
        overflow: as ``quantize``; None: the format's default, or ``"saturate"`` under scaling.
        scaling: None, a scaling dialect (``TensorScaling``, ``DelayedScaling``, ``MXScaling``,
            any class of ``scaling.SCALINGS``), or its ``to_dict()`` form.
        sr_bits: stochastic rounding from this many random bits (``quantize``'s ``sr_bits``:
            hardware's and unit-scaling's few-bit SR); None: exact probabilities.
    """

    format: FloatFormat
    rounding: str = "nearest_even"
    overflow: str | None = None
    scaling: Scaling | None = None
    sr_bits: int | None = None

    def __post_init__(self) -> None:
        fmt = _format_from(self.format, "format")
        object.__setattr__(self, "format", fmt)
        _check_rounding(self.rounding)
        _check_overflow(self.overflow, fmt)
        object.__setattr__(self, "scaling", scaling_from_dict(self.scaling, "precision.scaling"))
        if self.sr_bits is not None:
            if self.rounding != "stochastic":
                raise ValueError(f"sr_bits applies to rounding='stochastic' only; got rounding="
                                 f"{self.rounding!r}")
            object.__setattr__(self, "sr_bits", ck.integer(self.sr_bits, "sr_bits", lo=1,
                                                           hi=32))

    @property
    def rounds(self) -> bool:
        """False when applying it to float32 data changes nothing (float32, no scaling)."""
        return not (self.format == _FLOAT32 and self.scaling is None and self.overflow is None)

    def new_state(self) -> ScalingState | None:
        """The per-tensor state its scaling keeps from step to step (delayed scaling's amax
        history); None when it keeps none."""
        return None if self.scaling is None else self.scaling.new_state(self.format)

    def apply(self, x: Any, *, rng: np.random.Generator | None = None,
              state: ScalingState | None = None, axis: int | None = None,
              quantizer: Callable | None = None) -> Array:
        """x represented in this precision (values on the format's grid, dequantized when
        scaled), float32 (float64 for float64 input), x's shape.

        Args:
            rng: for stochastic rounding.
            state: the tensor's ``new_state()``, required by a scaling that keeps one
                (delayed scaling).
            axis: the block axis of a block scaling (default: the recipe's).
            quantizer: a function with ``quantize``'s signature and results, used for the
                element rounding where the scaling rounds elements one by one (default:
                ``normlab.precision.quantize``; ``normlab.kernels.quantize`` is the same,
                faster).
        """
        s = self.scaling
        if s is None:
            q = quantizer or quantize
            if self.sr_bits is not None:  # every element rounding draws sr_bits random bits
                q = functools.partial(q, sr_bits=self.sr_bits)
            return q(x, self.format, rounding=self.rounding, overflow=self.overflow, rng=rng)
        return s.qdq(x, self.format, rounding=self.rounding, overflow=self._scaled_overflow,
                     rng=rng, state=state, axis=axis, sr_bits=self.sr_bits, quantizer=quantizer)

    def quantize(self, x: Any, *, rng: np.random.Generator | None = None,
                 state: ScalingState | None = None, axis: int | None = None) -> Quantized:
        """x in this precision as a quantized value: its elements, scales and ``stats(x)``
        (unscaled: one scale of 1). ``apply`` is its ``dequantize()``."""
        s = self.scaling
        if s is None:
            fmt = self.format
            q = quantize(x, fmt, rounding=self.rounding, overflow=self.overflow, rng=rng,
                         sr_bits=self.sr_bits)
            return ScaledTensor(q, 1.0, 1.0, fmt)
        return s.quantize(x, self.format, rounding=self.rounding,
                          overflow=self._scaled_overflow, rng=rng, state=state, axis=axis,
                          sr_bits=self.sr_bits)

    @property
    def _scaled_overflow(self) -> str:
        return "saturate" if self.overflow is None else self.overflow

    def to_value(self) -> Any:
        """JSON value: the format name alone when nothing else is set, else an object."""
        fmt = _format_to(self.format)
        if self.rounding == "nearest_even" and self.overflow is None and self.scaling is None \
                and isinstance(fmt, str):
            return fmt
        out: dict[str, Any] = {"format": fmt, "rounding": self.rounding}
        if self.sr_bits is not None:
            out["sr_bits"] = self.sr_bits
        if self.overflow is not None:
            out["overflow"] = self.overflow
        if self.scaling is not None:
            out["scaling"] = self.scaling.to_dict()
        return out

    @classmethod
    def from_value(cls, value: Any, where: str = "precision") -> Precision:
        """From a format name, a FloatFormat, a Precision, or an object with ``format`` and
        optionally ``rounding``, ``overflow``, ``scaling``."""
        if isinstance(value, Precision):
            return value
        if isinstance(value, (str, FloatFormat)):
            return cls(_format_from(value, where))
        if not isinstance(value, Mapping):
            raise TypeError(f"{where} must be a format name or an object with 'format'; got "
                            f"{value!r}")
        unknown = set(value) - {"format", "rounding", "overflow", "scaling", "sr_bits"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; a precision has "
                             f"format, rounding, overflow, scaling, sr_bits")
        if "format" not in value:
            raise ValueError(f"{where} needs a 'format'")
        try:
            return cls(_format_from(value["format"], f"{where}.format"),
                       value.get("rounding", "nearest_even"), value.get("overflow"),
                       scaling_from_dict(value.get("scaling"), f"{where}.scaling"),
                       value.get("sr_bits"))
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            raise type(exc)(msg if msg.startswith(where) else f"{where}: {msg}") from None

    def __str__(self) -> str:
        parts = [str(self.format)]
        if self.rounding != "nearest_even":
            parts.append(self.rounding if self.sr_bits is None
                         else f"{self.rounding} ({self.sr_bits} random bits)")
        if self.overflow is not None:
            parts.append(f"overflow={self.overflow}")
        if self.scaling is not None:
            parts.append(self.scaling.describe())
        return ", ".join(parts)


@dataclass(frozen=True)
class LossScaling:
    """Loss-scaling settings; ``make()`` builds the scaler. Defaults are torch.amp.GradScaler's.

    kind: ``"dynamic"`` or ``"static"`` (a fixed ``init_scale``).
    """

    kind: str = "dynamic"
    init_scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("dynamic", "static"):
            raise ValueError(f"loss_scaling.kind must be 'dynamic' or 'static'; got "
                             f"{self.kind!r}")
        self.make()  # validates the numbers

    def make(self) -> StaticLossScaler:
        """A fresh StaticLossScaler or DynamicLossScaler."""
        if self.kind == "static":
            return StaticLossScaler(self.init_scale)
        return DynamicLossScaler(self.init_scale, self.growth_factor, self.backoff_factor,
                                 self.growth_interval, self.min_scale)


@dataclass(frozen=True)
class PrecisionPolicy:
    """A Precision per role (module docstring), loss scaling, and the accumulation chunk.

    Roles accept a Precision, a FloatFormat, a format name or a JSON-style object; ``master``
    may be None (no master copy). ``accumulate_every``: products summed exactly (in float32)
    before each rounding to a lower-precision ``accumulate`` format (1: every product).
    ``operands``: a mapping from ``GEMM_OPERANDS`` to precisions (stateless scalings only);
    ``keep_layers``: module names or patterns kept in ``params``' format (module docstring).
    """

    name: str
    params: Precision
    compute: Precision
    accumulate: Precision
    activations: Precision
    gradients: Precision
    optimizer: Precision
    master: Precision | None
    communication: Precision
    loss_scaling: LossScaling | None = None
    accumulate_every: int = 1
    norm_accumulate: Accumulation = _NO_ACCUMULATION
    softmax_accumulate: Accumulation = _NO_ACCUMULATION
    accumulate_chunk: int | None = None
    operands: Any = ()
    keep_layers: Any = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string; got {self.name!r}")
        for role in ROLES:
            value = getattr(self, role)
            if role == "master" and value is None:
                continue
            if value is None:
                raise ValueError(f"role {role!r} needs a format (use 'float32' for no rounding; "
                                 f"only 'master' may be null: no master copy)")
            object.__setattr__(self, role, Precision.from_value(value, role))
        ls = self.loss_scaling
        if isinstance(ls, Mapping):
            try:
                ls = ck.dataclass_from(LossScaling, ls, "loss_scaling: unknown field(s)")
            except (TypeError, ValueError) as exc:
                msg = str(exc)
                raise type(exc)(msg if msg.startswith("loss_scaling") else
                                f"loss_scaling: {msg}") from None
        if ls is not None and not isinstance(ls, LossScaling):
            raise TypeError(f"loss_scaling must be None, a LossScaling or an object; got {ls!r}")
        object.__setattr__(self, "loss_scaling", ls)
        k = self.accumulate_every
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"accumulate_every must be an integer >= 1; got {k!r}")
        object.__setattr__(self, "accumulate_every", int(k))
        for role in ACCUMULATION_ROLES:
            object.__setattr__(self, role, Accumulation.from_value(getattr(self, role), role))
        c = self.accumulate_chunk
        if c is not None:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
                raise ValueError(f"accumulate_chunk must be None or an integer >= 1 (products "
                                 f"between promotions to float32); got {c!r}")
            object.__setattr__(self, "accumulate_chunk", int(c))
        object.__setattr__(self, "operands", _operands_from(self.operands))
        object.__setattr__(self, "keep_layers", _keep_from(self.keep_layers))

    def operand(self, name: str) -> Precision:
        """The precision of one GEMM operand of a linear layer (``GEMM_OPERANDS``): the
        policy's entry in ``operands``, else its role's (``OPERAND_ROLES``)."""
        if name not in OPERAND_ROLES:
            raise ValueError(f"unknown GEMM operand {name!r}; operands: "
                             f"{', '.join(OPERAND_ROLES)}")
        got = dict(self.operands).get(name)
        return getattr(self, OPERAND_ROLES[name]) if got is None else got

    def kept(self) -> PrecisionPolicy:
        """The policy of a layer in ``keep_layers``: the matrix multiplies' operands and
        gradients in the ``params`` format (bfloat16 for the recipes), unscaled; every other
        role as this policy's (a recipe's "last layers and head in bf16")."""
        plain = Precision(self.params.format)
        return dataclasses.replace(self, name=f"{self.name}/kept", compute=plain,
                                   gradients=plain, operands=(), keep_layers=())

    def keeps(self, name: str) -> bool:
        """Whether the module ``name`` (dotted) is in ``keep_layers``: a pattern (``fnmatch``)
        matches the name or one of the modules around it."""
        parts = name.split(".")
        around = [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
        return any(fnmatch.fnmatchcase(a, p) for p in self.keep_layers for a in around)

    @classmethod
    def preset(cls, name: str) -> PrecisionPolicy:
        """One of PRESETS (fp32, amp_bf16, amp_fp16, pure_bf16, fp8_hybrid, mxfp8) or of
        RECIPES (nvfp4, mxfp8_2d, fp8_blockwise)."""
        got = PRESETS.get(name) if isinstance(name, str) else None
        got = RECIPES.get(name) if got is None and isinstance(name, str) else got
        if got is None:
            raise ValueError(f"unknown policy {name!r}; presets: {', '.join(PRESETS)}; "
                             f"recipes: {', '.join(RECIPES)}")
        return got

    def role(self, name: str) -> Precision | None:
        if name not in ROLES:
            raise ValueError(f"unknown role {name!r}; roles: {', '.join(ROLES)}")
        return getattr(self, name)

    def make_loss_scaler(self) -> StaticLossScaler | None:
        """A fresh loss scaler, or None when the policy has no loss scaling."""
        return None if self.loss_scaling is None else self.loss_scaling.make()

    def replace(self, **changes: Any) -> PrecisionPolicy:
        """A copy with some fields changed (validated like a new policy)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for role in ROLES:
            p = getattr(self, role)
            out[role] = None if p is None else p.to_value()
        out["loss_scaling"] = (None if self.loss_scaling is None
                               else dataclasses.asdict(self.loss_scaling))
        out["accumulate_every"] = self.accumulate_every
        for role in ACCUMULATION_ROLES:  # only when set: the JSON of a policy without is as before
            acc = getattr(self, role)
            if not acc.default:
                out[role] = acc.to_value()
        if self.accumulate_chunk is not None:
            out["accumulate_chunk"] = self.accumulate_chunk
        if self.operands:  # only when set, as the accumulation roles
            out["operands"] = {k: p.to_value() for k, p in self.operands}
        if self.keep_layers:
            out["keep_layers"] = list(self.keep_layers)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrecisionPolicy:
        if not isinstance(data, Mapping):
            raise TypeError(f"a policy must be a JSON object; got {type(data).__name__}")
        other = ("name", "loss_scaling", "accumulate_every", *ACCUMULATION_ROLES,
                 "accumulate_chunk", "operands", "keep_layers")
        unknown = [k for k in data if k not in ROLES and k not in other]
        if unknown:
            raise ValueError(f"unknown role or key {unknown[0]!r} in the policy; roles: "
                             f"{', '.join(ROLES)}; other keys: {', '.join(other)}")
        missing = [r for r in ROLES if r not in data]
        if missing:
            raise ValueError(f"the policy has no {', '.join(map(repr, missing))}; every role "
                             f"needs a format ('float32' for none; master may be null)")
        return cls(name=data.get("name", "custom"), **{r: data[r] for r in ROLES},
                   loss_scaling=data.get("loss_scaling"),
                   accumulate_every=data.get("accumulate_every", 1),
                   norm_accumulate=Accumulation.from_value(data.get("norm_accumulate"),
                                                           "norm_accumulate"),
                   softmax_accumulate=Accumulation.from_value(data.get("softmax_accumulate"),
                                                              "softmax_accumulate"),
                   accumulate_chunk=data.get("accumulate_chunk"),
                   operands=data.get("operands", ()), keep_layers=data.get("keep_layers", ()))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> PrecisionPolicy:
        """From a JSON string (or an already parsed object)."""
        if isinstance(text, Mapping):
            return cls.from_dict(text)
        if not isinstance(text, str):
            raise TypeError(f"from_json takes a JSON string; got {type(text).__name__}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the policy is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def describe(self) -> str:
        """One line per role."""
        lines = [f"policy {self.name}"]
        for role in ROLES:
            p = getattr(self, role)
            lines.append(f"  {role:<14} {'none (no master copy)' if p is None else p}")
        ls = self.loss_scaling
        lines.append(f"  {'loss scaling':<14} "
                     f"{'none' if ls is None else f'{ls.kind}, initial scale {ls.init_scale:g}'}")
        for role in ACCUMULATION_ROLES:
            acc = getattr(self, role)
            if not acc.default:
                lines.append(f"  {role:<14} {acc}")
        if self.accumulate_chunk is not None:
            lines.append(f"  {'accumulate_chunk':<14} promoted to float32 every "
                         f"{self.accumulate_chunk} products")
        for op, p in self.operands:
            lines.append(f"  {op:<14} {p}")
        if self.keep_layers:
            lines.append(f"  {'kept in':<14} {self.params} (unscaled): "
                         f"{', '.join(self.keep_layers)}")
        return "\n".join(lines)


def _operands_from(value: Any) -> tuple[tuple[str, Precision], ...]:
    """``operands`` as (GEMM operand, Precision) pairs in ``GEMM_OPERANDS`` order, each checked
    (a known operand; a precision whose scaling keeps no state from step to step)."""
    if isinstance(value, Mapping):
        value = tuple(value.items())
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(e, (tuple, list)) and len(e) == 2 for e in value):
        raise TypeError(f"operands must be a mapping from GEMM operands "
                        f"({', '.join(GEMM_OPERANDS)}) to precisions; got {value!r}")
    got: dict[str, Precision] = {}
    for name, v in value:
        if name not in OPERAND_ROLES:
            raise ValueError(f"operands: unknown GEMM operand {name!r}; operands: "
                             f"{', '.join(GEMM_OPERANDS)}")
        p = Precision.from_value(v, f"operands.{name}")
        if p.new_state() is not None:
            raise ValueError(f"operands.{name}: {p.scaling.describe() if p.scaling else p} keeps "
                             f"a state from step to step (delayed scaling); an operand's precision "
                             f"must scale from the tensor itself (give the role that scaling)")
        got[name] = p
    return tuple((k, got[k]) for k in GEMM_OPERANDS if k in got)


def _keep_from(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not all(
            isinstance(v, str) and v for v in value):
        raise TypeError(f"keep_layers must be a list of module names or patterns (fnmatch); got "
                        f"{value!r}")
    return tuple(value)


def _preset(name: str, *, params: Any, compute: Any, activations: Any, gradients: Any,
            optimizer: Any = "float32", master: Any = "float32", communication: Any = "float32",
            accumulate: Any = "float32", loss_scaling: LossScaling | None = None
            ) -> PrecisionPolicy:
    return PrecisionPolicy(name, params=params, compute=compute, accumulate=accumulate,
                           activations=activations, gradients=gradients, optimizer=optimizer,
                           master=master, communication=communication, loss_scaling=loss_scaling)


def _fp8(fmt: str, scaling: Scaling) -> Precision:
    return Precision(get_format(fmt), scaling=scaling)


def _nvfp4(*, two_d: bool = False, rht: bool = False, sr: bool = False) -> Precision:
    """TE's NVFP4 (``NVFP4Scaling(dialect="te")``): 1x16 blocks, 16x16 tiles with ``two_d``,
    the 16-point RHT first with ``rht``, stochastic rounding of the elements with ``sr``."""
    s: Scaling = NVFP4Scaling(two_d=two_d)
    return Precision(get_format("float4_e2m1fn"), "stochastic" if sr else "nearest_even",
                     scaling=HadamardScaling(s) if rht else s)


def transposes(a: Precision, b: Precision) -> bool:
    """Whether rounding a matrix by ``a`` along its rows gives the matrix rounded by ``b``
    along its columns: one deterministic precision whose blocks, if any, are square tiles with
    one tensor scale (a recipe's ``fprop.weight`` and ``dgrad.weight``: the backward may reuse
    the forward's rounded weight)."""
    if a != b or a.rounding == "stochastic":
        return False
    s: Any = a.scaling
    return s is None or (getattr(s, "two_d", False) and s.kind in ("nvfp4", "mx", "fp8_blocks")
                         and getattr(s, "global_scale", "tensor") == "tensor")


def nvfp4_recipe(*, rht: bool = True, two_d: bool = True, sr: bool = True,
                 keep_layers: Any = (), name: str | None = None) -> PrecisionPolicy:
    """TransformerEngine's NVFP4BlockScaling recipe (arXiv 2509.25149, section 4) with each of
    its parts switchable: ``rht`` the 16-point random Hadamard transform on the weight
    gradient's two operands (``wgrad.input``, ``wgrad.grad_output``); ``two_d`` 16x16 tiles for
    the weight (``fprop.weight``, ``dgrad.weight``; else 1x16 blocks along each GEMM's reduction
    axis); ``sr`` stochastic rounding of the gradients (``dgrad.grad_output``,
    ``wgrad.grad_output`` and the ``gradients`` role; else round to nearest even);
    ``keep_layers`` the layers kept in bf16 (module names or patterns, as
    ``PrecisionPolicy.keep_layers``: for normlab's GPT ``blocks.<i>`` and ``head``; for a torch
    model ``normlab.torch.recipes.keep_last``). The default is ``RECIPES["nvfp4"]``; ``name``
    defaults to ``nvfp4`` followed by the parts removed (``nvfp4-rht-2d-sr``) and
    ``+keep<n>`` for n kept layers.

    Returns:
        a PrecisionPolicy (bf16 weights and activations, fp32 master weights and optimizer).
    """
    for arg, v in (("rht", rht), ("two_d", two_d), ("sr", sr)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"nvfp4_recipe: {arg} must be True or False; got {v!r}")
    keep = _keep_from(keep_layers)
    if name is None:
        off = [n for n, on in (("rht", rht), ("2d", two_d), ("sr", sr)) if not on]
        name = "nvfp4" + "".join(f"-{n}" for n in off) + (f"+keep{len(keep)}" if keep else "")
    if not isinstance(name, str) or not name:
        raise TypeError(f"nvfp4_recipe: name must be a non-empty string; got {name!r}")
    return _recipe(name, _nvfp4(), _nvfp4(sr=sr), {
        "fprop.input": _nvfp4(), "fprop.weight": _nvfp4(two_d=two_d),
        "dgrad.grad_output": _nvfp4(sr=sr), "dgrad.weight": _nvfp4(two_d=two_d),
        "wgrad.input": _nvfp4(rht=rht),
        "wgrad.grad_output": _nvfp4(rht=rht, sr=sr)}).replace(keep_layers=keep)


def _recipe(name: str, compute: Precision, gradients: Precision,
            operands: Mapping[str, Precision]) -> PrecisionPolicy:
    """A block-scaled recipe: bf16 weights and activations, fp32 master weights and optimizer,
    the matrix multiplies' operands per GEMM (``operands``; the roles for any other product)."""
    return _preset(name, params="bfloat16", compute=compute, activations="bfloat16",
                   gradients=gradients).replace(operands=operands)


_MX = MXScaling(scale_rule="ceil")
_MX_2D = MXScaling(scale_rule="ceil", two_d=True)
_FP8_BLOCKS = FP8BlockScaling("deepgemm")
_FP8_TILES = FP8BlockScaling("deepgemm", two_d=True)


PRESETS: Mapping[str, PrecisionPolicy] = MappingProxyType({
    "fp32": _preset("fp32", params="float32", compute="float32", activations="float32",
                    gradients="float32", master=None),
    "amp_bf16": _preset("amp_bf16", params="bfloat16", compute="bfloat16",
                        activations="bfloat16", gradients="bfloat16"),
    "amp_fp16": _preset("amp_fp16", params="float16", compute="float16", activations="float16",
                        gradients="float16", loss_scaling=LossScaling()),
    "pure_bf16": _preset("pure_bf16", params="bfloat16", compute="bfloat16",
                         activations="bfloat16", gradients="bfloat16", optimizer="bfloat16",
                         master=None, communication="bfloat16"),
    "fp8_hybrid": _preset("fp8_hybrid", params="bfloat16",
                          compute=_fp8("float8_e4m3fn", DelayedScaling()),
                          activations="bfloat16",
                          gradients=_fp8("float8_e5m2", DelayedScaling())),
    "mxfp8": _preset("mxfp8", params="bfloat16",
                     compute=_fp8("float8_e4m3fn", MXScaling(scale_rule="ceil")),
                     activations="bfloat16",
                     gradients=_fp8("float8_e4m3fn", MXScaling(scale_rule="ceil"))),
})

#: The block-scaled recipes (module docstring), named like presets (``preset``, ``get_policy``,
#: a training run's ``precision``) and kept apart from PRESETS, whose every entry the lab's
#: tables and ``normlab inspect``'s default columns read.
RECIPES: Mapping[str, PrecisionPolicy] = MappingProxyType({
    "nvfp4": nvfp4_recipe(),
    "mxfp8_2d": _recipe("mxfp8_2d", _fp8("float8_e4m3fn", _MX), _fp8("float8_e4m3fn", _MX), {
        "fprop.weight": _fp8("float8_e4m3fn", _MX_2D),
        "dgrad.weight": _fp8("float8_e4m3fn", _MX_2D)}),
    "fp8_blockwise": _recipe("fp8_blockwise", _fp8("float8_e4m3fn", _FP8_BLOCKS),
                             _fp8("float8_e4m3fn", _FP8_BLOCKS), {
                                 "fprop.weight": _fp8("float8_e4m3fn", _FP8_TILES),
                                 "dgrad.weight": _fp8("float8_e4m3fn", _FP8_TILES)}),
})


def mxfp8_recipe(scale_rule: str = "ceil") -> PrecisionPolicy:
    """The ``mxfp8`` preset with its shared scale chosen by ``scale_rule`` (``SCALE_RULES``):
    E4M3 both ways in blocks of 32 along each tensor's last axis, bf16 elsewhere, fp32 master
    weights. ``"ceil"`` (round the scale up: TransformerEngine, cuBLAS, Mishra et al.
    arXiv:2506.08027) returns the preset itself; ``"floor"`` is the OCP MX v1.0 spec's rule,
    which can saturate a block's largest values (``mx_scale``). Named ``mxfp8`` for ceil,
    ``mxfp8_<rule>`` otherwise; pass it as a training run's ``precision`` with
    ``policy.to_json(indent=None)``.

        >>> mxfp8_recipe("floor").compute.scaling.scale_rule
        'floor'
    """
    from .scaling import SCALE_RULES

    rule = ck.choice(scale_rule, "scale_rule", SCALE_RULES)
    if rule == "ceil":
        return PRESETS["mxfp8"]
    e4m3 = _fp8("float8_e4m3fn", MXScaling(scale_rule=rule))
    return PRESETS["mxfp8"].replace(name=f"mxfp8_{rule}", compute=e4m3, gradients=e4m3)


def _mxfp4(*, rht: bool = False, sr: bool = False) -> Precision:
    """MXFP4: E2M1 elements, an E8M0 scale per 32 values rounded up (``_MX``), the 16-point
    RHT first with ``rht``, stochastic rounding of the elements with ``sr``."""
    return Precision(get_format("float4_e2m1fn"), "stochastic" if sr else "nearest_even",
                     scaling=HadamardScaling(_MX) if rht else _MX)


def mxfp4_recipe(*, rht: bool = True, sr: bool = True, backward_only: bool = True,
                 name: str | None = None) -> PrecisionPolicy:
    """Tseng et al.'s MXFP4 training recipe (arXiv 2502.20586, "Training LLMs with MXFP4") with
    each part switchable: the backward GEMMs' four operands (``dgrad.grad_output``,
    ``dgrad.weight``, ``wgrad.input``, ``wgrad.grad_output``) in MXFP4 (E2M1 elements, an E8M0
    scale per 32 values along each GEMM's reduction axis, rounded up), with ``rht`` the 16-point
    random Hadamard transform (TE's signs) before the rounding and ``sr`` stochastic rounding
    of the elements (else round to nearest even). ``backward_only`` (the paper's recipe) keeps
    the forward in bf16; False puts the forward's two operands and the ``compute`` role in
    MXFP4 as well (round to nearest, no rotation). ``name`` defaults to ``mxfp4`` followed by
    the parts removed (``mxfp4-rht-sr``) and ``+fwd`` when the forward is MXFP4 too.

        >>> mxfp4_recipe(rht=False).operand("dgrad.weight").rounding
        'stochastic'

    Returns:
        a PrecisionPolicy (bf16 weights and activations, fp32 master weights and optimizer).
    """
    for arg, v in (("rht", rht), ("sr", sr), ("backward_only", backward_only)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"mxfp4_recipe: {arg} must be True or False; got {v!r}")
    if name is None:
        off = [n for n, on in (("rht", rht), ("sr", sr)) if not on]
        name = "mxfp4" + "".join(f"-{n}" for n in off) + ("" if backward_only else "+fwd")
    if not isinstance(name, str) or not name:
        raise TypeError(f"mxfp4_recipe: name must be a non-empty string; got {name!r}")
    back = _mxfp4(rht=bool(rht), sr=bool(sr))
    ops = {op: back for op in ("dgrad.grad_output", "dgrad.weight", "wgrad.input",
                               "wgrad.grad_output")}
    if backward_only:
        return _recipe(name, Precision(get_format("bfloat16")),
                       Precision(get_format("bfloat16")), ops)
    ops.update({"fprop.input": _mxfp4(), "fprop.weight": _mxfp4()})
    return _recipe(name, _mxfp4(), back, ops)


def get_policy(name: str) -> PrecisionPolicy:
    """``PrecisionPolicy.preset(name)``."""
    return PrecisionPolicy.preset(name)
