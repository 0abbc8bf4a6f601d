"""The explicit switch between the fused kernels and the reference: modules default to
"kernel", ``set_impl("reference")`` switches a module and its children, and both paths agree
within the kernels' tolerance (a model's loss and every gradient included)."""

import numpy as np
import pytest

from normlab import kernels
from normlab.models import GPT, GPTConfig
from normlab.nn import MLP, LayerNorm, RMSNorm
from normlab.testing import assert_close


def test_modules_default_to_kernels_and_switch_explicitly(rng):
    ln = LayerNorm(16)
    assert ln.impl == "kernel"
    assert LayerNorm(16, impl="reference").impl == "reference"
    mlp = MLP(8, 16, "gelu", rng=rng)
    assert mlp.set_impl("reference") is mlp
    assert mlp.impl == mlp.fc.impl == mlp.proj.impl == "reference"
    with pytest.raises(ValueError, match="impl must be one of"):
        RMSNorm(4, impl="fast")
    ref = kernels.resolve("reference", "layer_norm_forward")
    assert ref.__module__ == "normlab.functional.layernorm"
    assert kernels.resolve("kernel", "layer_norm_forward").__module__ == "normlab.kernels.norms"


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_norm_modules_agree_across_impls(rng, cls):
    x = rng.normal(size=(3, 5, 24)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    mods = [cls(24, impl="kernel"), cls(24, impl="reference")]
    outs = [m(x) for m in mods]
    dxs = [m.backward(dy) for m in mods]
    assert_close(outs[0], outs[1], ulps=8)
    assert_close(dxs[0], dxs[1], ulps=16, atol=16 * np.finfo(np.float32).eps * np.abs(dy).max())
    for name in mods[0].grads:
        g0, g1 = mods[0].grads[name], mods[1].grads[name]
        bound = 64 * np.finfo(np.float32).eps * np.abs(dy).sum(axis=(0, 1)).max()
        assert_close(g0, g1, ulps=64, atol=bound)


@pytest.mark.parametrize("norm,activation", [("layernorm", "gelu"), ("rmsnorm", "gelu_tanh")])
def test_model_loss_and_gradients_agree_across_impls(norm, activation):
    cfg = GPTConfig(vocab_size=11, seq_len=6, n_layers=2, d_model=16, n_heads=2, norm=norm,
                    activation=activation, final_softcap=20.0, dtype="float64")
    data = np.random.default_rng(1)
    idx = data.integers(0, 11, size=(3, 6))
    targets = data.integers(0, 11, size=(3, 6))
    results = []
    for impl in ("kernel", "reference"):
        model = GPT(cfg, rng=np.random.default_rng(0)).set_impl(impl)
        loss = model.forward(idx, targets)
        model.backward()
        results.append((loss.loss, model.gradients()))
    (l0, g0), (l1, g1) = results
    np.testing.assert_allclose(l0, l1, rtol=1e-13)
    for name in g0:
        assert_close(g0[name], g1[name], ulps=64, atol=1e-14 * max(1.0, np.abs(g1[name]).max()),
                     what=name)
