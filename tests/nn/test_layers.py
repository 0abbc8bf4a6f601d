import numpy as np
import pytest
import torch

from normlab import nn
from normlab.functional import layer_norm_backward, layer_norm_forward


def test_parameters_and_gradients_share_names_and_shapes():
    ln = nn.LayerNorm(5)
    assert set(ln.parameters()) == set(ln.gradients()) == {"weight", "bias"}
    assert nn.LayerNorm(5, bias=False).parameters().keys() == {"weight"}
    assert nn.RMSNorm(4).parameters().keys() == {"weight"}
    assert set(nn.DyT(4).parameters()) == {"alpha", "weight", "bias"}
    assert float(nn.DyT(4).params["alpha"]) == 0.5


def test_gradients_accumulate_and_zero_grad_clears_them(rng):
    ln = nn.LayerNorm(6)
    ln.params["weight"][:] = rng.normal(size=6)
    x, dout = rng.normal(size=(3, 6)).astype(np.float32), rng.normal(size=(3, 6)).astype(np.float32)
    ln(x)
    ln.backward(dout)
    first = ln.grads["weight"].copy()
    ln(x)
    ln.backward(dout)
    np.testing.assert_allclose(ln.grads["weight"], 2 * first, rtol=1e-6)
    _, cache = layer_norm_forward(x, ln.params["weight"], ln.params["bias"])
    np.testing.assert_allclose(first, layer_norm_backward(dout, cache)[1], rtol=1e-6)
    ln.zero_grad()
    assert not np.any(ln.grads["weight"]) and not np.any(ln.grads["bias"])


def test_backward_before_forward_is_an_error():
    with pytest.raises(RuntimeError, match="before forward"):
        nn.RMSNorm(3).backward(np.ones((2, 3)))


def test_children_give_dotted_names_and_propagate_mode():
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.norms = [nn.LayerNorm(3), nn.RMSNorm(3)]
            self.drop = nn.Dropout(0.1, rng=np.random.default_rng(0))

    m = Pair()
    assert set(m.parameters()) == {"norms.0.weight", "norms.0.bias", "norms.1.weight"}
    m.eval()
    assert not m.norms[0].training and not m.drop.training
    m.train()
    assert m.drop.training
    new = {k: np.full_like(v, 2.0) for k, v in m.parameters().items()}
    m.load_parameters(new)
    assert np.all(m.norms[1].params["weight"] == 2.0)
    with pytest.raises(ValueError, match="missing"):
        m.load_parameters({"norms.0.weight": np.ones(3)})


def test_rmsnorm_offset_initializes_weight_to_zero():
    m = nn.RMSNorm(4, offset=1.0)
    assert not np.any(m.params["weight"])
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    y = m(x)
    np.testing.assert_allclose(y, x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-8), rtol=1e-6)


def test_batchnorm_module_tracks_like_torch(rng):
    C = 5
    ours = nn.BatchNorm(C, dtype=np.float64)
    ref = torch.nn.BatchNorm1d(C, dtype=torch.float64)
    for step in range(4):
        x = rng.normal(step, 2.0, size=(8, C))
        ours(x)
        ref(torch.from_numpy(x))
    np.testing.assert_allclose(ours.running_mean, ref.running_mean.numpy(), rtol=1e-13)
    np.testing.assert_allclose(ours.running_var, ref.running_var.numpy(), rtol=1e-13)
    assert ours.num_batches_tracked == int(ref.num_batches_tracked) == 4
    ours.eval()
    ref.eval()
    x = rng.normal(size=(3, C))
    np.testing.assert_allclose(ours(x), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-13)
    before = ours.running_mean.copy()
    ours(x)
    assert np.array_equal(before, ours.running_mean)  # eval never updates


def test_batchnorm_without_running_stats_uses_batch_statistics_in_eval(rng):
    ours = nn.BatchNorm(3, track_running_stats=False, dtype=np.float64).eval()
    ref = torch.nn.BatchNorm1d(3, track_running_stats=False, dtype=torch.float64).eval()
    x = rng.normal(size=(6, 3))
    np.testing.assert_allclose(ours(x), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-13)


def test_batchnorm_module_mask(rng):
    bn = nn.BatchNorm(4, dtype=np.float64)
    x = rng.normal(size=(2, 5, 4))
    mask = np.ones((2, 5), bool)
    mask[1, 2:] = False
    y = bn(x, mask=mask)
    np.testing.assert_allclose(bn.running_mean, 0.1 * x[mask].mean(0), rtol=1e-13)
    dx = bn.backward(np.ones_like(y))
    assert not np.any(dx[~mask])


def test_dropout_module_train_and_eval():
    d = nn.Dropout(0.5, rng=np.random.default_rng(0))
    x = np.ones((100,))
    assert np.any(d(x) == 0)
    d.eval()
    assert np.array_equal(d(x), x)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError),
                                        (True, TypeError)])
def test_bad_width_is_refused(bad, error):
    """A width of the wrong kind is a TypeError, a wrong value a ValueError (normlab._checks)."""
    with pytest.raises(error, match="width C must be an integer >= 1"):
        nn.LayerNorm(bad)
