"""Placements, DeepNorm's constants and init, ReZero at init, and the config's refusals."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPT, PLACEMENTS, Block, GPTConfig, deepnorm_alpha, deepnorm_beta

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=3, d_model=16, n_heads=2, dtype="float64")


def _block(**kw):
    cfg = dataclasses.replace(CFG, **kw)
    rng = np.random.default_rng(0)
    return Block(cfg, rng=rng, dropout_rng=rng), cfg


def test_deepnorm_constants_match_the_paper():
    # papers.md section 6: N=6 -> alpha 1.861, beta 0.3799; N=100 -> 3.761, 0.1880
    assert deepnorm_alpha(6) == pytest.approx(1.861, abs=5e-4)
    assert deepnorm_beta(6) == pytest.approx(0.3799, abs=5e-5)
    assert deepnorm_alpha(100) == pytest.approx(3.761, abs=5e-4)
    assert deepnorm_beta(100) == pytest.approx(0.1880, abs=5e-5)
    for L in (1, 6, 48):  # the update-bound condition: 2L * 2 beta^2 / alpha^2 = 1
        assert 2 * L * 2 * deepnorm_beta(L) ** 2 / deepnorm_alpha(L) ** 2 == pytest.approx(1.0)


def test_deepnorm_scales_mlp_value_and_output_projections_by_beta():
    cfg = dataclasses.replace(CFG, placement="deepnorm", d_model=128, n_heads=4, n_layers=6)
    block = Block(cfg, rng=np.random.default_rng(1), dropout_rng=np.random.default_rng(2))
    beta, s = deepnorm_beta(6), cfg.init_std
    qkv = block.attn.branch.qkv.params["weight"]
    C = cfg.d_model
    stds = {
        "q": qkv[:C].std(), "k": qkv[C:2 * C].std(), "v": qkv[2 * C:].std(),
        "proj": block.attn.branch.proj.params["weight"].std(),
        "fc": block.mlp.branch.fc.params["weight"].std(),
        "mlp.proj": block.mlp.branch.proj.params["weight"].std(),
    }
    for name in ("q", "k"):
        assert stds[name] == pytest.approx(s, rel=0.03), name
    for name in ("v", "proj", "fc", "mlp.proj"):
        assert stds[name] == pytest.approx(s * beta, rel=0.03), name


def test_pre_ln_scales_output_projections_by_gpt2_factor():
    cfg = dataclasses.replace(CFG, d_model=128, n_heads=4, n_layers=8)
    block = Block(cfg, rng=np.random.default_rng(1), dropout_rng=np.random.default_rng(2))
    expected = cfg.init_std / np.sqrt(2 * 8)
    assert block.attn.branch.proj.params["weight"].std() == pytest.approx(expected, rel=0.03)
    assert block.mlp.branch.fc.params["weight"].std() == pytest.approx(cfg.init_std, rel=0.03)


def test_rezero_starts_as_the_identity_and_learns_its_gate_first():
    block, _ = _block(placement="rezero")
    x = np.random.default_rng(3).normal(size=(2, 5, 16))
    np.testing.assert_array_equal(block(x), x)
    dx = block.backward(np.ones_like(x))
    np.testing.assert_array_equal(dx, np.ones_like(x))
    grads = block.gradients()
    assert grads["attn.resweight"] != 0 and grads["mlp.resweight"] != 0
    assert not grads["attn.branch.qkv.weight"].any()  # a = 0 blocks the branch's gradient


def test_post_ln_and_deepnorm_blocks_end_normalized():
    x = np.random.default_rng(4).normal(3.0, 5.0, size=(2, 5, 16))
    for placement in ("post", "deepnorm"):
        block, _ = _block(placement=placement)
        y = block(x)
        np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
        np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-4)


def test_lns_scales_each_blocks_norm_output_by_one_over_sqrt_of_its_depth():
    """LayerNorm Scaling (arXiv 2502.05795): block l (from 1) is Pre-LN with N(x) / sqrt(l)
    fed to both sublayers, as a Pre-LN block whose norms' gains are divided by sqrt(l)."""
    cfg = dataclasses.replace(CFG, n_layers=3)
    x = np.random.default_rng(5).normal(size=(2, 5, 16))
    for layer in range(3):
        lns = Block(dataclasses.replace(cfg, placement="lns"), rng=np.random.default_rng(1),
                    dropout_rng=np.random.default_rng(2), layer=layer)
        pre = Block(dataclasses.replace(cfg, placement="pre"), rng=np.random.default_rng(1),
                    dropout_rng=np.random.default_rng(2), layer=layer)
        assert lns.attn.scale == lns.mlp.scale == 1 / np.sqrt(layer + 1)
        for sub in (pre.attn, pre.mlp):
            sub.norm.params["weight"][...] /= np.sqrt(layer + 1)
        np.testing.assert_allclose(lns(x), pre(x), rtol=1e-12, atol=1e-12)
        dy = np.random.default_rng(6).normal(size=x.shape)
        np.testing.assert_allclose(lns.backward(dy), pre.backward(dy), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fraction,posts", [(0.25, 2), (0.0, 0), (0.5, 4), (1.0, 8), (0.3, 2)])
def test_mixln_runs_post_ln_in_the_first_floor_alpha_l_blocks_and_pre_ln_after(fraction, posts):
    """Mix-LN (arXiv 2412.13795): floor(alpha L) Post-LN blocks, then Pre-LN (8 blocks here);
    each Mix-LN block computes what that placement's block computes with the same weights."""
    cfg = dataclasses.replace(CFG, n_layers=8, placement="mixln", mixln_fraction=fraction)
    assert cfg.mixln_post_layers == posts and cfg.final_norm
    model = GPT(cfg, rng=np.random.default_rng(0))
    assert [b.attn.placement for b in model.blocks] == ["post"] * posts + ["pre"] * (8 - posts)
    assert [b.mlp.placement for b in model.blocks] == [b.attn.placement for b in model.blocks]
    x = np.random.default_rng(7).normal(size=(2, 5, 16))
    for layer, block in enumerate(model.blocks):
        kind = "post" if layer < posts else "pre"
        plain = Block(dataclasses.replace(CFG, n_layers=8, placement=kind),
                      rng=np.random.default_rng(1), dropout_rng=np.random.default_rng(2))
        for name, p in block.parameters().items():
            plain.parameters()[name][...] = p
        np.testing.assert_array_equal(block(x), plain(x))


def test_mixln_fraction_is_refused_outside_0_1_and_without_mixln():
    with pytest.raises(ValueError, match=r"config: mixln_fraction must be a finite number in"):
        GPTConfig(placement="mixln", mixln_fraction=1.5)
    with pytest.raises(ValueError, match="mixln_fraction applies to placement 'mixln'"):
        GPTConfig(mixln_fraction=0.5)


@pytest.mark.parametrize("placement", [p for p in PLACEMENTS if p != "ngpt"])
def test_which_norms_exist(placement):
    model = GPT(dataclasses.replace(CFG, placement=placement, norm="rmsnorm"),
                rng=np.random.default_rng(0))
    names = model.parameters()
    has = lambda s: any(s in n for n in names)  # noqa: E731
    assert has("attn.norm.weight") == (
        placement in ("post", "pre", "sandwich", "deepnorm", "branch", "admin", "lns", "mixln")
    )
    assert has("attn.norm_out.weight") == (placement == "sandwich")
    assert ("norm_f.weight" in names) == (
        placement in ("pre", "sandwich", "rezero", "none", "branch", "lns", "mixln")
    )
    assert has("resweight") == (placement == "rezero")
    assert has("omega") == (placement == "admin")
    assert not any("norm" in n for n in GPT(dataclasses.replace(CFG, placement=placement,
                                                                norm="none"),
                                            rng=np.random.default_rng(0)).parameters()
                   if "q_norm" not in n and "k_norm" not in n)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"n_heads": 3}, r"n_heads \(3\) must divide d_model \(16\)"),
        ({"placement": "middle"}, "placement must be one of"),
        ({"norm": "batchnorm"}, "norm must be one of"),
        ({"qk_norm": "l2"}, "qk_norm must be one of"),
        ({"activation": "tanh"}, "activation must be one of"),
        ({"n_layers": 0}, "n_layers must be an integer >= 1"),
        ({"attn_softcap": 0.0}, "attn_softcap must be a finite number > 0"),
        ({"final_softcap": -30.0}, "final_softcap must be a finite number > 0"),
        ({"dropout": 1.0}, r"dropout must be a finite number in \[0, 1\)"),
        ({"z_loss": -1e-4}, "z_loss must be a finite number >= 0"),
        ({"positions": "rope", "d_model": 18, "n_heads": 2}, "RoPE needs an even head width"),
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"norm_eps": 0.0}, "norm_eps must be a finite number > 0"),
        ({"dyt_alpha": 0.0}, "dyt_alpha must be a finite number > 0"),
        ({"d_ff": 0}, "d_ff must be an integer >= 1"),
        ({"n_kv_heads": 3, "n_heads": 4}, r"n_kv_heads \(3\) must divide n_heads \(4\)"),
        ({"d_head": 0}, "d_head must be an integer >= 1"),
        ({"attn_scale": 0.0}, "attn_scale must be a finite number > 0"),
        ({"sliding_window": 0}, "sliding_window must be an integer >= 1"),
        ({"window_layers": (0,)}, "sliding_window is None"),
        (
            {"sliding_window": 4, "window_layers": (3,)},
            r"window_layers must be a tuple of layer indices",
        ),
        ({"sliding_window": 4, "causal": False}, "sliding_window needs causal attention"),
        ({"qk_norm_scope": "model"}, "qk_norm_scope must be one of"),
        ({"norm_offset": 1.0}, "norm_offset applies to the RMSNorm gain"),
        ({"embed_scale": 0.0}, "embed_scale must be a finite number > 0"),
        ({"rope_scaling": "yarn"}, "rope_scaling must be one of"),
        ({"rope_factor": 0.5}, "rope_factor must be a finite number >= 1"),
        (
            {"rope_high_freq_factor": 0.5},
            "rope_high_freq_factor must be a finite number > rope_low",
        ),
    ],
)
def test_config_refuses_inconsistent_values(kw, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(CFG, **kw)


def test_dyt_alpha_sets_every_dyt_initial_alpha():
    cfg = dataclasses.replace(CFG, norm="dyt", dyt_alpha=0.2)
    model = GPT(cfg, rng=np.random.default_rng(0))
    alphas = [v for k, v in model.parameters().items() if k.endswith("alpha")]
    assert len(alphas) == 2 * cfg.n_layers + 1  # attention, MLP, final
    assert all(float(a) == pytest.approx(0.2) for a in alphas)


def test_config_round_trips_through_a_dict():
    cfg = dataclasses.replace(CFG, attn_softcap=50.0, qk_norm="rmsnorm")
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    windowed = dataclasses.replace(CFG, sliding_window=3, window_layers=(0, 2), n_kv_heads=1)
    as_json = {**windowed.to_dict(), "window_layers": [0, 2]}  # JSON has lists, not tuples
    assert GPTConfig.from_dict(as_json) == windowed
    with pytest.raises(ValueError, match="unknown model fields"):
        GPTConfig.from_dict({**cfg.to_dict(), "depth": 3})


def test_logits_apply_the_final_cap_and_bad_sequences_are_refused():
    cfg = dataclasses.replace(CFG, final_softcap=0.5)
    model = GPT(cfg, rng=np.random.default_rng(0))
    idx = np.zeros((1, 8), int)
    assert np.all(np.abs(model.logits(idx)) <= 0.5)
    with pytest.raises(ValueError, match="sequence length T = 9"):
        model.logits(np.zeros((1, 9), int))
    with pytest.raises(ValueError, match="idx must be a"):
        model.logits(np.zeros(8, int))
    with pytest.raises(RuntimeError, match="before forward"):
        GPT(cfg, rng=np.random.default_rng(0)).backward()


def test_ngpt_has_no_norm_and_its_own_scalings_at_their_stored_inits():
    """nGPT (NVIDIA/ngpt model.py): no norm; alpha stored at 1 / sqrt(C) (read 0.05), s_qk at
    1 / sqrt(C) (read 1), s_uv at 1 (read sqrt(C)), s_z at 1 / sqrt(C) (read 1); every matrix's
    vectors along C of unit norm from the start (train.py's normalize_matrices before step 0)."""
    cfg = dataclasses.replace(CFG, placement="ngpt", norm="none", positions="rope")
    model = GPT(cfg, rng=np.random.default_rng(0))
    params, C = model.parameters(), cfg.d_model
    assert not any("norm" in n for n in params)
    for name, value in (("blocks.0.attn.alpha", C**-0.5), ("blocks.0.mlp.alpha", C**-0.5),
                        ("blocks.0.attn.branch.sqk", C**-0.5), ("blocks.0.mlp.branch.suv", 1.0),
                        ("sz", C**-0.5)):
        np.testing.assert_allclose(params[name], value, rtol=1e-6)
    assert model.blocks[0].attn.alpha_scale * C**-0.5 == pytest.approx(0.05)
    assert {n for n, _, _ in model.matrices()} == {n for n, p in params.items() if p.ndim == 2}
    for name, w, axis in model.matrices():
        assert w.shape[axis] == C, name  # the embedding axis
        np.testing.assert_allclose(np.linalg.norm(w, axis=axis), 1.0, rtol=1e-6)
