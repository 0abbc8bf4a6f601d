"""The kernels' vectorized exp and tanh (``normlab.kernels.vmath``) against NumPy's float64 exp and
tanh over every float32 input of the range where their polynomials run, their constants and
special values outside it, and the same bits in a vectorized loop as in a scalar one."""

import numpy as np
import pytest
from numba import njit

from normlab.kernels.vmath import (
    EXP_HI,
    EXP_LO,
    EXP_ULPS,
    TANH_ULPS,
    exp_f32,
    tanh_f32,
    vexp,
    vtanh,
)

CHUNK = 1 << 24


@njit(error_model="numpy")
def _apply(fn_id, x, out):
    """out = exp_f32(x) or tanh_f32(x): a loop LLVM vectorizes."""
    if fn_id == 0:
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i])
    else:
        for i in range(x.shape[0]):
            out[i] = tanh_f32(x[i])


@njit(error_model="numpy")
def _apply_scalar(fn_id, x, out):
    """The same values one at a time: a loop with an exit that depends on the data (LLVM cannot
    vectorize it), so every value goes through the scalar code."""
    i = 0
    while i < x.shape[0]:
        out[i] = exp_f32(x[i]) if fn_id == 0 else tanh_f32(x[i])
        if out[i] == np.float32(-12345.0):
            break
        i += 1


@njit(error_model="numpy")
def _ulps(got, exact):
    """The largest |got - exact| in units of the last place of exact rounded to float32 (its
    exponent field: exact's float32 grid), over the values whose float32 rounding is normal;
    and the largest |got - exact| over the others (below 2^-126)."""
    worst, tiny = 0.0, 0.0
    for i in range(got.shape[0]):
        e = exact[i]
        err = abs(np.float64(got[i]) - e)
        field = np.int64(np.float32(e).view(np.uint32) >> np.uint32(23)) & 0xFF
        if field == 0:
            tiny = max(tiny, err)
            continue
        ulp = np.int64((field - 150 + 1023) << 52).view(np.float64)  # 2^(E - 127 - 23)
        worst = max(worst, err / ulp)
    return worst, tiny


def _bits(x: float) -> int:
    return int(np.array(x, np.float32).view(np.uint32))


def _sweep(fn_id: int, first: int, last: int, sign: int, reference) -> tuple[float, float]:
    """Every float32 whose bits are first..last (with ``sign``): (worst ulps, worst tiny error)."""
    worst, tiny = 0.0, 0.0
    for start in range(first, last + 1, CHUNK):
        x = (np.arange(start, min(last + 1, start + CHUNK), dtype=np.uint32)
             | np.uint32(sign)).view(np.float32)
        got = np.empty_like(x)
        _apply(fn_id, x, got)
        w, t = _ulps(got, reference(x.astype(np.float64)))
        worst, tiny = max(worst, w), max(tiny, t)
    return worst, tiny


@pytest.mark.slow
def test_exp_f32_over_every_float32_of_its_range():
    """Every float32 in [EXP_LO, EXP_HI] (about 2.2 billion): within EXP_ULPS units in the last
    place of float64 exp rounded to float32 where that is normal, within 2^-126 where it is
    not."""
    pos = _sweep(0, 0, _bits(EXP_HI), 0, np.exp)
    neg = _sweep(0, 0, _bits(-EXP_LO), 0x80000000, np.exp)
    assert max(pos[0], neg[0]) <= EXP_ULPS, (pos, neg)
    assert max(pos[1], neg[1]) < 2.0**-126, (pos, neg)


