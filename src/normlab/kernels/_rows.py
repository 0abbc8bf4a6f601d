"""Row access for the kernels: 16-bit formats decoded and encoded inside the kernel, so that a
bfloat16 or float16 op still reads its input once and writes its output once.

numba has no bfloat16 or float16 type. Such arrays reach a kernel as their raw ``uint16`` bits
with a format code (``fmt``); ``load_row`` decodes one row into a float32 scratch row (in the
cache, not in memory) and ``store_row`` rounds a float32 row back, to nearest even, bit for bit
as ``astype`` does in NumPy (float16) and ml_dtypes (bfloat16). float32 and float64 rows are used
in place: ``load_row`` returns the row itself and ``store_row`` does nothing.

Decoding is exact: bfloat16 is the top half of a float32, float16 goes through a 65536-entry
table made by NumPy itself. Encoding follows NumPy's ``npy_floatbits_to_halfbits`` and
ml_dtypes' (Eigen's) ``float_to_bfloat16_rtne``, NaNs included (tests/kernels/test_rows.py
checks every float16 and bfloat16 and a million float32 bit patterns).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from numba import njit, types
from numba.extending import overload
from numpy.typing import DTypeLike

NATIVE, BF16, F16 = 0, 1, 2  # format codes of a kernel array

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
NATIVE_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), FLOAT16, BFLOAT16)

# float16 bits -> float32 value, for every one of the 65536 patterns (NumPy's own conversion).
F16_TABLE = (np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
             .astype(np.float32))


def native(dtype: DTypeLike) -> bool:
    """Whether the kernels read this dtype directly (else the caller runs the reference)."""
    return np.dtype(dtype) in NATIVE_DTYPES


def kernel_view(a: np.ndarray) -> tuple[np.ndarray, int]:
    """``a`` as the kernels see it: float arrays as they are, 16-bit formats as raw bits."""
    if a.dtype == BFLOAT16:
        return a.view(np.uint16), BF16
    if a.dtype == FLOAT16:
        return a.view(np.uint16), F16
    return a, NATIVE


def fmt_of(dtype: DTypeLike) -> int:
    dtype = np.dtype(dtype)
    return BF16 if dtype == BFLOAT16 else F16 if dtype == FLOAT16 else NATIVE


# ---- scalar encoders (float32 bits in uint64 -> 16-bit pattern) ---------------------------------

@njit(cache=True, inline="always")
def bf16_bits(f):
    """Round float32 bits ``f`` to bfloat16, nearest even; NaN -> quiet NaN with f's sign."""
    if (f & np.uint64(0x7FFFFFFF)) > np.uint64(0x7F800000):
        return np.uint16(np.uint64(0xFFC0) if f >> np.uint64(31) else np.uint64(0x7FC0))
    lsb = (f >> np.uint64(16)) & np.uint64(1)
    return np.uint16(((f + np.uint64(0x7FFF) + lsb) >> np.uint64(16)) & np.uint64(0xFFFF))


@njit(cache=True, inline="always")
def f16_bits(f):
    """Round float32 bits ``f`` to float16, nearest even (NumPy's npy_floatbits_to_halfbits)."""
    sgn = (f >> np.uint64(16)) & np.uint64(0x8000)
    f_exp = f & np.uint64(0x7F800000)
    f_sig = f & np.uint64(0x007FFFFF)
    if f_exp >= np.uint64(0x47800000):  # overflow, inf or NaN
        if f_exp == np.uint64(0x7F800000) and f_sig != np.uint64(0):
            ret = np.uint64(0x7C00) + (f_sig >> np.uint64(13))
            if ret == np.uint64(0x7C00):
                ret += np.uint64(1)  # keep it a NaN
            return np.uint16(sgn + ret)
        return np.uint16(sgn + np.uint64(0x7C00))
    if f_exp <= np.uint64(0x38000000):  # subnormal half or signed zero
        if f_exp < np.uint64(0x33000000):
            return np.uint16(sgn)
        e = f_exp >> np.uint64(23)
        sig = np.uint64(0x00800000) + f_sig
        sig >>= np.uint64(113) - e
        if (sig & np.uint64(0x3FFF)) != np.uint64(0x1000) or (f & np.uint64(0x7FF)) != np.uint64(0):
            sig += np.uint64(0x1000)
        return np.uint16(sgn + (sig >> np.uint64(13)))
    h_exp = (f_exp - np.uint64(0x38000000)) >> np.uint64(13)
    if (f_sig & np.uint64(0x3FFF)) != np.uint64(0x1000):
        f_sig += np.uint64(0x1000)
    return np.uint16(sgn + h_exp + (f_sig >> np.uint64(13)))  # a carry into h_exp is correct


