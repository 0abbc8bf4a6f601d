"""The attention-sink probe (normlab.train.probes: ``first_token_share``, ``sink_rate``,
``attention_sink``): Gu et al.'s first-token share and Sink_1^0.3, against a hand computation and
against PyTorch's softmax / sigmoid of the model's own q and k."""

import dataclasses

import numpy as np
import pytest
import torch

from normlab.models import GPT, GPTConfig
from normlab.train import TrainConfig, train
from normlab.train.probes import (
    SINK_EPS,
    attention_probabilities,
    attention_sink,
    first_token_share,
    sink_rate,
)

MODEL = GPTConfig(vocab_size=12, seq_len=8, n_layers=2, d_model=16, n_heads=2)


def test_share_and_rate_by_hand():
    # one sequence, T = 4; head 1's rows put 1, 0.5, 0.2, 0.6 on token 1 (2.3 over 4 queries),
    # head 2's 1, 0, 0, 0 (the first query sees only token 1): 0.25
    p = np.zeros((1, 2, 4, 4))
    p[0, 0] = [[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.2, 0.3, 0.5, 0], [0.6, 0.2, 0.1, 0.1]]
    p[0, 1] = [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0.5, 0.5, 0], [0, 0.2, 0.3, 0.5]]
    share = first_token_share(p)
    np.testing.assert_allclose(share, [[2.3 / 4, 0.25]])
    assert SINK_EPS == 0.3
    assert sink_rate(share) == 0.5  # 0.575 > 0.3, 0.25 is not
    assert sink_rate(share, eps=0.2) == 1.0
    assert sink_rate(np.array([0.3])) == 0.0  # strictly above the threshold, as the code's ">"


def test_unnormalized_rows_are_read_as_shares():
    """Sigmoid attention's rows (not summing to 1) are divided by their sums first, as the
    official code does: rows (0.5), (0.5, 0.5), (0.8, 0.1, 0.1) -> 1, 0.5, 0.8 -> 2.3 / 3."""
    p = np.zeros((1, 1, 3, 3))
    p[0, 0] = [[0.5, 0, 0], [0.5, 0.5, 0], [0.8, 0.1, 0.1]]
    np.testing.assert_allclose(first_token_share(p), [[2.3 / 3]])
    np.testing.assert_allclose(first_token_share(3.0 * p), [[2.3 / 3]])


def test_the_official_codes_formula():
    """Gu et al.'s compute_attention_sink: (A / arange(T, 0, -1) over the key axis).sum over the
    queries, thresholded at eps and averaged over samples, layers and heads; for the first token
    the ratio is T (every query)."""
    rng = np.random.default_rng(0)
    s = rng.normal(size=(3, 2, 5, 5)) * 3
    s = np.where(np.tril(np.ones((5, 5))) > 0, s, -np.inf)
    A = torch.softmax(torch.from_numpy(s), dim=-1)  # (B, H, T, T)
    ratios = torch.arange(5, 0, -1, dtype=A.dtype)[None, None, None, :]
    importance = (A / ratios).sum(dim=-2)  # (B, H, T): the official code's importance scores
    np.testing.assert_allclose(first_token_share(A.numpy()), importance[..., 0].numpy(),
                               rtol=1e-12)
    expect = float((importance[..., 0] > 0.3).to(torch.float64).mean())
    assert sink_rate(first_token_share(A.numpy())) == pytest.approx(expect, abs=0)


def _torch_probabilities(model: GPT, idx: np.ndarray, fn: str, bias: float) -> list:
    """Every block's p from the q and k the model's attention computed (its cache), by PyTorch."""
    model.eval()
    model.logits(idx)
    out = []
    for b in model.blocks:
        c = b.attn.branch._cache
        q, k = (torch.from_numpy(np.asarray(a, np.float64)) for a in (c.q, c.k))
        s = q @ k.transpose(-1, -2) * c.scale  # (B, H, T, T)
        T = s.shape[-1]
        masked = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(masked, float("-inf"))
        out.append((torch.softmax(s, -1) if fn == "softmax" else torch.sigmoid(s + bias)).numpy())
    model.release()
    return out


@pytest.mark.parametrize("fn,bias", [("softmax", 0.0), ("sigmoid", 0.0), ("sigmoid", -2.0)])
def test_the_models_probabilities_against_pytorch(fn, bias):
    cfg = MODEL if fn == "softmax" else dataclasses.replace(MODEL, attn_fn=fn,
                                                            attn_sigmoid_bias=bias)
    model = GPT(cfg, rng=np.random.default_rng(1))
    idx = np.random.default_rng(2).integers(0, 12, (3, 8))
    ours = attention_probabilities(model, idx)
    theirs = _torch_probabilities(model, idx, fn, bias)
    assert len(ours) == 2 and ours[0].shape == (3, 2, 8, 8)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    got = attention_sink(model, idx)
    theirs = [t / t.sum(-1, keepdims=True) for t in theirs]  # each row as shares (the code's)
    shares = np.stack([p[..., :, 0].mean(-1) for p in theirs])  # (L, B, H)
    np.testing.assert_allclose(got["share"], shares.mean(axis=1), rtol=1e-5)
    assert got["rate"] == sink_rate(shares)
    assert got["mean_share"] == pytest.approx(float(shares.mean()), rel=1e-5)


def test_a_uniform_causal_attention_has_no_sink():
    """q = k = 0: every row uniform over the keys it sees, so token 1 gets (1/T) sum_t 1/t."""
    model = GPT(MODEL, rng=np.random.default_rng(1))
    for b in model.blocks:
        w = b.attn.branch.qkv.params["weight"]
        w[: 2 * 16] = 0.0  # the q and k rows
    got = attention_sink(model, np.zeros((2, 8), np.int64))
    expect = sum(1.0 / t for t in range(1, 9)) / 8
    np.testing.assert_allclose(got["share"], np.full((2, 2), expect), rtol=1e-6)
    assert got["rate"] == (1.0 if expect > SINK_EPS else 0.0)


def test_the_probe_records_at_every_evaluation_and_leaves_training_alone():
    cfg = TrainConfig(model=MODEL, steps=4, batch_size=3, warmup=1, eval_interval=2,
                      eval_batches=1)
    bare = train(cfg)
    probed = train(dataclasses.replace(cfg, probes=(*cfg.probes, "attention_sink")))
    assert [e["val_loss"] for e in bare.evals] == [e["val_loss"] for e in probed.evals]
    for e in probed.evals:
        s = e["attention_sink"]
        assert np.shape(s["share"]) == (2, 2) and 0.0 <= s["rate"] <= 1.0
        assert s["eps"] == SINK_EPS


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="p:"):
        first_token_share(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="p:"):
        first_token_share(np.zeros((1, 1, 3, 4)))
    with pytest.raises(TypeError, match="p:"):
        first_token_share(np.zeros((1, 1, 3, 3), np.int64))
    with pytest.raises(ValueError, match="eps"):
        sink_rate(np.array([0.5]), eps=1.0)
    with pytest.raises(ValueError, match="share"):
        sink_rate(np.array([]))