def test_exp_f32_outside_its_range_and_special_values():
    above = np.array([np.nextafter(np.float32(EXP_HI), np.float32(np.inf)), 89.0, 1e10, np.inf],
                     np.float32)
    below = np.array([np.nextafter(np.float32(EXP_LO), np.float32(-np.inf)), -88.0, -104.0,
                      -1e10, -np.inf], np.float32)
    out = np.empty_like(above)
    _apply(0, above, out)
    assert np.all(out == np.inf)
    with np.errstate(over="ignore"):
        assert np.all(np.exp(above.astype(np.float64)) > np.finfo(np.float32).max)
    out = np.empty_like(below)
    _apply(0, below, out)
    assert np.all(out == 0)
    nan = np.array([np.nan, -np.nan], np.float32)
    _apply(0, nan, out[:2])
    assert np.all(np.isnan(out[:2]))
    exact = np.array([0.0, 1.0, -1.0], np.float32)
    _apply(0, exact, out[:3])
    assert out[0] == 1  # exp(0) is exact
    np.testing.assert_allclose(out[1:3], [np.e, 1 / np.e], rtol=2**-22)


@pytest.mark.slow
def test_tanh_f32_over_every_float32_of_its_range():
    """Every float32 in [0, c] (c = the clamp, 7.9; about 1.1 billion): within TANH_ULPS units of
    2^-23 relative to float64 tanh. Odd: the negative half is the positive one negated."""
    from normlab.kernels.vmath import _TANH_CLAMP

    worst = 0.0
    last = _bits(_TANH_CLAMP)
    for start in range(0, last + 1, CHUNK):
        x = np.arange(start, min(last + 1, start + CHUNK), dtype=np.uint32).view(np.float32)
        got = np.empty_like(x)
        _apply(1, x, got)
        exact = np.tanh(x.astype(np.float64))
        err = np.abs(got - exact) / np.maximum(exact, np.finfo(np.float32).tiny)
        worst = max(worst, float(err.max()) / 2.0**-23)
    assert worst <= TANH_ULPS, worst


def test_tanh_f32_beyond_the_clamp_odd_and_special_values():
    from normlab.kernels.vmath import _TANH_CLAMP

    c = np.float32(_TANH_CLAMP)
    beyond = np.array([c, np.nextafter(c, np.float32(np.inf)), 9.0, 1e3, 3e38, np.inf],
                      np.float32)
    out = np.empty_like(beyond)
    _apply(1, beyond, out)
    assert np.all(out == out[0])  # the clamp: every x >= c gives tanh_f32(c)
    assert abs(float(out[0]) - 1.0) <= TANH_ULPS * 2.0**-23
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=100_000) * 3, rng.normal(size=1000) * 1e-3]
                       ).astype(np.float32)
    pos, neg = np.empty_like(x), np.empty_like(x)
    _apply(1, x, pos)
    _apply(1, -x, neg)
    np.testing.assert_array_equal(neg, -pos)
    special = np.array([-np.inf, np.nan, 0.0], np.float32)
    out = np.empty_like(special)
    _apply(1, special, out)
    assert out[0] == -1 and np.isnan(out[1]) and out[2] == 0


@pytest.mark.parametrize("fn_id", [0, 1])
def test_a_value_gives_the_same_bits_in_a_vector_lane_and_alone(fn_id):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=50_001) * 20, [np.nan, np.inf, -np.inf, 0.0]]
                       ).astype(np.float32)
    vec, one = np.empty_like(x), np.empty_like(x)
    _apply(fn_id, x, vec)
    _apply_scalar(fn_id, x, one)
    np.testing.assert_array_equal(vec.view(np.uint32), one.view(np.uint32))


def test_vexp_and_vtanh_pick_the_polynomial_for_float32_and_libm_for_float64():
    @njit
    def both(x32, x64):
        return vexp(x32), vtanh(x32), vexp(x64), vtanh(x64)

    e32, t32, e64, t64 = both(np.float32(0.3), 0.3)
    assert e32 == exp_f32(np.float32(0.3)) and t32 == tanh_f32(np.float32(0.3))
    assert np.float32(e32) == e32 and np.float32(t32) == t32  # float32 values
    assert e64 == np.exp(0.3) and t64 == np.tanh(0.3)
    assert e64 != e32 and t64 != t32
