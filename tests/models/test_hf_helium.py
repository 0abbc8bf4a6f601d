"""Helium (transformers' ``models/helium``) is a Llama whose rotary embedding is interleaved: it
rotates the features 0::2 of each head with 1::2, where normlab's RoPE (Llama's) rotates the
first half with the second. normlab has no interleaved RoPE, so a Helium checkpoint is refused,
saying why; read as a renamed Llama it would load and compute wrong logits, shown here against
transformers on a tiny random-weight model, and the interleaving is all that differs (the same
weights with each head's q and k rows reordered agree with transformers)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from normlab.models import load_hf  # noqa: E402 - after the importorskip
from normlab.models.hf import config_from_hf, families  # noqa: E402 - after the importorskip
from normlab.testing import errors, format_eps  # noqa: E402 - after the importorskip

transformers.logging.set_verbosity_error()

H, K, D = 4, 2, 4  # Helium's o_proj maps hidden -> hidden: H D = hidden_size
TINY = dict(vocab_size=40, hidden_size=H * D, intermediate_size=24, num_hidden_layers=2,
            num_attention_heads=H, num_key_value_heads=K, head_dim=D, max_position_embeddings=32)
IDX = np.random.default_rng(1).integers(0, 40, size=(2, 8))


def _helium(path):
    """A tiny HeliumForCausalLM with random weights (gains near 1), saved to ``path``."""
    torch.manual_seed(0)
    model = transformers.HeliumForCausalLM(transformers.HeliumConfig(**TINY))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
    model.save_pretrained(path)
    with torch.no_grad():
        logits = model.eval()(torch.from_numpy(IDX)).logits.numpy()
    return logits


def _relabel_as_llama(path) -> None:
    hf = json.loads((path / "config.json").read_text())
    hf.update(model_type="llama", architectures=["LlamaForCausalLM"])
    (path / "config.json").write_text(json.dumps(hf))


def test_a_helium_checkpoint_is_refused_saying_why(tmp_path):
    _helium(tmp_path / "helium")
    with pytest.raises(ValueError, match=r"helium: model_type not supported: its rotary "
                                         r"embedding is interleaved"):
        load_hf(tmp_path / "helium")
    with pytest.raises(ValueError, match="interleaved"):
        config_from_hf(transformers.HeliumConfig().to_dict())
    assert "helium" not in families.FAMILIES


def test_read_as_a_llama_helium_computes_wrong_logits_by_the_rope_pairs_alone(tmp_path):
    """The reason is the right one: every config field of Helium is one a Llama record covers,
    its checkpoint relabelled llama loads, and its logits are wrong; reordering each head's q and
    k rows into the half-split pairs (0::2 first, then 1::2) makes them transformers'."""
    path = tmp_path / "helium"
    theirs = _helium(path)
    hf = transformers.HeliumConfig().to_dict()
    llama = families.RECORDS["llama"]
    assert set(hf) <= set(llama.mapped) | set(llama.ignored) | families.BOOKKEEPING
    _relabel_as_llama(path)
    model = load_hf(path, mmap_weights=False)
    bound = 256 * format_eps(np.float32)
    assert errors(model.logits(IDX), theirs)[1] > 100 * bound  # wrong, not rounding
    pairs = np.concatenate([np.arange(0, D, 2), np.arange(1, D, 2)])  # interleaved -> halves
    for i in range(TINY["num_hidden_layers"]):
        w = model.parameters()[f"blocks.{i}.attn.branch.qkv.weight"]  # (H D + 2 K D, C)
        heads = np.arange(H + K)[:, None] * D  # the q heads, then the k heads
        rows = (heads + pairs).reshape(-1)
        w[: (H + K) * D] = w[rows]
    assert errors(model.logits(IDX), theirs)[1] <= bound
