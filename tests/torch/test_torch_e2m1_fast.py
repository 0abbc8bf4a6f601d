"""The E2M1 element roundings of ``normlab.torch.blocks`` (NVFP4's hot loop), to nearest even and
stochastic, against ``normlab.torch.quantize`` (itself NumPy's bit for bit): every float32 within
64 ulps of each grid value, midpoint and range boundary, a sweep of the float32 bit patterns up
to 16, float32 subnormals, infinities, NaN and both zeros, in both signs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from normlab.torch.blocks import e2m1_nearest, e2m1_stochastic  # noqa: E402
from normlab.torch.quantize import quantize  # noqa: E402

E2M1 = "float4_e2m1fn"


def _inputs() -> np.ndarray:
    marks = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8,
                      2.0**-126, 2.0**-149, 2.0**-33, 2.0**-32], np.float32)
    near = (marks.view(np.int32)[:, None].astype(np.int64) + np.arange(-64, 65)[None]).ravel()
    sweep = np.arange(0, np.float32(16).view(np.int32), 1009, dtype=np.int64)
    bits = np.unique(np.concatenate([near[near >= 0], sweep])).astype(np.int32)
    x = bits.view(np.float32)
    special = np.array([np.inf, np.nan, 3.4e38, 1e7], np.float32)
    return np.concatenate([x, -x, special, -special])


def _same(a, b) -> np.ndarray:
    a, b = a.numpy(), b.numpy()
    return (a.view(np.int32) == b.view(np.int32)) | (np.isnan(a) & np.isnan(b))


def test_nearest_is_quantizes_bit_for_bit():
    t = torch.from_numpy(_inputs())
    assert _same(e2m1_nearest(t), quantize(t, E2M1, overflow="saturate")).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stochastic_is_quantizes_bit_for_bit_from_the_same_words(seed):
    x = _inputs()
    t = torch.from_numpy(x[: x.size // 7 * 7]).reshape(-1, 7)[:, ::2]  # strided: its order
    want = quantize(t, E2M1, rounding="stochastic", overflow="saturate",
                    rng=np.random.default_rng(seed))
    got = e2m1_stochastic(t, np.random.default_rng(seed))
    assert got.shape == want.shape and _same(got, want).all()
    assert not _same(got, e2m1_stochastic(t, np.random.default_rng(seed + 10))).all()


def test_negative_zero_and_nan_are_kept():
    t = torch.tensor([-0.0, -0.1, float("nan"), -float("inf")])
    for out in (e2m1_nearest(t), e2m1_stochastic(t, np.random.default_rng(0))):
        assert torch.signbit(out[:2]).all() and out[0] == 0 and torch.isnan(out[2])
        assert out[3] == -6


def _edgy(shape, seed) -> np.ndarray:
    r = np.random.default_rng(seed)
    x = (r.standard_normal(shape) * np.exp2(r.integers(-20, 20, shape))).astype(np.float32)
    flat = x.reshape(-1)
    flat[:16] = 0.0
    flat[16:32] = -0.0
    flat[40] = 3.0e38
    flat[41] = -2.0**-140
    flat[r.integers(0, flat.size, 5)] = 2.0**-149
    return x


@pytest.mark.parametrize("shape", [(64, 48), (50, 40), (3, 37), (2, 5, 32)])
@pytest.mark.parametrize("two_d", [False, True])
@pytest.mark.parametrize("rounding", ["nearest_even", "stochastic"])
def test_nvfp4_in_place_path_is_numpys(shape, two_d, rounding):
    """TE's NVFP4 on blocks that are views of x (``blocks._te_in_place``; the padded shapes and
    stochastic 16x16 tiles take the split path) against ``Precision.apply`` in NumPy."""
    from normlab.precision import NVFP4Scaling, Precision
    from normlab.torch import apply

    p = Precision("float4_e2m1fn", rounding, scaling=NVFP4Scaling(two_d=two_d))
    x = _edgy(shape, 0)
    want = p.apply(x, rng=np.random.default_rng(4))
    got = apply(p, torch.from_numpy(x), rng=np.random.default_rng(4))
    assert got.shape == x.shape
    np.testing.assert_array_equal(got.numpy().view(np.int32), want.view(np.int32))
    x[1, 3] = np.nan  # its block (and, through the tensor's amax, every block) is NaN
    got = apply(p, torch.from_numpy(x), rng=np.random.default_rng(4)).numpy()
    np.testing.assert_array_equal(got, p.apply(x, rng=np.random.default_rng(4)))
