"""A transformers model trains under emulate(fp8_hybrid); its gap to float32 is small."""

import numpy as np
import pytest
import torch

from normlab.torch import emulate

transformers = pytest.importorskip("transformers")


def _model(seed: int = 0):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).float()


def train(policy, steps: int = 6, seed: int = 0) -> list[float]:
    """Losses of ``steps`` AdamW steps on one fixed random batch, under ``policy`` (None:
    float32)."""
    model = _model(seed)
    ids = torch.from_numpy(np.random.default_rng(seed).integers(0, 128, (4, 32)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    em = emulate(model, policy) if policy is not None else None
    for _ in range(steps):
        opt.zero_grad()
        if em is None:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        else:
            with em:
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
            em.end_step()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_fp8_hybrid_trains_and_reports_its_gap():
    fp32 = train(None)
    fp8 = train("fp8_hybrid")
    print("fp32", fp32, "fp8_hybrid", fp8, "gap", fp8[-1] - fp32[-1])
    assert fp8[-1] < fp8[0] - 0.1  # it trains
    assert abs(fp8[-1] - fp32[-1]) < 0.05 * fp32[-1]  # and stays near float32
    assert fp8 != fp32  # the rounding took place


def test_emulate_rounds_the_transformers_model():
    model = _model()
    ids = torch.arange(16)[None]
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        with emulate(model, "amp_bf16"):
            low = model(input_ids=ids).logits
        again = model(input_ids=ids).logits
    assert torch.equal(plain, again)
    assert torch.equal(low, low.to(torch.bfloat16).float())  # the head's output: bf16 values
    assert not torch.equal(plain, low)


def _gpt2_grads(policy: str, fresh_buffers: bool) -> list[np.ndarray]:
    """Losses and gradients of three AdamW steps of a small GPT-2 (Conv1D weights read
    transposed, a tied head, an embedding) under one emulate; ``fresh_buffers``: its buffers
    dropped after every step instead of reused."""
    from normlab.torch.quantize import Workspace

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=96, n_layer=2, n_embd=64, n_head=4, n_positions=32,
                                  bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 96, (2, 16)))
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    em, out = emulate(model, policy), []
    for _ in range(3):
        opt.zero_grad()
        with em:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        em.end_step()
        out += [loss.detach().numpy()] + [p.grad.numpy().copy() for p in model.parameters()]
        opt.step()
        if fresh_buffers:
            em.rounder.work = Workspace()
    return out


@pytest.mark.parametrize("policy", ["amp_bf16", "fp8_hybrid"])
def test_reused_buffers_change_no_bit(policy):
    """The rounded weights held for the backward live in buffers reused from step to step:
    every loss and gradient is the same bits as with new buffers at every step."""
    a, b = _gpt2_grads(policy, False), _gpt2_grads(policy, True)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))
