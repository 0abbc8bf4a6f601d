"""The random Hadamard transform's one-pass kernel (``normlab.kernels.hadamard``): bit for bit
``normlab.precision.rht`` and ``rht_inverse`` (float64 butterflies, one rounding) on any axis,
with TransformerEngine's signs and without, across many binades, non-finite values included."""

import numpy as np
import pytest

from normlab.kernels._common import PARALLEL_MIN
from normlab.kernels.hadamard import rht_float32
from normlab.precision.hadamard import TE_SIGNS, rht, rht_inverse


@pytest.mark.parametrize("shape,axis", [((64, 48), 0), ((64, 48), -1), ((3, 32, 5), 1),
                                        ((16,), 0), ((2, 3, 64), 2)])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("signs", ["te", "none"])
def test_bit_for_bit_the_reference(rng, shape, axis, inverse, signs):
    x = rng.standard_t(2, size=shape) * np.exp(rng.uniform(-40, 40, size=shape))
    x = x.astype(np.float32)
    x.reshape(-1)[:3] = [np.inf, -0.0, np.nan] if x.size > 16 else x.reshape(-1)[:3]
    s = np.array(TE_SIGNS if signs == "te" else [1.0] * 16)
    ref = (rht_inverse if inverse else rht)(x, axis, signs=signs)
    got = rht_float32(x, axis, s, inverse=inverse)
    assert got is not None and got.dtype == np.float32
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    assert same.all()


def test_the_parallel_path_and_a_round_trip(rng):
    x = rng.normal(size=(PARALLEL_MIN // 256 + 4, 256)).astype(np.float32)
    s = np.array(TE_SIGNS)
    y = rht_float32(x, -1, s, threads=2)
    assert y is not None and np.array_equal(y, rht(x, -1))
    one = rht_float32(x, -1, s, threads=1)
    assert one is not None and np.array_equal(one, y)
    back = rht_float32(y, -1, s, inverse=True)
    assert back is not None and np.allclose(back, x, rtol=1e-6, atol=1e-6)


def test_where_it_does_not_apply_it_returns_none(rng):
    s = np.array(TE_SIGNS)
    assert rht_float32(rng.normal(size=(4, 16)), -1, s) is None  # float64
    assert rht_float32(np.ones((4, 24), np.float32), -1, s) is None  # 24 is no multiple of 16
    assert rht_float32(np.zeros((0, 16), np.float32), -1, s) is None
