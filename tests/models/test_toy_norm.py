"""A new norm from one registry entry: a scaled RMSNorm written here (forward, backward, PyTorch
twin), registered once, then used by name as the blocks' norm, the final norm and QK-norm of a
GPT whose gradients are checked by finite differences in float64. Nothing else in normlab is
edited for it: the entry is all the config, the blocks, attention and ``nn`` read."""

from typing import NamedTuple

import numpy as np
import pytest
from test_gpt import check_gradients, randomize

from normlab import nn as nnl
from normlab.functional import norms
from normlab.models import GPT, GPTConfig
from normlab.testing import gradcheck
from normlab.testing.parity import torch_parity


class ScaledRMSCache(NamedTuple):
    x: np.ndarray  # (..., C) the input, compute dtype
    weight: np.ndarray  # (C,) compute dtype
    rstd: np.ndarray  # (..., 1)
    scale: float


def scaled_rms_forward(x, weight, *, eps=1e-6, scale=2.0):
    """y = scale * x / sqrt(mean(x^2) + eps) * weight, over the last axis."""
    ct = np.float64 if x.dtype == np.float64 else np.float32
    xc, w = x.astype(ct), weight.astype(ct)
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + ct(eps))
    return (scale * xc * rstd * w).astype(x.dtype), ScaledRMSCache(xc, w, rstd, scale)


def scaled_rms_backward(dout, cache):
    x, w, rstd, scale = cache
    dy = dout.astype(x.dtype)
    xhat = x * rstd
    g = scale * dy * w
    dx = rstd * (g - xhat * np.mean(g * xhat, axis=-1, keepdims=True))
    dw = np.sum((scale * dy * xhat).reshape(-1, x.shape[-1]), axis=0)
    return dx.astype(dout.dtype), dw


def scaled_rms_twin(x, weight, *, eps=1e-6, scale=2.0):
    import torch.nn.functional as F

    return scale * F.rms_norm(x, (x.shape[-1],), weight, eps)


ENTRY = norms.NormEntry(
    "scaledrms", scaled_rms_forward, scaled_rms_backward, params=(norms.Param("weight"),),
    options={"eps": 1e-6, "scale": 2.0}, twin=scaled_rms_twin, config={"eps": "norm_eps"},
    qk=True, title="a scaled RMSNorm (a test's toy)")


@pytest.fixture(scope="module", autouse=True)
def toy():
    norms.register(ENTRY)
    yield ENTRY
    norms.unregister(ENTRY.name)


def test_the_toy_is_in_every_vocabulary_and_refused_where_it_is_not():
    assert "scaledrms" in norms.block_names() and "scaledrms" in norms.qk_names()
    assert "scaledrms" not in norms.fused_names()  # no fused name: the add + norm refuses it
    with pytest.raises(ValueError, match="norm_offset applies to the RMSNorm gain"):
        GPTConfig(norm="scaledrms", norm_offset=1.0)


def test_the_toy_entry_passes_gradcheck_and_matches_its_twin(rng):
    pytest.importorskip("torch")
    d = {"x": rng.normal(0.3, 1.5, size=(3, 4, 8)), "weight": rng.normal(1.0, 0.3, size=8)}
    assert gradcheck(ENTRY.forward, ENTRY.backward, d, rng=rng).passed
    report = torch_parity(ENTRY.forward, ENTRY.backward, ENTRY.twin_fn(), d, np.float32, rng)
    assert report.ok, report.failures()


def test_a_gpt_with_the_toy_as_block_norm_final_norm_and_qk_norm(rng):
    cfg = GPTConfig(vocab_size=7, seq_len=4, n_layers=2, d_model=8, n_heads=2, dtype="float64",
                    norm="scaledrms", qk_norm="scaledrms", placement="sandwich", norm_eps=1e-5)
    model = GPT(cfg, rng=np.random.default_rng(0))
    used = [m for m in model.modules() if isinstance(m, nnl.Norm)]
    assert len(used) == 2 * 2 * 2 + 1 and all(m.entry is ENTRY for m in used)  # + norm_f
    assert all(m.options == {"eps": 1e-5, "scale": 2.0} for m in used)
    assert {"blocks.0.attn.norm.weight", "blocks.0.attn.norm_out.weight", "norm_f.weight",
            "blocks.1.attn.branch.q_norm", "blocks.1.attn.branch.k_norm"} <= set(
        model.parameters())
    x = rng.normal(size=(2, 3, 8))
    ref = nnl.RMSNorm(8, eps=1e-5, dtype=np.float64)
    np.testing.assert_allclose(used[0](x), 2.0 * ref(x), rtol=1e-14)  # the toy runs, scale 2
    randomize(model, rng)
    idx = rng.integers(0, cfg.vocab_size, size=(2, cfg.seq_len))
    targets = rng.integers(0, cfg.vocab_size, size=(2, cfg.seq_len))
    check_gradients(model, idx, targets, per_tensor=4)
