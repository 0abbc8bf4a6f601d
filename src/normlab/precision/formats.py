"""Floating-point formats as data.

A format with E exponent bits, M stored mantissa bits and bias b encodes, for an exponent field
``0 < f < 2^E`` (and, without a zero, also ``f = 0``),

    x = (-1)^s * 2^(f - b) * (1 + m / 2^M)                 normal numbers
    x = (-1)^s * 2^(emin) * (m / 2^M),   emin = 1 - b      subnormals (exponent field 0)

Which of the top codes are reserved is the ``inf_nan`` encoding:

* ``"ieee"``: exponent field all ones is infinity (mantissa 0) or NaN (mantissa != 0):
  float32, tfloat32, bfloat16, float16, float8_e5m2, float8_e4m3, float8_e3m4;
* ``"fn"``: finite, no infinities; only the all-ones pattern (per sign) is NaN: float8_e4m3fn,
  and the unsigned float8_e8m0fnu (exponent only, no zero, 0xFF = NaN);
* ``"fnuz"``: finite, no infinities, one unsigned zero, and a single NaN on the negative-zero
  pattern (0x80): every exponent field, the all-ones one too, is a normal binade. AMD's FP8
  (MI300, ROCm's hipBLASLt and MIOpen, ONNX's FLOAT8E4M3FNUZ/FLOAT8E5M2FNUZ) and Graphcore's
  IPU formats: float8_e4m3fnuz (bias 8, max 240), float8_e5m2fnuz (bias 16, max 57344) and
  float8_e4m3b11fnuz (bias 11, max 30; TensorFlow/XLA's ``float8_e4m3b11fnuz``). A result that
  rounds to zero is +0 whatever its sign, and every overflow, infinity and NaN is the NaN code;
* ``"none"``: every pattern is a finite number: the MX element formats float6_e3m2fn,
  float6_e2m3fn, float4_e2m1fn.

The names are ml_dtypes' (``fn`` = finite with NaN, ``fnu`` = finite, NaN, unsigned, ``fnuz`` =
finite, NaN, unsigned zero). Every format here holds only values that float32 represents exactly,
so ``quantize`` can return them as float32.

The same name means different formats in different tools ("dialects"):

* E4M3: OCP ``float8_e4m3fn`` (max 448: microxcaling, torchao, TransformerEngine, PyTorch's
  ``torch.float8_e4m3fn``, cuBLAS); IEEE-style ``float8_e4m3`` (max 240 with infinities:
  unit-scaling's ``FPFormat(4, 3)``, pychop's ``fp8-e4m3`` / chop's ``q43``); ``float8_e4m3fnuz``
  (max 240, no infinities, bias 8: AMD, ``torch.float8_e4m3fnuz``).
* E5M2: OCP ``float8_e5m2`` (IEEE-style, max 57344 with infinities: everyone above, and
  unit-scaling's ``FPFormat(5, 2)``, pychop's ``fp8-e5m2``) and ``float8_e5m2fnuz`` (bias 16,
  no infinities: AMD, ``torch.float8_e5m2fnuz``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from .. import _checks as ck

INF_NAN_ENCODINGS = ("ieee", "fn", "fnuz", "none")

_ENCODING_WORDS = {
    "ieee": "inf and NaN (IEEE)",
    "fn": "no inf; NaN = all ones",
    "fnuz": "no inf, no -0; NaN = 0x80",
    "none": "all finite",
}


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format, described by its bits.

    Args:
        exponent_bits: E, in [1, 8].
        mantissa_bits: M, the stored fraction bits, in [0, 23]; the precision is p = M + 1.
        bias: exponent bias; default 2^(E-1) - 1.
        inf_nan: ``"ieee"``, ``"fn"``, ``"fnuz"`` or ``"none"`` (module docstring).
        subnormals: whether exponent field 0 holds subnormals (IEEE gradual underflow); without
            them it holds only zero.
        signed: False for unsigned formats (E8M0): negative inputs become NaN.
        zero: False when the format has no zero (E8M0): exponent field 0 is then a normal binade.
        name: display name; default ``e{E}m{M}``.

    Every finite value must lie in float32's range (max < 2^128, smallest positive >= 2^-149).
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int | None = None
    inf_nan: str = "ieee"
    subnormals: bool = True
    signed: bool = True
    zero: bool = True
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        E = ck.integer(self.exponent_bits, "exponent_bits", lo=1, hi=8)
        M = ck.integer(self.mantissa_bits, "mantissa_bits", lo=0, hi=23)
        bias = (2 ** (E - 1) - 1 if self.bias is None
                else ck.integer(self.bias, "bias", lo=-200, hi=400))
        ck.choice(self.inf_nan, "inf_nan", INF_NAN_ENCODINGS)
        subnormals = ck.flag(self.subnormals, "subnormals")
        signed = ck.flag(self.signed, "signed")
        zero = ck.flag(self.zero, "zero")
        name = f"e{E}m{M}" if self.name is None else self.name
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string; got {self.name!r}")
        for attr, value in (("exponent_bits", E), ("mantissa_bits", M), ("bias", bias),
                            ("subnormals", subnormals), ("signed", signed), ("zero", zero),
                            ("name", name)):
            object.__setattr__(self, attr, value)
        if self.inf_nan == "ieee" and M == 0:
            raise ValueError("an 'ieee' format needs mantissa_bits >= 1 to encode NaN")
        if not zero and subnormals:
            raise ValueError("a format without zero has no subnormals: pass subnormals=False")
        if self.inf_nan == "fnuz" and not (signed and zero):
            raise ValueError("an 'fnuz' format keeps its NaN on the negative-zero pattern: it "
                             "needs signed=True and zero=True")
        if not signed and self.inf_nan == "none":
            raise ValueError("an unsigned format needs a NaN for negative inputs: use inf_nan='fn'")
        if self.emax < self.emin:
            raise ValueError(f"{name} has no normal binade (E={E}, bias={bias}, {self.inf_nan})")
        if self.emax > 127:
            raise ValueError(f"{name}: its largest binade 2^{self.emax} is beyond float32's "
                             f"range (need emax <= 127; lower exponent_bits or raise bias)")
        low = self.emin - (M if self.subnormals else 0)
        if low < -149:
            raise ValueError(f"{name}: smallest positive value 2^{low} is below float32's "
                             f"2^-149 (lower bias or exponent_bits)")

    # --- derived constants -----------------------------------------------------------------

    @property
    def precision(self) -> int:
        """p = M + 1 significant bits."""
        return self.mantissa_bits + 1

    @property
    def bits(self) -> int:
        """Total width: sign + E + M."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def has_inf(self) -> bool:
        return self.inf_nan == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.inf_nan != "none"

    @property
    def signed_zero(self) -> bool:
        """Whether -0 exists: not in unsigned formats, nor in 'fnuz' ones (0x80 is NaN)."""
        return self.signed and self.zero and self.inf_nan != "fnuz"

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number: 1 - bias (-bias without a zero)."""
        return (1 if self.zero else 0) - self._bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite number."""
        top = 2**self.exponent_bits - 1  # the all-ones exponent field
        if self.inf_nan == "ieee" or (self.inf_nan == "fn" and self.mantissa_bits == 0):
            top -= 1  # reserved for inf/NaN (the whole field when there is no mantissa)
        return top - self.bias

    @property
    def max_finite(self) -> float:
        """Largest finite value: (2 - 2^-M) 2^emax, one ulp less for 'fn' (its top is NaN)."""
        M = self.mantissa_bits
        frac = 2.0 - 2.0**-M
        if self.inf_nan == "fn" and M > 0:
            frac -= 2.0**-M
        return math.ldexp(frac, self.emax) if M > 0 else math.ldexp(1.0, self.emax)

    @property
    def min_normal(self) -> float:
        """2^emin."""
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value: 2^(emin - M), or min_normal without subnormals."""
        if self.subnormals and self.mantissa_bits > 0:
            return math.ldexp(1.0, self.emin - self.mantissa_bits)
        return self.min_normal

    @property
    def eps(self) -> float:
        """Machine epsilon 2^-M, the gap between 1 and the next value (unit roundoff u = eps/2)."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def finite_count(self) -> int:
        """Number of bit patterns that encode finite values (+0 and -0 are two)."""
        M = self.mantissa_bits
        normals = (self.emax - self.emin + 1) * 2**M - (1 if self.inf_nan == "fn" and M else 0)
        subnormals = 2**M - 1 if self.subnormals and self.zero else 0
        positive = normals + subnormals
        if not self.signed:
            return positive + self.zero
        return 2 * positive + (2 if self.signed_zero else int(self.zero))

    @property
    def default_overflow(self) -> str:
        """What a round-to-nearest overflow gives, as in ml_dtypes' casts: inf, NaN or saturate."""
        return {"ieee": "inf", "fn": "nan", "fnuz": "nan", "none": "saturate"}[self.inf_nan]

    @property
    def dtype(self) -> np.dtype | None:
        """The NumPy/ml_dtypes storage dtype (float32 for tfloat32's 32-bit container), or None."""
        for name, fmt in FORMATS.items():
            if fmt == self:  # equality compares the bits, not the name
                if name == "tfloat32":
                    return np.dtype(np.float32)
                return np.dtype(getattr(ml_dtypes, name, name))
        return None

    def values(self) -> np.ndarray:
        """Every finite value, ascending, as float64 (zero once). Formats of at most 16 bits."""
        if self.bits > 16:
            raise ValueError(f"values() enumerates formats of at most 16 bits; {self.name} has "
                             f"{self.bits}")
        M = self.mantissa_bits
        m = np.arange(2**M, dtype=np.float64)
        parts = []
        if self.zero:
            sub = m / 2**M if self.subnormals else np.zeros(1)
            parts.append(np.ldexp(sub, self.emin))
        for e in range(self.emin, self.emax + 1):
            parts.append(np.ldexp(1.0 + m / 2**M, e))
        pos = np.unique(np.concatenate(parts))
        pos = pos[pos <= self.max_finite]
        if not self.signed:
            return pos
        return np.concatenate([-pos[::-1][:-1] if self.zero else -pos[::-1], pos])

    def describe(self) -> str:
        """One line: bits, max, min normal, min subnormal, eps, and the inf/NaN encoding."""
        return (f"{self.name}: {self.bits} bits (E{self.exponent_bits} M{self.mantissa_bits}, "
                f"bias {self.bias}), max {self.max_finite:.6g}, min normal {self.min_normal:.6g}, "
                f"min subnormal {self.min_subnormal:.6g}, eps {self.eps:.6g}, "
                f"{_ENCODING_WORDS[self.inf_nan]}")

    @property
    def _bias(self) -> int:
        assert self.bias is not None  # set by __post_init__
        return self.bias

    def __str__(self) -> str:
        return self.name or ""


