"""pRMSNorm in the model (``GPTConfig.norm_partial``): every RMSNorm of the model estimates the
RMS from the first ceil(p * C) features, the whole model's gradients agree with finite
differences in float64, bad values are refused by name, and a checkpoint format without it
refuses it rather than dropping it."""

import dataclasses

import numpy as np
import pytest
from test_gpt import TINY, check_gradients, make

from normlab.models import GPT, GPTConfig, save_hf
from normlab.nn import RMSNorm


def _rmsnorms(model: GPT) -> list[RMSNorm]:
    return [m for _, m in model.named_modules() if isinstance(m, RMSNorm)]


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich"])
def test_every_rmsnorm_is_partial(placement):
    cfg = dataclasses.replace(TINY, norm="rmsnorm", placement=placement, norm_partial=0.25)
    norms = _rmsnorms(GPT(cfg, rng=np.random.default_rng(0)))
    per_block = 4 if placement == "sandwich" else 2
    assert len(norms) == per_block * cfg.n_layers + cfg.final_norm
    assert all(n.partial == 0.25 for n in norms)
    plain = _rmsnorms(
        GPT(dataclasses.replace(cfg, norm_partial=None), rng=np.random.default_rng(0))
    )
    assert all(n.partial is None for n in plain)


def test_partial_changes_the_output_and_p_one_does_not():
    base = dataclasses.replace(TINY, norm="rmsnorm")
    model, idx, _targets = make({"norm": "rmsnorm"})
    params = model.parameters()
    out = {}
    for p in (None, 1.0, 0.25):
        m = GPT(dataclasses.replace(base, norm_partial=p), rng=np.random.default_rng(1))
        m.load_parameters(params)
        out[p] = m.logits(idx)
    np.testing.assert_array_equal(out[1.0], out[None])  # k = C: the full RMS
    assert np.max(np.abs(out[0.25] - out[None])) > 1e-3  # k = 2 of 8 features


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich"])
def test_gradcheck_with_partial_rmsnorm(placement):
    model, idx, targets = make({"norm": "rmsnorm", "norm_partial": 0.25}, placement=placement)
    check_gradients(model, idx, targets, per_tensor=4)


@pytest.mark.parametrize("kw,message", [
    ({"norm": "layernorm", "norm_partial": 0.5}, "norm_partial is pRMSNorm's p"),
    ({"norm": "rmsnorm", "norm_partial": 0.0}, r"norm_partial must be a finite number in \(0, 1\]"),
    ({"norm": "rmsnorm", "norm_partial": 1.5}, r"norm_partial must be a finite number in \(0, 1\]"),
])
def test_config_refuses_bad_partial(kw, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TINY, **kw)


def test_config_round_trips_partial():
    cfg = dataclasses.replace(TINY, norm="rmsnorm", norm_partial=0.0625)
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg


def test_checkpoint_formats_refuse_partial(tmp_path):
    cfg = GPTConfig(vocab_size=16, seq_len=8, n_layers=1, d_model=8, n_heads=2, norm="rmsnorm",
                    positions="rope", activation="swiglu", norm_partial=0.5)
    with pytest.raises(ValueError, match="norm_partial"):
        save_hf(GPT(cfg, rng=np.random.default_rng(0)), tmp_path / "m")
