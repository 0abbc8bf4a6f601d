"""Admin (Liu et al. 2020): omega profiled as the official code does, checked against an
independent torch implementation of that code and against its closed form; the whole model's
gradients with the profiled omega (finite differences, torch); what profiling leaves behind.
The placement grid of test_gpt.py (gradients and torch parity for every norm and toggle) covers
admin with random omegas."""

import dataclasses

import numpy as np
import pytest
import torch
import torch_gpt
from test_gpt import _compare, check_gradients, make

from normlab.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=3, d_model=16, n_heads=2, placement="admin",
                activation="relu", init_std=16**-0.5, dtype="float64")


def _model(seed: int = 0, **kw) -> tuple[GPT, np.ndarray]:
    cfg = dataclasses.replace(CFG, **kw)
    rng = np.random.default_rng(seed)
    model = GPT(cfg, rng=rng)
    return model, rng.integers(0, cfg.vocab_size, size=(4, cfg.seq_len))


def _omegas(model: GPT) -> list[np.ndarray]:
    return [sub.params["omega"] for blk in model.blocks for sub in (blk.attn, blk.mlp)]


def test_profiled_omega_matches_the_official_codes_recursion():
    model, idx = _model()
    omegas = model.profile_admin(idx)
    params = {k: torch.tensor(v.copy()) for k, v in model.parameters().items()}
    reference = torch_gpt.profile_admin(model.config, params, idx)
    assert len(omegas) == 2 * CFG.n_layers and omegas[0] == 1.0
    np.testing.assert_allclose(omegas, reference, rtol=1e-12)
    for w, value in zip(_omegas(model), omegas):  # each sublayer's vector is filled with its scalar
        np.testing.assert_array_equal(w, np.full(CFG.d_model, value))


def _stream(model: GPT, idx) -> tuple[float, list[float]]:
    """Var[x_0] and Var[F_i(x_{i-1})] of every sublayer, from normlab's modules directly."""
    x = model._embed(idx)
    var0, var_f = float(np.var(x)), []
    for blk in model.blocks:
        for sub in (blk.attn, blk.mlp):
            f = sub.branch(x)
            var_f.append(float(np.var(f)))
            x = sub.norm(sub.params["omega"] * x + f)
    return var0, var_f


@pytest.mark.parametrize("unit_embeddings", [False, True])
def test_omega_squared_is_the_accumulated_branch_variance(unit_embeddings):
    # omega_i^2 = Var[x_0] + sum_{j<i} Var[F_j]: past the first sublayer the stream is
    # LayerNorm's output, of variance var / (var + eps) ~ 1
    model, idx = _model(1)
    if unit_embeddings:  # fairseq scales its embeddings to unit variance: omega_i^2 = 1 + sum
        model.wte.params["weight"][...] = np.random.default_rng(2).normal(size=(11, 16))
        model.wpe.params["weight"][...] = 0.0
    omegas = np.array(model.profile_admin(idx))
    var0, var_f = _stream(model, idx)
    closed = np.sqrt(var0 + np.concatenate([[0.0], np.cumsum(var_f)[:-1]]))
    closed[0] = 1.0  # omega_1 = 1 by definition
    np.testing.assert_allclose(omegas, closed, rtol=1e-4)
    if unit_embeddings:
        assert var0 == pytest.approx(1.0, abs=0.3)
    assert np.all(np.diff(omegas[1:]) > 0)  # the accumulated variance only grows


def test_gradients_with_the_profiled_omega():
    model, idx, targets = make({"placement": "admin"}, seed=3)
    model.profile_admin(idx)
    assert not np.all(_omegas(model)[1] == 1.0)
    check_gradients(model, idx, targets, per_tensor=4)
    _compare(model, idx, targets, np.float64)


def test_admin_keeps_post_lns_form():
    # every sublayer ends with the norm (no final norm), and with omega = 1 Admin is Post-LN
    model, idx = _model(4)
    assert not model.config.final_norm
    post = GPT(dataclasses.replace(CFG, placement="post"), rng=np.random.default_rng(4))
    targets = np.zeros_like(idx)
    assert model.forward(idx, targets).loss == post.forward(idx, targets).loss
    model.profile_admin(idx)
    x = model._embed(idx)
    for blk in model.blocks:
        x = blk(x)
        np.testing.assert_allclose(x.mean(-1), 0.0, atol=1e-12)
        np.testing.assert_allclose(x.var(-1), 1.0, rtol=1e-3)


def test_profiling_draws_no_dropout_and_keeps_nothing():
    model, idx = _model(5, dropout=0.3)
    state = model.dropout_rng.bit_generator.state
    first = model.profile_admin(idx)
    assert model.dropout_rng.bit_generator.state == state  # eval mode: no mask drawn
    assert model.training  # the mode is restored
    assert all(m._cache is None and getattr(m, "_x", None) is None for m in model.modules())
    assert model.profile_admin(idx) == first  # a function of the weights and the batch
    model.eval()
    model.profile_admin(idx)
    assert not model.training


def test_profiling_is_refused_for_other_placements():
    model, idx = _model(placement="post")
    with pytest.raises(ValueError, match="profile_admin needs placement 'admin'"):
        model.profile_admin(idx)
    with pytest.raises(ValueError, match="profile_omega needs placement 'admin'"):
        model.blocks[0].attn.profile_omega(model._embed(idx), 1.0)
