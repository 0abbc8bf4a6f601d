"""The recipe presets (nvfp4, mxfp8_2d, fp8_blockwise) as precision policies: their GEMM operands
and kept layers as data, in normlab's NumPy model and its trainer; the older presets unchanged."""

import json

import numpy as np
import pytest

from normlab.lab.cli import main
from normlab.models import GPT, GPTConfig
from normlab.nn.numerics import PolicyNumerics, numerics_scope
from normlab.precision import PRESETS, RECIPES, Precision, PrecisionPolicy, get_policy
from normlab.precision.hadamard import (
    GEMM_OPERANDS,
    TE_NVFP4_2D_OPERANDS,
    TE_NVFP4_RHT_OPERANDS,
    TE_NVFP4_SR_OPERANDS,
)
from normlab.precision.policy import OPERAND_ROLES


def test_nvfp4_is_transformer_engines_recipe():
    """NVFP4BlockScaling's QParams: the RHT on the column-wise (wgrad) usage of the input and the
    gradient, stochastic rounding of the gradient, 16x16 tiles for the weight, 1x16 elsewhere;
    TE's NVFP4 dialect, E2M1 elements."""
    pol = get_policy("nvfp4")
    ops = dict(pol.operands)
    assert tuple(ops) == GEMM_OPERANDS
    for name, p in ops.items():
        assert p.format.name == "float4_e2m1fn"
        rotated = p.scaling.kind == "hadamard"
        inner = p.scaling.scaling if rotated else p.scaling
        assert inner.kind == "nvfp4" and inner.dialect == "te"
        assert rotated == (name in TE_NVFP4_RHT_OPERANDS)
        assert (p.rounding == "stochastic") == (name in TE_NVFP4_SR_OPERANDS)
        assert inner.two_d == (name in TE_NVFP4_2D_OPERANDS)
    assert pol.params.format.name == pol.activations.format.name == "bfloat16"
    assert pol.master.format.name == "float32" and pol.keep_layers == ()


def test_fp8_blockwise_is_deepseek_v3s_and_mxfp8_2d_tiles_the_weight():
    pol = get_policy("fp8_blockwise")
    for role in ("compute", "gradients"):
        s = getattr(pol, role).scaling
        assert (s.kind, s.dialect, s.block, s.two_d) == ("fp8_blocks", "deepgemm", 128, False)
    for name in ("fprop.weight", "dgrad.weight"):
        assert pol.operand(name).scaling.two_d and pol.operand(name).scaling.block == 128
        assert pol.operand(name).format.name == "float8_e4m3fn"
    assert pol.operand("wgrad.input") == pol.compute  # 1x128 along the tokens
    mx = get_policy("mxfp8_2d")
    assert mx.operand("fprop.weight").scaling.two_d and mx.compute == get_policy("mxfp8").compute
    assert mx.operand("fprop.weight").scaling.scale_rule == "ceil"


def test_recipes_are_named_as_presets_and_kept_apart_from_them():
    assert tuple(RECIPES) == ("nvfp4", "mxfp8_2d", "fp8_blockwise")
    assert not set(RECIPES) & set(PRESETS)
    assert all(PrecisionPolicy.preset(n) is RECIPES[n] for n in RECIPES)
    with pytest.raises(ValueError, match="recipes: nvfp4, mxfp8_2d, fp8_blockwise"):
        get_policy("nvfp6")


@pytest.mark.parametrize("name", [*PRESETS, *RECIPES])
def test_policies_round_trip_and_older_presets_keep_their_json(name):
    pol = get_policy(name)
    assert PrecisionPolicy.from_json(pol.to_json()) == pol
    hash(pol)
    keys = set(pol.to_dict())
    assert ("operands" in keys) == (name in RECIPES) and "keep_layers" not in keys
    kept = pol.replace(keep_layers=["blocks.3", "head"])
    assert PrecisionPolicy.from_json(kept.to_json()).keep_layers == ("blocks.3", "head")


