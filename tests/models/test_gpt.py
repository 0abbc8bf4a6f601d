"""The whole model: finite differences in float64 over every placement x norm with QK-norm and
soft-caps off and on, and parity with an independent PyTorch implementation (torch_gpt.py)."""

import dataclasses

import numpy as np
import pytest
import torch_gpt

from normlab.functional import IGNORE_INDEX
from normlab.models import GPT, NORMS, PLACEMENTS, GPTConfig
from normlab.testing import errors, format_eps

TINY = GPTConfig(vocab_size=7, seq_len=4, n_layers=2, d_model=8, n_heads=2, dtype="float64")
TOGGLES = {
    "plain": {},
    "qkrms+caps": {"qk_norm": "rmsnorm", "attn_softcap": 2.0, "final_softcap": 3.0},
    "qkln+caps": {"qk_norm": "layernorm", "attn_softcap": 2.0, "final_softcap": 3.0},
}
# nGPT (placement 'ngpt') holds no norm, no QK-norm, no soft-caps and takes RoPE: its own rows
NGPT = {"placement": "ngpt", "norm": "none", "positions": "rope"}
GRID = [(p, n, t) for p in PLACEMENTS if p != "ngpt" for n in NORMS for t in TOGGLES]


def placed(placement: str) -> dict:
    """The fields of ``placement``: nGPT's with it, else the placement alone."""
    return NGPT if placement == "ngpt" else {"placement": placement}

EXTRAS = {
    "rope": {"positions": "rope"},
    "tied": {"tie_embeddings": True},
    "swiglu": {"activation": "swiglu", "d_ff": 12},
    "relu+bias": {"activation": "relu", "bias": True},
    "gelu-exact": {"activation": "gelu"},
    "zloss+smoothing": {"z_loss": 0.3, "label_smoothing": 0.2},
    "bidirectional": {"causal": False, "attn_softcap": 2.0},
    "gqa+head_dim+scale": {"n_kv_heads": 1, "d_head": 6, "attn_scale": 0.3, "positions": "rope"},
    "window-alternate": {"sliding_window": 2, "window_layers": (0,), "n_kv_heads": 1},
    "qkv-bias-only": {"qkv_bias": True, "activation": "swiglu", "d_ff": 12},
    "out+mlp-bias": {"bias": False, "out_bias": True, "mlp_bias": True},
    "qk-norm-all": {"qk_norm": "rmsnorm", "qk_norm_scope": "all", "n_kv_heads": 1,
                    "positions": "rope"},
    "gemma2": {"placement": "sandwich", "norm": "rmsnorm", "norm_offset": 1.0,
               "activation": "geglu", "d_ff": 12, "embed_scale": 8 ** 0.5, "tie_embeddings": True,
               "attn_scale": 0.4, "d_head": 6, "n_kv_heads": 1, "sliding_window": 2,
               "window_layers": (0,), "attn_softcap": 2.0, "final_softcap": 3.0,
               "positions": "rope"},
    "olmo2": {"placement": "branch", "norm": "rmsnorm", "qk_norm": "rmsnorm",
              "qk_norm_scope": "all", "n_kv_heads": 1, "activation": "swiglu", "d_ff": 12,
              "positions": "rope"},
    "rope-llama3": {"positions": "rope", "rope_scaling": "llama3", "rope_factor": 8.0,
                    "rope_original_max": 16, "rope_base": 500.0, "seq_len": 4},
    "rope-linear": {"positions": "rope", "rope_scaling": "linear", "rope_factor": 2.0},
    "mixln-half": {"placement": "mixln", "mixln_fraction": 0.5},  # block 0 post, block 1 pre
    "gated": {"attn_gate": True},
    "sigmoid-attn": {"attn_fn": "sigmoid"},
    "sigmoid-attn+all": {"attn_fn": "sigmoid", "attn_sigmoid_bias": -0.5, "qk_norm": "rmsnorm",
                         "positions": "rope", "attn_softcap": 2.0, "n_kv_heads": 1,
                         "sliding_window": 2, "attn_gate": True},
    "gated+bias+qk-norm+gqa": {"attn_gate": True, "bias": True, "qk_norm": "rmsnorm",
                               "n_kv_heads": 1, "positions": "rope", "init": "xavier"},
    "mixln-all-post": {"placement": "mixln", "mixln_fraction": 1.0, "norm": "rmsnorm"},
    "ngpt": NGPT,
    "ngpt+swiglu+tied+gated+window": {**NGPT, "activation": "swiglu", "d_ff": 12,
                                      "tie_embeddings": True, "attn_gate": True,
                                      "sliding_window": 2, "d_head": 6},
    "ngpt+sigmoid+causal-off+zloss": {**NGPT, "attn_fn": "sigmoid", "causal": False,
                                      "z_loss": 0.2, "label_smoothing": 0.1},
    "all": {"positions": "rope", "tie_embeddings": True, "activation": "swiglu", "bias": True,
            "qk_norm": "rmsnorm", "attn_softcap": 2.0, "final_softcap": 3.0, "z_loss": 0.1,
            "placement": "sandwich", "norm": "rmsnorm"},
}


