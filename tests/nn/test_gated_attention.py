"""Gated attention (arXiv 2505.06708, G1 elementwise): the module's gate projection drawn after
every other weight, the gate's effect, its gradients by finite differences, and a model whose
other parameters are those of the ungated one."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.nn import CausalSelfAttention
from normlab.testing import gradcheck


def _attn(gate, **kw):
    return CausalSelfAttention(8, 2, rng=np.random.default_rng(0), dtype=np.float64, gate=gate,
                               **kw)


def test_the_gate_is_drawn_last_and_a_zero_gate_halves_the_heads_outputs():
    plain, gated = _attn(False), _attn(True)
    assert list(gated.parameters()) == [*plain.parameters(), "gate.weight"]
    for name, p in plain.parameters().items():
        np.testing.assert_array_equal(gated.parameters()[name], p)
    assert gated.parameters()["gate.weight"].shape == (8, 8)  # (H D, C)
    gated.gate.params["weight"][...] = 0.0  # sigmoid(0) = 1/2 on every value
    plain.proj.params["weight"][...] *= 0.5
    x = np.random.default_rng(1).normal(size=(2, 5, 8))
    np.testing.assert_allclose(gated(x), plain(x), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kw", [{}, {"bias": True, "n_kv_heads": 1, "qk_norm": "rmsnorm"}])
def test_gated_attention_passes_gradcheck(kw, rng):
    attn = _attn(True, **kw)
    for p in attn.parameters().values():
        p[...] = rng.normal(0.0, 0.5, size=p.shape)
    names = list(attn.parameters())

    def forward(x, *params):
        for k, v in zip(names, params, strict=True):
            attn.parameters()[k][...] = v
        return attn(x), None

    def backward(d, _cache):
        attn.zero_grad()
        dx = attn.backward(d)
        return (dx, *[attn.gradients()[k].copy() for k in names])

    inputs = [rng.normal(size=(2, 4, 8)), *[p.copy() for p in attn.parameters().values()]]
    report = gradcheck(forward, backward, inputs, rng=rng)
    assert report.passed, str(report)


def test_a_gated_model_keeps_every_ungated_parameter_and_refuses_a_non_flag():
    cfg = GPTConfig(vocab_size=7, seq_len=4, n_layers=2, d_model=8, n_heads=2)
    plain = GPT(cfg, rng=np.random.default_rng(0)).parameters()
    gated = GPT(dataclasses.replace(cfg, attn_gate=True), rng=np.random.default_rng(0))
    extra = sorted(set(gated.parameters()) - set(plain))
    assert extra == ["blocks.0.attn.branch.gate.weight", "blocks.1.attn.branch.gate.weight"]
    with pytest.raises(TypeError, match="config: attn_gate"):
        GPTConfig(attn_gate=1)


def test_sigmoid_attention_runs_the_reference_op_on_either_implementation():
    """Sigmoid attention (arXiv 2410.10781) has no fused kernel: the module computes it with
    the functional reference whichever ``impl`` it is set to, with its own bias."""
    x = np.random.default_rng(2).normal(size=(2, 5, 8)).astype(np.float32)
    outs, grads = [], []
    for impl in ("kernel", "reference"):
        attn = CausalSelfAttention(8, 2, rng=np.random.default_rng(0), sigmoid_bias=-1.0)
        attn.set_impl(impl)
        outs.append(attn(x))
        grads.append(attn.backward(np.ones_like(x)))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(grads[0], grads[1])
    softmax = CausalSelfAttention(8, 2, rng=np.random.default_rng(0))
    assert not np.allclose(softmax(x), outs[0])
    with pytest.raises(ValueError, match="sigmoid_bias must be a finite number"):
        CausalSelfAttention(8, 2, rng=np.random.default_rng(0), sigmoid_bias=float("nan"))