FORMATS: Mapping[str, FloatFormat] = MappingProxyType({
    "float32": FloatFormat(8, 23, name="float32"),
    "tfloat32": FloatFormat(8, 10, name="tfloat32"),
    "bfloat16": FloatFormat(8, 7, name="bfloat16"),
    "float16": FloatFormat(5, 10, name="float16"),
    "float8_e4m3fn": FloatFormat(4, 3, inf_nan="fn", name="float8_e4m3fn"),
    "float8_e5m2": FloatFormat(5, 2, name="float8_e5m2"),
    "float8_e4m3": FloatFormat(4, 3, name="float8_e4m3"),
    "float8_e3m4": FloatFormat(3, 4, name="float8_e3m4"),
    "float8_e4m3fnuz": FloatFormat(4, 3, bias=8, inf_nan="fnuz", name="float8_e4m3fnuz"),
    "float8_e5m2fnuz": FloatFormat(5, 2, bias=16, inf_nan="fnuz", name="float8_e5m2fnuz"),
    "float8_e4m3b11fnuz": FloatFormat(4, 3, bias=11, inf_nan="fnuz", name="float8_e4m3b11fnuz"),
    "float6_e3m2fn": FloatFormat(3, 2, inf_nan="none", name="float6_e3m2fn"),
    "float6_e2m3fn": FloatFormat(2, 3, inf_nan="none", name="float6_e2m3fn"),
    "float4_e2m1fn": FloatFormat(2, 1, inf_nan="none", name="float4_e2m1fn"),
    "float8_e8m0fnu": FloatFormat(8, 0, bias=127, inf_nan="fn", subnormals=False, signed=False,
                                  zero=False, name="float8_e8m0fnu"),
})
"""The named formats, under ml_dtypes' names (tfloat32 has no ml_dtypes dtype)."""