def randomize(model: GPT, rng) -> None:
    """Random parameters everywhere (ones and zeros hide wrong backwards): gains near 1, the
    rest normal with a scale that keeps activations O(1)."""
    for name, p in model.parameters().items():
        last = name.rsplit(".", 1)[-1]
        if (last == "weight" and p.ndim == 1) or last in ("q_norm", "k_norm"):
            p[...] = rng.normal(1.0, 0.3, size=p.shape)
        elif p.ndim == 2:
            p[...] = rng.normal(0.0, 1.0 / np.sqrt(p.shape[1]), size=p.shape)
        else:  # biases, DyT's alpha, ReZero's resweight
            p[...] = rng.normal(0.5 if last == "alpha" else 0.0, 0.5, size=p.shape)


def make(overrides: dict, seed: int = 0, **kw):
    cfg = dataclasses.replace(TINY, **{**overrides, **kw})
    rng = np.random.default_rng(seed)
    model = GPT(cfg, rng=rng)
    randomize(model, rng)
    idx = rng.integers(0, cfg.vocab_size, size=(2, cfg.seq_len))
    targets = rng.integers(0, cfg.vocab_size, size=(2, cfg.seq_len))
    targets[1, 0] = IGNORE_INDEX  # a row without loss
    return model, idx, targets


