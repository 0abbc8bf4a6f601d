"""Sums accumulated in a low-precision format, chunked as hardware promotes partial sums.

    accumulate_sum(x, "bfloat16", chunk=128)

sums ``x`` along an axis the way a reduction with a bfloat16 accumulator does: inside each chunk
of ``chunk`` consecutive terms a running sum in the format, each addition's exact sum rounded
once to the format, and the chunks' partial sums added in the ``promote`` format (float32 by
default), as fp8 GEMMs promote their partial sums to float32 every 128 products (DeepSeek-V3's
recipe; TransformerEngine's split accumulator) and as fused norm and softmax kernels keep a
per-thread partial in the input type. ``chunk=None`` is one running sum over the whole axis: the
accumulator stalls once its half-ulp exceeds the terms (swamping), which is how a bfloat16 sum of
1000 ones stops at 256 (ml_dtypes' ``arr.sum()``) and a softmax row accumulated in 16 bits sums
to less than 1.

**Rounded once.** An addition is done in float64 *rounded to odd* (:func:`add_to_odd`: the exact
sum when float64 holds it, else the float64 neighbour of it whose last bit is 1), then rounded
to the format. Rounding to odd at 53 bits followed by any rounding to at most 51 bits is the
exact sum rounded once (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE Trans. Computers 2008, Theorem 1). A plain float64
addition is not enough with a bfloat16 or tfloat32 accumulator and float32 terms: their exponent
ranges let the exact sum need more than 53 bits, and a float64 rounding onto the format's
midpoint then rounds a second time (``[2^-60, 1 + 2^-8]`` in bfloat16: 1.0 instead of
1.0078125). ``tests/precision/test_accumulate_rounded_once.py`` checks every float32 value
halfway between two bfloat16 numbers with every power-of-two perturbation below float64's
resolution, and random sums against exact rational arithmetic.

This is the reference for the accumulation roles of the reductions; the statistics of the norms
and the softmax sums can be computed with it (``benchmarks/accumulation.py`` measures their
error against float64 by width, format and chunk).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FORMATS, FloatFormat, get_format
from .rounding import ROUNDINGS, _check_overflow, quantize

_FORMAT_FIELDS = ("exponent_bits", "mantissa_bits", "bias", "inf_nan", "subnormals", "signed",
                  "zero", "name")


def accumulate_sum(x: Any, fmt: Any, *, axis: int = -1, chunk: int | None = None,
                   promote: Any = "float32", rounding: str = "nearest_even",
                   rng: np.random.Generator | None = None) -> Array:
    """Sum ``x`` along ``axis`` with a ``fmt`` accumulator, ``chunk`` terms at a time.

    Args:
        x: float array; the terms are first rounded to float32 (their storage type).
        fmt: the accumulator's format (a name in FORMATS, a FloatFormat or a dtype).
        axis: the reduced axis.
        chunk: terms per running sum in ``fmt`` (>= 1); None: the whole axis.
        promote: the format the chunks' partial sums are added in (float32 by default; each
            exact sum rounded once).
        rounding, rng: the accumulator's rounding (``quantize``'s modes; stochastic needs rng;
            stochastic rounding takes its probability from the sum rounded to odd, less than
            2^-29 of the format's spacing from the exact sum's).

    Returns:
        float64 array of x's shape without ``axis``, holding values of ``promote`` (of ``fmt``
        when there is one chunk). An empty axis sums to 0.
    """
    x = ck.float_array(x, "x")
    fmt_ = get_format(fmt, "fmt")
    promote_ = get_format(promote, "promote")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension to sum along; got a scalar")
    ax = ck.integer(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    n = x.shape[ax]
    k = n if chunk is None else ck.integer(chunk, "chunk", lo=1, hi=1 << 40)
    quantize(np.zeros(1, np.float32), fmt_, rounding=rounding, rng=rng)  # checks rounding/rng
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.moveaxis(x, ax, -1).astype(np.float32).astype(np.float64)
    return _running_sums(terms, fmt_, k, promote_, rounding, None, rng)


_FLOAT32 = get_format("float32")
_DETERMINISTIC = tuple(r for r in ROUNDINGS if r != "stochastic")


def add_to_odd(a: Any, b: Any) -> Array:
    """a + b in float64 rounded to odd: the exact sum where float64 holds it, otherwise the one
    of its two float64 neighbours whose last significand bit is 1 (float64 arrays, broadcast).
    Rounding the result once more to a format of at most 51 bits gives the exact sum rounded
    once in every rounding mode (module docstring). Non-finite sums are left as they are.

    The error of the float64 sum comes from TwoSum (Knuth): s = a + b, e = (a - (s - b')) +
    (b - b') with b' = s - a, exact for finite s; where e != 0 and s's last bit is 0, s moves
    one float64 step toward the exact sum."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.atleast_1d(a + b)
        bv = s - a.reshape(s.shape)
        e = (a.reshape(s.shape) - (s - bv)) + (b.reshape(s.shape) - bv)
    bits = s.view(np.int64)
    fix = np.isfinite(s) & (e != 0) & ((bits & 1) == 0)
    if fix.any():
        away = np.signbit(e) == np.signbit(s)  # the exact sum is larger in magnitude than s
        bits = bits.copy()
        bits[fix] += np.where(away, 1, -1)[fix]  # one float64 step toward the exact sum
    return bits.view(np.float64).reshape(a.shape)


def _group_sum(terms: Array, lo: int, hi: int) -> Array:
    """terms[..., lo:hi] summed in order in float32 (each exact sum rounded once)."""
    part = terms[..., lo]
    if hi - lo > 1:
        part = part.astype(np.float32).astype(np.float64)
    for j in range(lo + 1, hi):
        part = add_to_odd(part, terms[..., j]).astype(np.float32).astype(np.float64)
    return part


def _running_sums(terms: Array, fmt: FloatFormat, k: int, promote: FloatFormat, rounding: str,
                  overflow: str | None, rng: np.random.Generator | None, every: int = 1
                  ) -> Array:
    """The chunked running sum of float64 ``terms`` (..., n) along the last axis: running sums
    of k terms in ``fmt``, partials added in ``promote``; with ``every`` > 1 the terms enter the
    running sum as float32 sums of ``every`` terms (groups restart at each chunk). Every
    addition is the exact sum rounded once (:func:`add_to_odd`, then the format). The one
    algorithm of ``accumulate_sum``, the accumulation roles and the kernels
    (``normlab.kernels.accumulate``)."""
    n = terms.shape[-1]
    total = np.zeros(terms.shape[:-1])
    for start in range(0, n, max(k, 1)):
        acc = np.zeros(terms.shape[:-1])
        stop = min(n, start + k)
        for j in range(start, stop, every):
            part = terms[..., j] if every == 1 else _group_sum(terms, j, min(stop, j + every))
            acc = quantize(add_to_odd(acc, part), fmt, rounding=rounding, overflow=overflow,
                           rng=rng)
        total = acc if start == 0 else quantize(add_to_odd(total, acc), promote)
    return total


@dataclass(frozen=True)
class Accumulation:
    """The accumulator of a reduction inside an op (a norm's statistics, a softmax's or
    log-sum-exp's sum): a policy role (``PrecisionPolicy.norm_accumulate``,
    ``softmax_accumulate``) and the ``accumulate=`` argument of the ops in
    ``normlab.functional`` and ``normlab.kernels``.

    Args:
        format: the running sum's format (a name in FORMATS or a FloatFormat).
        chunk: terms per running sum (>= 1), the partial sums then added in float32, as fused
            kernels keep per-thread partials and fp8 GEMMs promote every 128 products; None:
            one running sum over the whole row.
        every: terms first summed in float32, ``every`` at a time, before each addition to the
            running sum (a vector unit's tile reduction: tt-metal's softmax sums tiles of 32
            before its 16-bit accumulator; the matmul's ``accumulate_every``); 1: every term.
        rounding: the running sum's rounding, a deterministic mode of ``quantize`` (stochastic
            rounding needs a Generator: ``accumulate_sum`` has it).
        overflow: as ``quantize`` (None: the format's default).

    ``Accumulation()`` (float32, no chunk) is the default: the ops reduce exactly as they do
    without one (NumPy's pairwise float32 sums, the kernels' vectorized ones), bit for bit.
    Any other setting is emulated: the terms (in the op's compute dtype, float32 or float64)
    summed in order as ``accumulate_sum`` does, the same in the reference and in the kernels.
    """

    format: FloatFormat = _FLOAT32
    chunk: int | None = None
    rounding: str = "nearest_even"
    overflow: str | None = None
    every: int = 1

    def __post_init__(self) -> None:
        fmt = get_format(self.format, "accumulation format")
        object.__setattr__(self, "format", fmt)
        if self.chunk is not None:
            object.__setattr__(self, "chunk", ck.integer(self.chunk, "chunk", lo=1,
                                                         hi=1 << 40))
        if self.rounding not in _DETERMINISTIC:
            raise ValueError(f"an accumulation's rounding must be one of {_DETERMINISTIC}; got "
                             f"{self.rounding!r}")
        _check_overflow(self.overflow, fmt)
        object.__setattr__(self, "every", ck.integer(self.every, "every", lo=1, hi=1 << 40))

    @property
    def default(self) -> bool:
        """True for float32 without a chunk: the op's own float32 reduction, unchanged."""
        return (self.format == _FLOAT32 and self.chunk is None and self.every == 1
                and self.rounding == "nearest_even" and self.overflow is None)

    def sum(self, terms: Any, *, axis: int = -1) -> Array:
        """The emulated sum of ``terms`` along ``axis`` (float64 array holding float32 values,
        ``format`` values with a single chunk); the terms are taken as they are (float64 of
        the compute dtype's values), not rounded to float32 first."""
        t = ck.float_array(terms, "terms")
        if t.ndim == 0:
            raise ValueError("terms must have at least 1 dimension to sum along; got a scalar")
        ax = ck.integer(axis, "axis", lo=-t.ndim, hi=t.ndim - 1) % t.ndim
        t64 = np.moveaxis(t, ax, -1).astype(np.float64)
        n = t64.shape[-1]
        k = n if self.chunk is None else self.chunk
        return _running_sums(t64, self.format, k, _FLOAT32, self.rounding, self.overflow, None,
                             self.every)

    def to_value(self) -> Any:
        """JSON value: the format's name alone when nothing else is set, else an object."""
        fmt: Any = self.format.name if FORMATS.get(self.format.name or "") == self.format \
            else {f: getattr(self.format, f) for f in _FORMAT_FIELDS}
        if self.chunk is None and self.rounding == "nearest_even" and self.overflow is None \
                and self.every == 1 and isinstance(fmt, str):
            return fmt
        out: dict[str, Any] = {"format": fmt, "chunk": self.chunk}
        if self.every != 1:
            out["every"] = self.every
        if self.rounding != "nearest_even":
            out["rounding"] = self.rounding
        if self.overflow is not None:
            out["overflow"] = self.overflow
        return out

    @classmethod
    def from_value(cls, value: Any, where: str = "accumulation") -> Accumulation:
        """From None (the default), a format name, a FloatFormat, an Accumulation, or an object
        with ``format`` and optionally ``chunk``, ``rounding``, ``overflow``."""
        if value is None:
            return cls()
        if isinstance(value, Accumulation):
            return value
        try:
            if isinstance(value, (str, FloatFormat)):
                return cls(get_format(value, where))
            if not isinstance(value, Mapping):
                raise TypeError(f"must be a format name or an object with 'format'; got "
                                f"{value!r}")
            return ck.dataclass_from(  # a custom format as an object of FloatFormat's fields
                cls, value, "unknown field(s)",
                format=lambda f: FloatFormat(**f) if isinstance(f, Mapping) else f)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{where}: {exc}") from None

    def __str__(self) -> str:
        parts = [str(self.format.name or self.format)]
        if self.every != 1:
            parts.append(f"float32 sums of {self.every} added")
        parts.append("one running sum" if self.chunk is None
                     else f"chunks of {self.chunk}, promoted to float32")
        if self.rounding != "nearest_even":
            parts.append(self.rounding)
        if self.overflow is not None:
            parts.append(f"overflow={self.overflow}")
        return ", ".join(parts)


def check_accumulation(value: Any, name: str = "accumulate") -> Accumulation | None:
    """An op's ``accumulate=`` argument: None or an Accumulation (else a TypeError naming it);
    None for the default (the op's own float32 reduction)."""
    if value is None:
        return None
    if not isinstance(value, Accumulation):
        raise TypeError(f"{name} must be None or a normlab.precision.Accumulation; got "
                        f"{type(value).__name__}")
    return None if value.default else value
