"""NVFP4's fused pass (``normlab.kernels.nvfp4``): bit for bit the reference
``normlab.precision.nvfp4_quantize(..., dialect="te").dequantize()`` (itself checked against
TransformerEngine's reference in tests/precision), its E2M1 and E4M3 roundings against
``precision.quantize`` on every float32 near the grids, the same random draws as the reference
for stochastic rounding, and None (nothing drawn) wherever it does not apply."""

import numpy as np
import pytest
from numba import njit

from normlab.kernels import nvfp4 as KN
from normlab.kernels._common import PARALLEL_MIN
from normlab.precision import NVFP4Scaling, quantize
from normlab.precision.nvfp4 import nvfp4_quantize


@njit(cache=False)
def _map_e2m1(v, words, stochastic):
    out = np.empty_like(v)
    for i in range(v.size):
        out[i] = KN._e2m1_sr(v[i], words[i]) if stochastic else KN._e2m1(v[i])
    return out


@njit(cache=False)
def _map_e4m3(v):
    out = np.empty_like(v)
    for i in range(v.size):
        out[i] = KN._e4m3(v[i])
    return out


def _near(marks: np.ndarray, ulps: int = 64) -> np.ndarray:
    """Every float32 within ``ulps`` of each mark, both signs, and a sweep of bit patterns."""
    bits = marks.astype(np.float32).view(np.int32).astype(np.int64)
    near = (bits[:, None] + np.arange(-ulps, ulps + 1)[None]).ravel()
    x = np.unique(near[near >= 0]).astype(np.int32).view(np.float32)
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


def test_the_element_roundings_are_quantize_bit_for_bit():
    marks = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8,
                      2.0**-126, 2.0**-149, 2.0**-33, 2.0**-32, 1e7, 3.4e38], np.float64)
    sweep = np.arange(0, np.float32(16).view(np.int32), 1009, dtype=np.int32).view(np.float32)
    x = np.concatenate([_near(marks), sweep, [np.inf]]).astype(np.float32)
    x = np.concatenate([x, -x])
    ref = quantize(x, "float4_e2m1fn", overflow="saturate")
    assert np.array_equal(_bits(_map_e2m1(x, np.zeros(x.size, np.int32), False)), _bits(ref))
    for seed in (0, 1):
        words = KN._words(np.random.default_rng(seed), x.size)
        ref = quantize(x, "float4_e2m1fn", rounding="stochastic", overflow="saturate",
                       rng=np.random.default_rng(seed))
        assert np.array_equal(_bits(_map_e2m1(x, words, True)), _bits(ref))
    e4 = np.concatenate([_near(np.array([0, 2.0**-9, 2.0**-6, 1, 1.0625, 240, 448, 464, 480,
                                         2.0**-126, 3.4e38]))]).astype(np.float32)
    ref = quantize(e4, "float8_e4m3fn", overflow="saturate")
    assert np.array_equal(_bits(_map_e4m3(e4)), _bits(ref))


def _cases(rng):
    yield rng.normal(size=(8, 64))
    yield rng.standard_t(2, size=(33, 50)) * 10  # heavy tails, a ragged last block
    x = rng.normal(size=(4, 48))
    x[1] = 0.0  # a block of zeros
    x[2, :16] *= 1e-20  # a block whose E4M3 scale underflows to 0
    x[3, 5] = -0.0
    yield x
    yield np.exp(rng.uniform(-60, 60, size=(5, 7, 40))) * np.sign(rng.normal(size=(5, 7, 40)))
    yield np.zeros((3, 16))
    grid = np.array([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7])
    yield np.tile(grid, (20, 3))  # midpoints of the E2M1 grid once scaled
    yield rng.normal(size=(17,))  # one-dimensional, ragged


@pytest.mark.parametrize("two_d,rounding", [(False, "nearest_even"), (False, "stochastic"),
                                            (True, "nearest_even")])
def test_the_fused_pass_is_the_reference_bit_for_bit_with_the_same_draws(rng, two_d, rounding):
    for x in _cases(rng):
        x = x.astype(np.float32)
        if two_d and x.ndim < 2:
            continue
        r_ref, r_k = np.random.default_rng(7), np.random.default_rng(7)
        ref = nvfp4_quantize(x, two_d=two_d, rounding=rounding, rng=r_ref).dequantize()
        got = KN.nvfp4_te_qdq(x, two_d=two_d, rounding=rounding, rng=r_k)
        assert got is not None and got.dtype == np.float32 and got.shape == x.shape
        assert np.array_equal(_bits(got), _bits(ref)), (x.shape, two_d, rounding)
        assert r_ref.integers(1 << 62) == r_k.integers(1 << 62)  # the same draws consumed


@pytest.mark.parametrize("two_d", [False, True])
def test_the_parallel_path_and_out_in_place(rng, two_d):
    x = rng.normal(size=(PARALLEL_MIN // 512 + 16, 512)).astype(np.float32)
    ref = nvfp4_quantize(x, two_d=two_d).dequantize()
    y = x.copy()
    assert KN.nvfp4_te_qdq(y, two_d=two_d, out=y, threads=2) is y
    assert np.array_equal(_bits(y), _bits(ref))
    one = KN.nvfp4_te_qdq(x, two_d=two_d, threads=1)  # the calling thread alone
    assert one is not None and np.array_equal(_bits(one), _bits(ref))


def test_where_it_does_not_apply_it_returns_none_and_draws_nothing(rng):
    x = rng.normal(size=(4, 32)).astype(np.float32)
    r = np.random.default_rng(3)
    for bad in (x.astype(np.float64), x[:, ::2], np.zeros((0, 16), np.float32)):
        assert KN.nvfp4_te_qdq(bad) is None
    for v in (np.nan, np.inf, 1e36):
        y = x.copy()
        y[1, 3] = v
        assert KN.nvfp4_te_qdq(y, rounding="stochastic", rng=r) is None
    assert KN.nvfp4_te_qdq(x, two_d=True, rounding="stochastic", rng=r) is None
    assert KN.nvfp4_te_qdq(x, rounding="stochastic") is None
    assert KN.nvfp4_te_qdq(x[0], two_d=True) is None
    assert r.integers(1 << 62) == np.random.default_rng(3).integers(1 << 62)
    assert KN.applies(NVFP4Scaling(), "stochastic", None)
    assert KN.applies(NVFP4Scaling(two_d=True), "nearest_even", None)
    for s, rnd, k in ((NVFP4Scaling(two_d=True), "stochastic", None),
                      (NVFP4Scaling(four_over_six="mae", e4m3_max=256), "nearest_even", None),
                      (NVFP4Scaling(dialect="torchao"), "nearest_even", None),
                      (NVFP4Scaling(global_scale="row"), "nearest_even", None),
                      (NVFP4Scaling(axis=0), "nearest_even", None),
                      (NVFP4Scaling(), "stochastic", 8)):
        assert not KN.applies(s, rnd, k)
