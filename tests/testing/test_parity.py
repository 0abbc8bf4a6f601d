"""The PyTorch-parity driver: errors of both libraries against PyTorch float64, and its rule."""

import numpy as np
import pytest

pytest.importorskip("torch")

from normlab.functional import layer_norm_backward, layer_norm_forward
from normlab.testing import oracles
from normlab.testing.parity import GEMM, Tolerance, torch_parity


def _inputs(rng):
    return {"x": rng.normal(1.0, 2.0, (4, 16)), "weight": rng.normal(size=16),
            "bias": rng.normal(size=16)}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_a_correct_op_passes_with_both_errors_reported(dtype):
    rng = np.random.default_rng(0)
    r = torch_parity(layer_norm_forward, layer_norm_backward, oracles.layer_norm, _inputs(rng),
                     dtype, rng)
    assert r.ok and r.dtype_kept and r.failures() == ""
    assert [row.what for row in r.rows] == ["forward", "dx", "dweight", "dbias"]
    if dtype == "float64":
        assert r.forward.torch == 0.0 and r.forward.ours < 1e-14
    else:  # both libraries make an error of the format's size
        assert 0 < r.forward.torch < 1e-2 and r.forward.ours <= r.forward.bound
    assert r.out.shape == (4, 16) and set(r.grads) == {"x", "weight", "bias"}


def test_a_wrong_gradient_fails_and_is_named():
    rng = np.random.default_rng(1)

    def bad_backward(dout, cache):
        dx, dweight, dbias = layer_norm_backward(dout, cache)
        return dx, dweight * (1 + 1e-3), dbias  # a 0.1% error in one gradient

    r = torch_parity(layer_norm_forward, bad_backward, oracles.layer_norm, _inputs(rng),
                     "float32", rng)
    assert not r.ok and [row.what for row in r.rows if not row.ok] == ["dweight"]
    assert "dweight" in r.failures()
    loose = torch_parity(layer_norm_forward, bad_backward, oracles.layer_norm, _inputs(rng),
                         "float32", rng, tol=Tolerance(min_ulps=1e5))
    assert loose.ok  # 1e5 eps of float32 is 1.2%: the tolerance is the only thing that changed


def test_float64_uses_rtol64_when_given():
    rng = np.random.default_rng(2)
    r = torch_parity(layer_norm_forward, layer_norm_backward, oracles.layer_norm, _inputs(rng),
                     "float64", rng, tol=GEMM)
    assert all(row.bound == 1e-12 for row in r.rows) and r.ok
