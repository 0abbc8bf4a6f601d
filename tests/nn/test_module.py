"""The Module base: the module tree (named_modules / modules) and releasing saved activations."""

import numpy as np

from normlab.models import GPT, GPTConfig
from normlab.nn import LayerNorm, Linear, Module


class _Stack(Module):
    def __init__(self, rng):
        super().__init__()
        self.first = Linear(4, 4, rng=rng)
        self.layers = [LayerNorm(4), Linear(4, 2, rng=rng)]


def test_named_modules_walks_the_tree_depth_first_with_dotted_names():
    m = _Stack(np.random.default_rng(0))
    names = [n for n, _ in m.named_modules()]
    assert names == ["", "first", "layers.0", "layers.1"]
    assert [type(x).__name__ for x in m.modules()] == ["_Stack", "Linear", "LayerNorm", "Linear"]
    assert [n for n, _ in m.named_modules("net")] == ["net", "net.first", "net.layers.0",
                                                      "net.layers.1"]
    # the parameter names are the module names plus the parameter's
    params = {n for n, _ in m.named_parameters()}
    for name, child in m.named_modules():
        for p in child.params:
            assert (f"{name}.{p}" if name else p) in params


def test_release_drops_every_saved_activation_rezero_and_head_included():
    cfg = GPTConfig(vocab_size=7, seq_len=4, n_layers=2, d_model=8, n_heads=2, dtype="float64",
                    placement="rezero")
    model = GPT(cfg, rng=np.random.default_rng(0))
    idx = np.random.default_rng(1).integers(0, 7, (2, 4))
    model.forward(idx, idx)
    assert any(m._cache is not None for m in model.modules())
    assert any(getattr(m, "_f", None) is not None for m in model.modules())
    model.release()
    assert all(m._cache is None for m in model.modules())
    assert all(getattr(m, "_f", None) is None for m in model.modules())
    assert model._head_cache is None and model._loss_cache is None
    model.forward(idx, idx)
    model.backward()  # the backward releases them itself
    assert all(m._cache is None for m in model.modules())