def test_operand_falls_back_to_its_role_and_kept_is_unscaled_params():
    pol = get_policy("mxfp8_2d")
    assert pol.operand("dgrad.grad_output") == pol.gradients
    assert set(OPERAND_ROLES) == set(GEMM_OPERANDS)
    k = get_policy("nvfp4").kept()
    assert k.compute == k.gradients == Precision("bfloat16") and k.operands == ()
    assert k.params == get_policy("nvfp4").params and k.name == "nvfp4/kept"
    p = pol.replace(keep_layers=("blocks.1", "head*"))
    assert p.keeps("blocks.1.mlp.fc") and p.keeps("head") and not p.keeps("blocks.10.attn")


@pytest.mark.parametrize("change,exc,message", [
    ({"operands": {"fprop.bias": "bfloat16"}}, ValueError, "unknown GEMM operand 'fprop.bias'"),
    ({"operands": {"fprop.input": {"format": "float8_e4m3fn", "scaling": {"kind": "delayed"}}}},
     ValueError, "operands.fprop.input: .* keeps a state"),
    ({"operands": ["fprop.input"]}, TypeError, "operands must be a mapping"),
    ({"keep_layers": "head"}, TypeError, "keep_layers must be a list"),
    ({"keep_layers": [""]}, TypeError, "keep_layers must be a list"),
])
def test_bad_operands_and_kept_layers_are_refused_by_name(change, exc, message):
    with pytest.raises(exc, match=message):
        get_policy("nvfp4").replace(**change)
    with pytest.raises(ValueError, match="unknown GEMM operand"):
        get_policy("nvfp4").operand("wgrad.bias")


def test_numpy_model_rounds_the_forward_operands_of_the_recipe():
    pol = get_policy("nvfp4")
    n = PolicyNumerics(pol, rng=np.random.default_rng(0)).bind("blocks.0.mlp.fc")
    r = np.random.default_rng(1)
    w = r.standard_normal((32, 48)).astype(np.float32)
    x = r.standard_normal((2, 16, 48)).astype(np.float32)
    wp = pol.params.apply(w)
    np.testing.assert_array_equal(n.weight(w), pol.operand("fprop.weight").apply(wp))
    np.testing.assert_array_equal(n.input(x), pol.operand("fprop.input").apply(x))
    assert not np.array_equal(n.weight(w), pol.compute.apply(wp))  # 16x16 tiles, not 1x16
    g = PolicyNumerics(pol, rng=np.random.default_rng(5)).bind("blocks.0.mlp.fc").grad(x)
    sr = pol.operand("dgrad.grad_output")
    assert sr.rounding == "stochastic"
    np.testing.assert_array_equal(g, sr.apply(x, rng=np.random.default_rng(5)))
    assert not np.array_equal(g, sr.apply(x, rng=np.random.default_rng(6)))


def _loss(policy, seed=0):
    cfg = GPTConfig(vocab_size=16, seq_len=16, n_layers=2, d_model=32, n_heads=2)
    model = GPT(cfg, rng=np.random.default_rng(0))
    idx = np.random.default_rng(1).integers(0, 16, (2, 16))
    with numerics_scope(model, PolicyNumerics(policy, rng=np.random.default_rng(seed))):
        return model.forward(idx, np.roll(idx, -1, 1)).loss


def test_numpy_model_keeps_the_named_layers_in_bf16():
    pol = get_policy("nvfp4")
    every = pol.replace(keep_layers=("blocks.*", "head"))
    assert _loss(every) == _loss(pol.kept())
    assert _loss(pol.replace(keep_layers=("blocks.1", "head"))) != _loss(pol.kept())
    assert _loss(pol) != _loss(pol.kept())


@pytest.mark.parametrize("name", list(RECIPES))
def test_normlab_train_runs_the_recipe(tmp_path, capsys, name):
    out = tmp_path / "run.json"
    tiny = ["--depth", "2", "--width", "32", "--heads", "2", "--seq", "16", "--batch", "4",
            "--steps", "4", "--warmup", "1", "--eval-interval", "2", "--eval-batches", "1",
            "--quiet"]
    assert main(["train", *tiny, "--precision", name, "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["config"]["precision"] == name and np.isfinite(d["final_val_loss"])
    losses = [h["loss"] for h in d["history"]]
    assert np.isfinite(losses).all()
    assert main(["train", *tiny, "--json", str(tmp_path / "fp32.json")]) == 0
    fp32 = json.loads((tmp_path / "fp32.json").read_text())
    assert [h["loss"] for h in fp32["history"]] != losses
