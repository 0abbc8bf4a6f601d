"""``GPTConfig(init="xavier")``: every block matrix drawn from Xavier normal (q, k, v each as its
own matrix), DeepNorm's gain on v, the output and the MLP projections; embeddings, the head,
biases and norms as with the normal init."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig, deepnorm_beta

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=4, d_model=128, n_heads=4, d_ff=256,
                init="xavier", init_std=0.05, dtype="float64")


def _xavier(shape) -> float:
    return float(np.sqrt(2.0 / sum(shape)))


def _stds(model: GPT) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    H, K, D = model.config.n_heads, model.config.kv_heads, model.config.head_dim
    for blk in model.blocks:
        W = blk.attn.branch.qkv.params["weight"]
        parts = {"q": W[: H * D], "k": W[H * D:(H + K) * D], "v": W[(H + K) * D:],
                 "proj": blk.attn.branch.proj.params["weight"],
                 "fc": blk.mlp.branch.fc.params["weight"],
                 "mlp.proj": blk.mlp.branch.proj.params["weight"]}
        for name, w in parts.items():
            out.setdefault(name, []).append(float(w.std() / _xavier(w.shape)))
    return out


@pytest.mark.parametrize("placement,kw", [("post", {}), ("admin", {}), ("pre", {}),
                                          ("post", {"n_kv_heads": 2, "d_head": 24})])
def test_block_matrices_are_xavier_normal(placement, kw):
    model = GPT(dataclasses.replace(CFG, placement=placement, **kw), rng=np.random.default_rng(0))
    for name, ratios in _stds(model).items():
        np.testing.assert_allclose(ratios, 1.0, rtol=0.05, err_msg=name)
    # the embeddings and the head keep init_std
    assert model.wte.params["weight"].std() == pytest.approx(0.05, rel=0.1)
    assert model.head.params["weight"].std() == pytest.approx(0.05, rel=0.1)


def test_deepnorm_gain_on_v_the_output_and_the_mlp():
    model = GPT(dataclasses.replace(CFG, placement="deepnorm"), rng=np.random.default_rng(1))
    beta = deepnorm_beta(CFG.n_layers)
    for name, ratios in _stds(model).items():
        want = 1.0 if name in ("q", "k") else beta
        np.testing.assert_allclose(ratios, want, rtol=0.05, err_msg=name)


def test_the_normal_init_is_unchanged_and_bad_names_are_refused():
    normal = dataclasses.replace(CFG, init="normal")
    a = GPT(normal, rng=np.random.default_rng(2)).parameters()
    b = GPT(GPTConfig(**{**normal.to_dict()}), rng=np.random.default_rng(2)).parameters()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    proj = GPT(normal, rng=np.random.default_rng(2)).blocks[0].mlp.branch.proj.params["weight"]
    assert proj.std() == pytest.approx(0.05 / np.sqrt(2 * CFG.n_layers), rel=0.05)  # GPT-2
    with pytest.raises(ValueError, match="init must be one of"):
        dataclasses.replace(CFG, init="kaiming")