DIALECTS: Mapping[str, FloatFormat] = MappingProxyType({
    "unit_scaling_e4m3": FloatFormat(4, 3, bias=8, inf_nan="none", name="unit_scaling_e4m3"),
    "unit_scaling_e5m2": FloatFormat(5, 2, bias=16, inf_nan="none", name="unit_scaling_e5m2"),
    "qpytorch_e5m10": FloatFormat(5, 10, inf_nan="none", name="qpytorch_e5m10"),
})
"""Formats that tools call by a standard name but that are not it, under names of their own.

* ``unit_scaling_e4m3`` / ``unit_scaling_e5m2``: graphcore-research/unit-scaling's
  ``FPFormat(4, 3)`` and ``FPFormat(5, 2)`` (unit_scaling/formats.py, version 0.3.5): exponents
  from 1 - 2^(E-1) to 2^(E-1) - 1 with subnormals below, so bias 2^(E-1) and no code reserved:
  the grid of ``float8_e4m3fnuz`` / ``float8_e5m2fnuz`` (max 240 / 57344, min normal 2^-7 /
  2^-15) with a signed zero, clipped to max before rounding (inf -> max, NaN stays NaN). Its
  ``rounding="nearest"`` is ``nearest_toward_zero``.
* ``qpytorch_e5m10``: Tiiiger/QPyTorch's ``FloatingPoint(exp=5, man=10)``: IEEE float16's
  exponents plus the top binade (no inf/NaN reserved, max 131008), saturating; its "nearest" is
  ``nearest_away`` (precision.md 1.3; QPyTorch is not installable with PyTorch 2.13, so this
  dialect is from its source, not from a run).
"""


