"""The block's two ablations (GPTConfig.residual, GPTConfig.head_norm): finite differences in
float64, and parity with the independent PyTorch implementation (torch_gpt.py) with its residual
add dropped (post N(F(x)), pre F(N(x)), none F(x)) and its final norm placed by hand."""

import dataclasses

import numpy as np
import pytest
import torch_gpt
from test_gpt import check_gradients, make

from normlab.models import GPTConfig
from normlab.testing import errors

ABLATIONS = [(p, r, h) for p in ("post", "pre", "none") for r in (True, False)
             for h in (None, True, False)]


_ORIGINAL = torch_gpt._residual


def _torch_sublayer(placement: str, skip: bool):
    """torch_gpt's sublayer for ``placement`` whatever placement its config names (that one then
    only places the final norm), with the skip path dropped when ``skip`` is False."""
    def residual(cfg, x, p, prefix, branch, layer):
        if skip:
            return _ORIGINAL(dataclasses.replace(cfg, placement=placement), x, p, prefix, branch,
                             layer)

        def N(v):
            return torch_gpt._norm(cfg.norm, v, p, prefix + "norm.", cfg.norm_eps)

        def Fn(v):
            return branch(cfg, v, p, prefix + "branch.", layer)

        if placement == "post":
            return N(Fn(x))
        return Fn(N(x)) if placement == "pre" else Fn(x)
    return residual


@pytest.mark.parametrize("placement,residual,head_norm", ABLATIONS)
def test_ablations_match_finite_differences_and_torch(placement, residual, head_norm,
                                                      monkeypatch):
    model, idx, targets = make({"residual": residual, "head_norm": head_norm},
                               placement=placement, n_layers=3)
    check_gradients(model, idx, targets)
    cfg = model.config
    assert cfg.final_norm == (head_norm if head_norm is not None else placement != "post")
    assert ("norm_f.weight" in model.parameters()) == cfg.final_norm
    monkeypatch.setattr(torch_gpt, "_residual", _torch_sublayer(placement, residual))
    # torch_gpt places the final norm by its config's placement: "pre" has one, "post" none
    ref_cfg = GPTConfig(**{**cfg.to_dict(), "residual": True, "head_norm": None,
                           "placement": "pre" if cfg.final_norm else "post"})
    out = model.forward(idx, targets)
    model.zero_grad()
    model.backward()
    params = {k: v.copy() for k, v in model.parameters().items()}
    ref_loss, _logits, ref_grads = torch_gpt.loss_and_grads(ref_cfg, params, idx, targets)
    assert abs(out.loss - ref_loss) <= 1e-10 * abs(ref_loss)
    ours = model.gradients()
    assert ours.keys() == ref_grads.keys()
    for k, g in ref_grads.items():
        assert errors(ours[k], g)[1] <= 1e-9, k


def test_without_skips_the_output_does_not_carry_the_input():
    """No skip path: a sublayer whose branch outputs zero outputs zero (pre) where the skip
    would have passed x through unchanged."""
    model, _, _ = make({"residual": False}, placement="pre", n_layers=1)
    with_skip, _, _ = make({}, placement="pre", n_layers=1)
    for m in (model, with_skip):
        for name, p in m.parameters().items():
            if name.endswith("mlp.branch.proj.weight"):
                p[...] = 0.0
    x = np.random.default_rng(1).normal(size=(2, 4, 8))
    assert np.all(model.blocks[0].mlp.forward(x) == 0.0)
    assert np.array_equal(with_skip.blocks[0].mlp.forward(x), x)


@pytest.mark.parametrize("kw,message", [
    ({"residual": False, "placement": "deepnorm"}, r"residual=False \(no skip path\) applies"),
    ({"residual": False, "placement": "sandwich"}, "placement is 'sandwich'"),
    ({"residual": 0}, "config: residual"),
    ({"head_norm": "yes"}, "config: head_norm"),
    ({"head_norm": True, "norm": "none"}, "head_norm=True needs a norm"),
])
def test_ablations_refuse_what_they_do_not_define(kw, message):
    with pytest.raises((ValueError, TypeError), match=message):
        GPTConfig(**kw)
