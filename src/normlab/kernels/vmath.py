"""exp and tanh that vectorize: float32 polynomials for the kernels' inner loops, and ``vexp`` /
``vtanh``, which pick them for float32 values and libm's for float64.

numba calls libm's scalar ``expf`` and ``tanhf`` (it has no vector math library without Intel's
SVML), so a loop over ``np.exp`` runs one call per value. These are plain arithmetic (no branch,
no call, no table), so LLVM vectorizes a loop over them like any other, and a value gives the same
bits in a vector lane and in a scalar remainder: every step is one IEEE operation, compiled without
fast-math (no reassociation, no contraction into FMA).

``exp_f32`` (Cephes' ``expf``): x = n ln 2 + r with n = floor(x log2(e) + 1/2) and |r| <= ln(2)/2,
r taken off in two steps (ln 2 = C1 + C2, C1 with 9 significant bits so that n C1 is exact), then

    exp(r) = 1 + r + r^2 P(r)      P of degree 5 (Cephes' coefficients)
    exp(x) = exp(r) 2^n            2^n built from its bits (n + 127 in the exponent field)

Accuracy, checked against float64 ``np.exp`` over every float32 x in [-87.34, 88.72]
(tests/kernels/test_vmath.py): within ``EXP_ULPS`` units in the last place of the float32-rounded
exact value wherever that value is normal (>= 2^-126); below, x < ``EXP_LO`` = ln(2^-126), the
result is 0 (an absolute error under 2^-126, the gap a softmax never sees); above ``EXP_HI``, the
largest x whose exp is finite, +inf; NaN gives NaN, -inf gives 0.

``tanh_f32`` (Eigen's ``generic_fast_tanh_float``, the rational approximation PyTorch's and
XLA's vectorized CPU tanh descend from): x P(x^2) / Q(x^2) on [-c, c], +-1 beyond, x itself below
4e-4. Within ``TANH_ULPS`` units of 2^-23 relative to the result of float64 ``np.tanh`` over every
float32 x >= 0 (odd, so the negative half is the same values negated); NaN gives NaN.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

# ---- exp ---------------------------------------------------------------------------------------
EXP_HI = 88.72283172607422  # the largest float32 x whose exp, rounded to float32, is finite
EXP_LO = -87.33654022216797  # float32(ln(2^-126)): below, exp(x) is no longer a normal float32
EXP_ULPS = 1  # the bound tested (measured: 0.99), in float32 ulps of the exact result
_LOG2E = 1.4426950408889634
_C1 = 0.693359375  # ln 2 = C1 + C2; C1 has 9 significant bits: n * C1 is exact for |n| <= 128
_C2 = -2.12194440e-4
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
          5.0000001201e-1)


@njit(cache=True, inline="always", error_model="numpy")
def exp_f32(x):
    """exp of a float32 value, branch-free (see the module's docstring for the accuracy)."""
    f = np.float32
    hi, lo = f(EXP_HI), f(EXP_LO)
    xc = x if (x >= lo and x <= hi) else (hi if x > hi else lo)  # NaN -> lo (a finite n)
    n = np.floor(xc * f(_LOG2E) + f(0.5))  # in [-126, 128]
    r = xc - n * f(_C1)
    r = r - n * f(_C2)
    p = f(_EXP_P[0]) * r + f(_EXP_P[1])
    p = p * r + f(_EXP_P[2])
    p = p * r + f(_EXP_P[3])
    p = p * r + f(_EXP_P[4])
    p = p * r + f(_EXP_P[5])
    e = (r * r) * p + r + f(1.0)
    ni = np.int32(n)
    two_n = np.int32((min(ni, np.int32(127)) + np.int32(127)) << np.int32(23)).view(np.float32)
    e = e * two_n
    e = e * f(2.0) if ni == np.int32(128) else e  # 2^128 is not a float32: 2^127 * 2
    return x if x != x else (f(0.0) if x < lo else (f(np.inf) if x > hi else e))


# ---- tanh --------------------------------------------------------------------------------------
TANH_ULPS = 4  # the measured bound, in units of 2^-23 relative to the result (ulp of 1 near 1)
_TANH_CLAMP = 7.90531110763549805
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
           5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
           4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
           4.89352518554385e-03)


@njit(cache=True, inline="always", error_model="numpy")
def tanh_f32(x):
    """tanh of a float32 value, branch-free so that a loop over it vectorizes (NaN propagates)."""
    f = np.float32
    c = f(_TANH_CLAMP)
    xc = max(min(x, c), -c)
    x2 = xc * xc
    p = x2 * f(_TANH_P[0]) + f(_TANH_P[1])
    p = x2 * p + f(_TANH_P[2])
    p = x2 * p + f(_TANH_P[3])
    p = x2 * p + f(_TANH_P[4])
    p = x2 * p + f(_TANH_P[5])
    p = x2 * p + f(_TANH_P[6])
    q = x2 * f(_TANH_Q[0]) + f(_TANH_Q[1])
    q = x2 * q + f(_TANH_Q[2])
    q = x2 * q + f(_TANH_Q[3])
    t = xc * p / q
    return x if abs(x) < f(0.0004) or x != x else t


# ---- by dtype ----------------------------------------------------------------------------------
def vexp(x):  # pragma: no cover - replaced by the overload in numba
    """exp(x): ``exp_f32`` for a float32 value, libm's for float64."""
    return math.exp(x)


def vtanh(x):  # pragma: no cover - replaced by the overload in numba
    """tanh(x): ``tanh_f32`` for a float32 value, libm's for float64."""
    return math.tanh(x)


def _is_f32(x: types.Type) -> bool:
    return isinstance(x, types.Float) and x.bitwidth == 32


@overload(vexp, inline="always")
def _vexp(x):
    if _is_f32(x):
        return lambda x: exp_f32(x)
    return lambda x: np.exp(x)


@overload(vtanh, inline="always")
def _vtanh(x):
    if _is_f32(x):
        return lambda x: tanh_f32(x)
    return lambda x: np.tanh(x)


__all__ = ["EXP_HI", "EXP_LO", "EXP_ULPS", "TANH_ULPS", "exp_f32", "tanh_f32", "vexp", "vtanh"]
