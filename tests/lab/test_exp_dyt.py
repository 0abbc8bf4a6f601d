"""dyt's LLaMA recipe (Zhu et al.'s other_tasks/LLaMA code) as normlab trains it: alpha0 per
position, no beta for the whole run, and a learned embedding scalar whose gradient is exact."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab.experiments import dyt


def _config(**over):
    cfg = E.configure(dyt, "tiny")
    return cfg.base.with_overrides({"model.norm": "dyt", "steps": 6, "eval_interval": 6,
                                    **over})


def test_alpha0_per_position_and_no_beta_through_training():
    t = dyt.LlamaDyTTrainer(_config(), alphas=(0.8, 0.2, 0.2), learn_scale=True)
    p = t.params
    L = len(t.model.blocks)
    assert all(float(p[f"blocks.{i}.attn.norm.alpha"]) == pytest.approx(0.8) for i in range(L))
    assert all(float(p[f"blocks.{i}.mlp.norm.alpha"]) == pytest.approx(0.2) for i in range(L))
    assert float(p["norm_f.alpha"]) == pytest.approx(0.2)
    scale0 = t.scale
    t.run()
    assert t.stopped is None
    assert t.frozen and all(np.all(p[k] == 0.0) for k in t.frozen)  # beta stays 0
    assert float(p["norm_f.alpha"]) != pytest.approx(0.2, abs=1e-7)  # alpha is learned
    assert t.scale != scale0 and t.model.config.embed_scale == t.scale  # the scalar is learned
    assert t.config.model.embed_scale == scale0  # the run's config is left as it was


def test_the_embedding_scalar_gradient_is_exact():
    """dL/ds = <E, dL/dE> / s against a central difference of the loss in s (float64)."""
    t = dyt.LlamaDyTTrainer(_config(**{"model.dtype": "float64"}), alphas=(0.8, 0.2, 0.2),
                            learn_scale=True)
    m = t.model
    x, y = t.next_batch()
    m.forward(x, y)
    t._zero_grads()
    m.backward(1.0)
    g = float(np.vdot(t.params["wte.weight"], t.grads["wte.weight"])) / t.scale

    def loss(s):
        object.__setattr__(m.config, "embed_scale", s)
        v = m.forward(x, y).loss
        m.release()
        return v

    s, h = t.scale, 1e-5
    assert g == pytest.approx((loss(s + h) - loss(s - h)) / (2 * h), rel=1e-5)


def test_parity_is_non_inferiority_with_the_sourced_margin():
    """A DyT 0.01 nats above LayerNorm on every seed reaches it; 0.1 nats above does not."""
    base = [2.0, 2.1, 2.05]
    for gap, expected in ((0.01, True), (0.1, False)):
        data = {"losses": {"layernorm": base, "rmsnorm": base,
                           "dyt": [v + gap + 0.002 * i for i, v in enumerate(base)]}}
        row = dyt._parity(data, data["losses"]["dyt"], "LN", "c", "p", "s")
        assert row.form == "non-inferiority" and row.passed is expected
        assert row.threshold == [dyt.PARITY_TOL] and "0.03" in row.margin_source