def check_gradients(model: GPT, idx, targets, *, per_tensor: int = 3, seed: int = 0,
                    h: float = 1e-6, rtol: float = 1e-6) -> None:
    """Central differences of the loss on ``per_tensor`` random elements of every parameter."""
    rng = np.random.default_rng(seed)
    state = model.dropout_rng.bit_generator.state

    def loss() -> float:
        model.dropout_rng.bit_generator.state = state  # the same dropout masks every call
        return model.forward(idx, targets).loss

    loss()
    model.zero_grad()
    model.backward()
    grads = {k: g.copy() for k, g in model.gradients().items()}
    params = model.parameters()
    assert grads.keys() == params.keys()
    failures = []
    for name, p in params.items():
        flat = p.reshape(-1)
        picks = rng.choice(flat.size, size=min(per_tensor, flat.size), replace=False)
        for i in picks:
            old = flat[i]
            flat[i] = old + h
            plus = loss()
            flat[i] = old - h
            minus = loss()
            flat[i] = old
            numeric = (plus - minus) / (2 * h)
            analytic = grads[name].reshape(-1)[i]
            scale = max(float(np.max(np.abs(grads[name]))), 1e-3)
            if abs(analytic - numeric) > rtol * scale + 1e-9:
                failures.append(f"{name}[{i}]: analytic {analytic:.10g}, numeric {numeric:.10g}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("placement,norm,toggle", GRID)
def test_gradcheck_grid(placement, norm, toggle):
    model, idx, targets = make(TOGGLES[toggle], placement=placement, norm=norm)
    check_gradients(model, idx, targets)


@pytest.mark.parametrize("extra", EXTRAS)
def test_gradcheck_options(extra):
    model, idx, targets = make(EXTRAS[extra])
    check_gradients(model, idx, targets, per_tensor=4)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_gradcheck_with_dropout(placement):
    model, idx, targets = make({"dropout": 0.3, "attn_dropout": 0.2, **placed(placement)})
    model.train()
    check_gradients(model, idx, targets)
    before = model.forward(idx, targets).loss
    assert model.forward(idx, targets).loss != before  # fresh masks each step
    model.eval()
    assert model.forward(idx, targets).loss == model.forward(idx, targets).loss


def _compare(model: GPT, idx, targets, dtype, *, rtol64=1e-10, ulps=64.0):
    """normlab vs torch in ``dtype`` on the same weights; float32 within a tolerance derived from
    float32's epsilon, or twice torch's own float32 error (both measured against torch float64)."""
    cfg = model.config
    params = {k: v.astype(dtype) for k, v in model.parameters().items()}
    model_d = GPT(
        dataclasses.replace(cfg, dtype=np.dtype(dtype).name), rng=np.random.default_rng(0)
    )
    model_d.load_parameters(params)
    model_d.eval()
    out = model_d.forward(idx, targets)
    model_d.zero_grad()
    model_d.backward()
    ours = {"logits": model_d._trunk(idx), **model_d.gradients()}
    exact64 = {k: v.astype(np.float64) for k, v in params.items()}
    ref_loss, ref_logits, ref_grads = torch_gpt.loss_and_grads(cfg, exact64, idx, targets)
    ref = {"logits": ref_logits, **ref_grads}
    assert ours.keys() == ref.keys()
    if np.dtype(dtype) == np.float64:
        assert abs(out.loss - ref_loss) <= rtol64 * abs(ref_loss)
        for k in ref:
            rel = errors(ours[k], ref[k])[1]
            assert rel <= rtol64, f"{k}: relative error {rel:.3g} vs torch float64"
        return
    _t_loss, t_logits, t_grads = torch_gpt.loss_and_grads(cfg, params, idx, targets)
    theirs = {"logits": t_logits, **t_grads}
    eps = format_eps(dtype)
    assert abs(out.loss - ref_loss) <= ulps * eps * abs(ref_loss)
    for k in ref:
        mine = errors(ours[k].astype(np.float64), ref[k])[1]
        base = errors(theirs[k].astype(np.float64), ref[k])[1]
        bound = max(ulps * eps, 2.0 * base)
        assert mine <= bound, f"{k}: float32 error {mine:.3g} > {bound:.3g} (torch's {base:.3g})"


@pytest.mark.parametrize("placement,norm,toggle", GRID)
def test_matches_torch_float64(placement, norm, toggle):
    model, idx, targets = make(TOGGLES[toggle], placement=placement, norm=norm)
    _compare(model, idx, targets, np.float64)


@pytest.mark.parametrize("extra", EXTRAS)
def test_matches_torch_float64_options(extra):
    model, idx, targets = make(EXTRAS[extra])
    _compare(model, idx, targets, np.float64)


@pytest.mark.parametrize("placement,toggle", [
    (p, t) for p in PLACEMENTS for t in ("plain", "qkrms+caps")
    if p != "ngpt" or t == "plain"])  # nGPT's config refuses a QK-norm and soft-caps
def test_matches_torch_float32(placement, toggle):
    # a wider model so that float32 rounding, not the tiny size, sets the error
    fields = NGPT if placement == "ngpt" else {"placement": placement, "norm": "rmsnorm"}
    model, idx, targets = make({**TOGGLES[toggle], **fields}, n_layers=3, d_model=32,
                               n_heads=4, seq_len=16, vocab_size=29)
    _compare(model, idx, targets, np.float32)
