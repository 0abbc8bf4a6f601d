"""``GPT.empty``: a model built without drawing, for a loader; ``Module.replace_parameters``."""

from __future__ import annotations

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=8, n_heads=2, init="xavier")


def test_empty_has_every_parameter_of_the_drawn_model_as_zeros():
    drawn = GPT(CFG, rng=np.random.default_rng(0))
    empty = GPT.empty(CFG)
    ours, theirs = empty.parameters(), drawn.parameters()
    assert list(ours) == list(theirs)
    for name, p in ours.items():
        assert p.shape == theirs[name].shape and p.dtype == theirs[name].dtype
        assert not np.any(p) or (name.endswith("weight") and "norm" in name), name
    # the dropout generator is the one a seed-0 model gets
    assert (empty.dropout_rng.integers(2**62)
            == GPT(CFG, rng=np.random.default_rng(0)).dropout_rng.integers(2**62))


def test_replace_parameters_makes_the_arrays_the_parameters():
    model = GPT.empty(CFG)
    w = np.ones_like(model.parameters()["wte.weight"])
    model.replace_parameters({"wte.weight": w})
    assert model.parameters()["wte.weight"] is w
    assert model.wte.grads["weight"].shape == w.shape  # the gradient buffer is kept


@pytest.mark.parametrize("values,message", [
    ({"nope": np.zeros(3)}, "names no parameter of this module: \\['nope'\\]"),
    ({"wte.weight": np.zeros((3, 3), np.float32)}, "must be an ndarray of dtype float32 and shape"),
    ({"wte.weight": np.zeros((11, 8), np.float64)}, "must be an ndarray of dtype float32"),
    ({"wte.weight": [[0.0]]}, "got list"),
])
def test_replace_parameters_checks_everything_before_replacing_anything(values, message):
    model = GPT.empty(CFG)
    before = dict(model.parameters())
    with pytest.raises(ValueError, match=message):
        model.replace_parameters({"norm_f.weight": np.ones(8, np.float32), **values})
    assert all(model.parameters()[k] is v for k, v in before.items())
    with pytest.raises(TypeError, match="values must be a dict"):
        model.replace_parameters([("wte.weight", 1)])