# ---- row access ---------------------------------------------------------------------------------

def load_row(src, buf, fmt, table):  # pragma: no cover - replaced by the overload in numba
    """A row of compute-dtype values: ``src`` itself (float), or ``src`` decoded into ``buf``."""


@overload(load_row)
def _load_row(src, buf, fmt, table):
    if isinstance(src.dtype, types.Float):
        return lambda src, buf, fmt, table: src

    def decode(src, buf, fmt, table):
        if fmt == BF16:
            bits = buf.view(np.uint32)
            for j in range(src.shape[0]):
                bits[j] = np.uint32(src[j]) << np.uint32(16)
        else:
            for j in range(src.shape[0]):
                buf[j] = table[src[j]]
        return buf

    return decode


def out_row(dst, buf):  # pragma: no cover - replaced by the overload in numba
    """Where to compute a row of output: ``dst`` itself (float), else the scratch ``buf``."""


@overload(out_row)
def _out_row(dst, buf):
    if isinstance(dst.dtype, types.Float):
        return lambda dst, buf: dst
    return lambda dst, buf: buf


def store_row(dst, buf, fmt):  # pragma: no cover - replaced by the overload in numba
    """Round the float32 row ``buf`` into the 16-bit row ``dst`` (no-op for a float ``dst``)."""


@overload(store_row)
def _store_row(dst, buf, fmt):
    if isinstance(dst.dtype, types.Float):
        return lambda dst, buf, fmt: None

    def encode(dst, buf, fmt):
        bits = buf.view(np.uint32)
        if fmt == BF16:
            for j in range(dst.shape[0]):
                dst[j] = bf16_bits(np.uint64(bits[j]))
        else:
            for j in range(dst.shape[0]):
                dst[j] = f16_bits(np.uint64(bits[j]))

    return encode


def round_row(buf, fmt, table):  # pragma: no cover - replaced by the overload in numba
    """Round a float32 row in place to the 16-bit format ``fmt`` and back: the value that storing
    it in that format and loading it again would give. No-op for NATIVE (and float64 rows)."""


@overload(round_row)
def _round_row(buf, fmt, table):
    if buf.dtype != types.float32:
        return lambda buf, fmt, table: None

    def rnd(buf, fmt, table):
        if fmt == NATIVE:
            return
        bits = buf.view(np.uint32)
        if fmt == BF16:
            for j in range(buf.shape[0]):
                bits[j] = np.uint32(bf16_bits(np.uint64(bits[j]))) << np.uint32(16)
        else:
            for j in range(buf.shape[0]):
                buf[j] = table[f16_bits(np.uint64(bits[j]))]

    return rnd


@njit(cache=True)
def encode_array(src, dst, fmt):
    """Round float32 ``src`` (flat) into the 16-bit bits ``dst`` (flat); for tests and fallbacks."""
    bits = src.view(np.uint32)
    for j in range(src.shape[0]):
        dst[j] = bf16_bits(np.uint64(bits[j])) if fmt == BF16 else f16_bits(np.uint64(bits[j]))


@njit(cache=True)
def decode_array(src, dst, fmt, table):
    """Decode 16-bit bits ``src`` (flat) into float32 ``dst`` (flat); for tests."""
    load_row(src, dst, fmt, table)
