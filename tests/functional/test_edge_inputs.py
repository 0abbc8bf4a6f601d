"""Edge inputs of the Python API: 0-d arrays and empty softmax axes give PyTorch's results, a
backward given another op's cache or a dout of the wrong shape names both, BatchNorm names a bad
num_batches_tracked and a zero channel count."""

import numpy as np
import pytest
import torch

from normlab import functional as F
from normlab.kernels import activations as KA
from normlab.kernels import norms as KN
from normlab.kernels import softmax as KS
from normlab.testing import oracles

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("forward,backward", [(F.gelu_forward, F.gelu_backward),
                                              (KA.gelu_forward, KA.gelu_backward)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_of_a_0d_array_equals_torch(forward, backward, approximate, dtype):
    x = np.array(0.7, dtype)
    dout = np.array(1.3, dtype)
    out, cache = forward(x, approximate=approximate)
    ref, grads = oracles.vjp(lambda x: oracles.gelu(x, approximate), {"x": x}, dout)
    dx = backward(dout, cache)
    assert out.shape == () and dx.shape == () and out.dtype == x.dtype and dx.dtype == x.dtype
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(dx, grads["x"], rtol=tol, atol=tol)


@pytest.mark.parametrize("forward,backward", [(F.softmax_forward, F.softmax_backward),
                                              (KS.softmax_forward, KS.softmax_backward)])
@pytest.mark.parametrize("shape,axis", [((2, 0), -1), ((0,), 0), ((3, 0, 4), 1), ((0, 5), -1)])
def test_softmax_over_an_empty_axis_is_empty_as_in_torch(forward, backward, shape, axis):
    x = np.zeros(shape, np.float32)
    p, cache = forward(x, axis)
    expected = torch.softmax(torch.zeros(shape), dim=axis)
    assert p.shape == tuple(expected.shape) and p.dtype == x.dtype
    dx = backward(np.zeros(shape, np.float32), cache)
    assert dx.shape == shape


def _caches():
    x = RNG.standard_normal((2, 4))
    g = np.ones(4)
    return {
        "layer_norm": F.layer_norm_forward(x, g, np.zeros(4))[1],
        "rms_norm": F.rms_norm_forward(x, g)[1],
        "softmax": F.softmax_forward(x)[1],
        "gelu": F.gelu_forward(x)[1],
        "dropout": F.dropout_forward(x, 0.5, training=True, rng=np.random.default_rng(1))[1],
    }


@pytest.mark.parametrize("backward,own,expected", [
    (F.layer_norm_backward, "layer_norm", "LayerNormCache"),
    (KN.layer_norm_backward, "layer_norm", "LayerNormCache"),
    (F.rms_norm_backward, "rms_norm", "RMSNormCache"),
    (KN.rms_norm_backward, "rms_norm", "RMSNormCache"),
    (F.softmax_backward, "softmax", "SoftmaxCache"),
    (KS.softmax_backward, "softmax", "SoftmaxCache"),
    (F.gelu_backward, "gelu", "GeluCache"),
    (KA.gelu_backward, "gelu", "GeluCache"),
    (F.dropout_backward, "dropout", "DropoutCache"),
    (F.batch_norm_backward, None, "BatchNormCache"),
    (F.linear_backward, None, "LinearCache"),
    (F.dyt_backward, None, "DyTCache"),
    (F.attention_backward, None, "AttentionCache"),
    (F.cross_entropy_backward, None, "CrossEntropyCache"),
    (F.embedding_backward, None, "EmbeddingCache"),
    (F.relu_backward, None, "ReluCache"),
    (F.swiglu_backward, None, "SwiGLUCache"),
])
def test_a_backward_given_another_ops_cache_names_both(backward, own, expected):
    caches = _caches()
    for name, other in caches.items():
        if name == own:
            continue
        with pytest.raises(TypeError, match=f"cache must be the {expected} that .* returns; "
                                            f"got {type(other).__name__}"):
            backward(np.ones((2, 4)), other)
    with pytest.raises(TypeError, match=f"cache must be the {expected}"):
        backward(np.ones((2, 4)), (1, 2, 3))  # a plain tuple


@pytest.mark.parametrize("training", [True, False])
def test_dropout_backward_checks_douts_shape(training):
    x = RNG.standard_normal((2, 4))
    _, cache = F.dropout_forward(x, 0.5, training=training, rng=np.random.default_rng(1))
    with pytest.raises(ValueError, match=r"dout must have shape \(2, 4\) .*got \(3, 3\)"):
        F.dropout_backward(np.zeros((3, 3)), cache)
    assert F.dropout_backward(np.ones((2, 4)), cache).shape == (2, 4)


def test_batch_norm_names_a_bad_num_batches_tracked_and_a_zero_channel_count():
    x = RNG.standard_normal((4, 3))
    args = (x, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3))
    with pytest.raises(TypeError, match="num_batches_tracked must be an integer >= 0; got 'a'"):
        F.batch_norm_forward(*args, training=True, momentum=None, num_batches_tracked="a")
    for bad in (-1, 1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="num_batches_tracked must be an integer >= 0"):
            F.batch_norm_forward(*args, training=True, momentum=None, num_batches_tracked=bad)
    with pytest.raises(ValueError, match="x must have at least one channel"):
        F.batch_norm_forward(np.zeros((4, 0)), np.ones(0), np.zeros(0), None, None, training=True)
    out, *_ = F.batch_norm_forward(
        *args, training=True, momentum=None, num_batches_tracked=np.int64(2)
    )
    assert out.shape == x.shape