def get_format(fmt: Any, name: str = "fmt") -> FloatFormat:
    """A FloatFormat from a FloatFormat, a name in FORMATS or DIALECTS, or a NumPy/ml_dtypes
    dtype.

    Raises TypeError for other kinds of value and ValueError, listing the known names, for an
    unknown one.
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str):
        if fmt in DIALECTS:
            return DIALECTS[fmt]
        try:
            return FORMATS[fmt]
        except KeyError:
            raise ValueError(f"{name}: unknown format {fmt!r}; known formats: "
                             f"{', '.join(FORMATS)}, dialects: {', '.join(DIALECTS)} (or build "
                             f"one with FloatFormat(E, M, ...))") from None
    try:
        dt = np.dtype(fmt)
    except TypeError:
        raise TypeError(f"{name} must be a FloatFormat, a format name or a float dtype; got "
                        f"{type(fmt).__name__}") from None
    if dt.name in FORMATS:
        return FORMATS[dt.name]
    raise ValueError(f"{name}: dtype {dt} is not one of the formats ({', '.join(FORMATS)})")


def format_table(formats: Mapping[str, FloatFormat] | None = None) -> str:
    """The formats as a text table: bits, E, M, bias, max, min normal, min subnormal, eps, count."""
    formats = FORMATS if formats is None else formats
    head = (f"{'format':<15} {'bits':>4} {'E':>2} {'M':>2} {'bias':>4} {'max finite':>12} "
            f"{'min normal':>12} {'min subnormal':>13} {'eps':>10} {'finite codes':>12}  inf/NaN")
    lines = [head, "-" * len(head)]
    for f in formats.values():
        lines.append(
            f"{f.name:<15} {f.bits:>4} {f.exponent_bits:>2} {f.mantissa_bits:>2} {f.bias:>4} "
            f"{f.max_finite:>12.5g} {f.min_normal:>12.5g} {f.min_subnormal:>13.5g} "
            f"{f.eps:>10.4g} {f.finite_count:>12}  {_ENCODING_WORDS[f.inf_nan]}"
        )
    return "\n".join(lines)
