"""Module.flatten: parameters and gradients as views into two flat buffers, values unchanged."""

import numpy as np

from normlab.models import GPT, GPTConfig
from normlab.nn import Linear, Module, RMSNorm
from normlab.train.optim import flat_buffer


class Two(Module):
    def __init__(self, rng, dtype=np.float32):
        super().__init__()
        self.a = Linear(4, 3, rng=rng, bias=True, dtype=dtype)
        self.n = RMSNorm(3, dtype=np.float32)


def test_flatten_keeps_values_and_makes_views(rng):
    m = Two(rng)
    before = {k: v.copy() for k, v in m.parameters().items()}
    m.flatten()
    params, grads = m.parameters(), m.gradients()
    assert list(params) == list(before)
    for k in before:
        np.testing.assert_array_equal(params[k], before[k])
    p, g = flat_buffer(list(params.values())), flat_buffer(list(grads.values()))
    assert (
        p is not None and g is not None and p.size == g.size == sum(v.size for v in before.values())
    )
    # the module computes with the views: a backward adds into the flat gradient buffer
    x = rng.normal(size=(2, 4)).astype(np.float32)
    y = m.a(x)
    m.a.backward(np.ones_like(y))
    np.testing.assert_allclose(g[: 12].reshape(3, 4), np.ones((2, 3)).T @ x, rtol=1e-6)
    m.zero_grad()
    assert not g.any()


def test_flatten_is_a_no_op_for_mixed_dtypes_or_shared_arrays(rng):
    m = Two(rng, dtype=np.float64)  # float64 Linear, float32 RMSNorm
    before = m.parameters()
    m.flatten()
    assert all(m.parameters()[k] is v for k, v in before.items())
    shared = Module()
    w = np.ones(3, np.float32)
    shared.add_param("w", w)
    child = Module()
    child.add_param("w", w)
    shared.child = child
    shared.flatten()
    assert shared.params["w"] is w and child.params["w"] is w


def test_gpt_parameters_and_gradients_are_flat():
    cfg = GPTConfig(vocab_size=16, seq_len=8, n_layers=2, d_model=16, n_heads=2)
    model = GPT(cfg, rng=np.random.default_rng(0))
    assert flat_buffer(list(model.parameters().values())) is not None
    assert flat_buffer(list(model.gradients().values())) is not None
