"""The init schemes: ``init="normal"`` (the default) draws exactly what it drew before the field
existed, and ``init="fan_in"`` (Wortsman et al. 2023, NanoDO) draws every weight with std
1 / sqrt(fan_in) and the tables with std 1 / sqrt(C)."""

import dataclasses
import hashlib
import re

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig, deepnorm_beta
from normlab.models.block import init_stds

SMALL = GPTConfig(vocab_size=11, seq_len=6, n_layers=2, d_model=8, n_heads=2)
# sha256 (first 32 hex digits) of every parameter of GPT(config, rng=default_rng(3)), sorted by
# name, computed with normlab before ``GPTConfig.init`` existed
BEFORE = {
    "pre": (SMALL, "268c5dc3b98d0d656238340085db0427"),
    "deepnorm+swiglu": (dataclasses.replace(SMALL, n_layers=3, placement="deepnorm",
                                            activation="swiglu", d_ff=12),
                        "8d22e84a866e90a6ff504bcb79bf5b4e"),
    "tied+rope+qk": (dataclasses.replace(SMALL, tie_embeddings=True, positions="rope",
                                         init_std=0.05, qk_norm="layernorm"),
                     "8b92de3fe98f1c6bd2ed3621a06408cc"),
}


def _then(name: str) -> str:
    """The parameter's name when the digests were computed: LayerNorm's weight and bias were
    gamma and beta (every config above has LayerNorms)."""
    return re.sub(r"(norm|norm_out|norm_f)\.(weight|bias)$",
                  lambda m: f"{m[1]}.{'gamma' if m[2] == 'weight' else 'beta'}", name)


def _digest(model: GPT) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.parameters().items(), key=lambda kv: _then(kv[0])):
        h.update(_then(name).encode())
        h.update(np.ascontiguousarray(p).tobytes())
    return h.hexdigest()[:32]


@pytest.mark.parametrize("name", list(BEFORE))
def test_the_default_init_is_bit_identical_to_before(name):
    cfg, digest = BEFORE[name]
    assert cfg.init == "normal"
    assert _digest(GPT(cfg, rng=np.random.default_rng(3))) == digest


def test_fan_in_draws_one_over_sqrt_fan_in():
    C, H, L = 128, 4, 3
    cfg = GPTConfig(vocab_size=300, seq_len=256, n_layers=L, d_model=C, n_heads=H, d_ff=384,
                    init="fan_in", init_std=0.5)  # init_std is not read
    p = GPT(cfg, rng=np.random.default_rng(0)).parameters()
    expected = {"wte.weight": C**-0.5, "wpe.weight": C**-0.5, "head.weight": C**-0.5}
    for i in range(L):
        b = f"blocks.{i}."
        expected.update({b + "attn.branch.qkv.weight": C**-0.5,  # fan_in C
                         b + "attn.branch.proj.weight": C**-0.5,  # fan_in H D = C
                         b + "mlp.branch.fc.weight": C**-0.5,
                         b + "mlp.branch.proj.weight": 384**-0.5})  # fan_in d_ff
    for name, std in expected.items():
        w = p[name]
        assert w.std() == pytest.approx(std, rel=0.03), name
        assert abs(w.mean()) < 4 * std / np.sqrt(w.size), name
    # the gains are still ones
    assert all(np.all(v == 1) for k, v in p.items() if k.endswith("weight") and v.ndim == 1)


def test_fan_in_follows_the_head_width_and_deepnorm_beta():
    cfg = GPTConfig(vocab_size=50, seq_len=8, n_layers=6, d_model=64, n_heads=2, d_head=48,
                    placement="deepnorm", init="fan_in")
    s = init_stds(cfg)
    beta = deepnorm_beta(6)
    assert s["qkv"] == 64**-0.5 and s["head"] == 64**-0.5 and s["table"] == 64**-0.5
    assert s["attn_out"] == pytest.approx((2 * 48) ** -0.5 * beta)  # fan_in H D = 96
    assert s["mlp_in"] == pytest.approx(64**-0.5 * beta)
    assert s["mlp_out"] == pytest.approx(256**-0.5 * beta)
    gpt2 = init_stds(dataclasses.replace(cfg, init="normal"))
    assert gpt2 == {"table": 0.02, "head": 0.02, "qkv": 0.02, "attn_out": 0.02 * beta,
                    "mlp_in": 0.02 * beta, "mlp_out": 0.02 * beta}
    plain = init_stds(dataclasses.replace(cfg, init="normal", placement="pre"))
    assert plain["attn_out"] == plain["mlp_out"] == pytest.approx(0.02 / np.sqrt(12))
    assert plain["mlp_in"] == 0.02


def test_fan_in_logits_start_near_unit_scale():
    # with 1/sqrt(C) head rows and a unit-RMS final norm, every logit is about N(0, 1)
    cfg = GPTConfig(vocab_size=400, seq_len=16, n_layers=2, d_model=64, n_heads=4, init="fan_in")
    model = GPT(cfg, rng=np.random.default_rng(1))
    z = model.logits(np.random.default_rng(2).integers(0, 400, size=(4, 16)))
    assert 0.8 < z.std() < 1.2


def test_init_is_checked_and_survives_a_dict():
    with pytest.raises(ValueError, match="init must be one of"):
        dataclasses.replace(SMALL, init="he")
    cfg = dataclasses.replace(SMALL, init="fan_in")
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
