import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _parity import GEMM, check_against_torch

from normlab.functional import embedding_backward, embedding_forward
from normlab.testing import gradcheck

IDS = np.array([[0, 3, 3, 1], [4, 3, 0, 6]])  # repeated ids: the backward must add, not assign


def test_gradcheck_with_repeated_ids():
    rng = np.random.default_rng(1)
    fwd = lambda w: embedding_forward(IDS, w)  # noqa: E731
    bwd = lambda dout, c: embedding_backward(dout, c)[1]  # noqa: E731
    report = gradcheck(fwd, bwd, {"weight": rng.normal(size=(7, 5))}, rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_torch(dtype):
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 50, size=(4, 33))
    fwd = lambda w: embedding_forward(ids, w)  # noqa: E731
    bwd = lambda dout, c: embedding_backward(dout, c)[1]  # noqa: E731
    check_against_torch(fwd, bwd, lambda weight: TF.embedding(torch.from_numpy(ids), weight),
                        {"weight": rng.normal(size=(50, 16))}, dtype, rng, **GEMM)


def test_unused_rows_get_zero_gradient_and_empty_ids_work():
    w = np.arange(21.0).reshape(7, 3)
    out, cache = embedding_forward(IDS, w)
    np.testing.assert_array_equal(out, w[IDS])
    _, dw = embedding_backward(np.ones(out.shape), cache)
    np.testing.assert_array_equal(dw[:, 0], np.bincount(IDS.ravel(), minlength=7))
    out, cache = embedding_forward(np.zeros((0,), int), w)
    assert out.shape == (0, 3) and not embedding_backward(out, cache)[1].any()


def test_bad_ids():
    w = np.zeros((7, 3))
    with pytest.raises(ValueError, match=r"ids must hold values in \[0, 7\); got 7"):
        embedding_forward(np.array([1, 7]), w)
    with pytest.raises(ValueError, match="got -1"):
        embedding_forward(np.array([-1]), w)
    with pytest.raises(TypeError, match="ids must be an integer array"):
        embedding_forward(np.array([1.0]), w)
    with pytest.raises(ValueError, match="weight must be a"):
        embedding_forward(np.array([1]), np.zeros(7))
