"""dyt's LLaMA recipe (Zhu et al.'s other_tasks/LLaMA code) as normlab trains it: alpha0 per
position, no beta for the whole run, and a learned embedding scalar whose gradient is exact."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register, stats
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


def test_the_register_counts_the_llm_recipe_and_lists_the_non_llm_default_as_not_tested():
    """Three counted claims (parity with RMSNorm and LayerNorm under the LLM recipe, the
    S-curve); the first registration's best-alpha0 row is retired (it chose its alpha0 on the
    seeds it judged and read the alpha0 = 0.5 row's interval); the non-LLM default's claim is
    listed as not tested, with the reason, its number on this model shown."""
    recs = {r.id: r for r in dyt.REGISTER}
    counted = [r.id for r in dyt.REGISTER if r.counted and not r.untested]
    assert counted == ["dyt-matches-rmsnorm", "dyt-matches-layernorm", "layernorm-is-s-shaped",
                       "dyt-tuned-alpha-matches-layernorm"]
    assert register.retired(dyt) == {"dyt-tuned-alpha-matches-layernorm"}
    assert recs["dyt-default-alpha-matches-layernorm"].untested
    assert not recs["dyt-default-alpha-matches-layernorm"].tested_at("quick")
    assert recs["dyt-default-alpha-against-layernorm"].kind == E.SHOWN
    first = {a.id: a for a in dyt.AMENDMENTS if a.date == "2026-12-03"}
    assert first["dyt-matches-layernorm"].before["form"] == "band"
    assert first["dyt-matches-layernorm"].results_before["quick"]["status"] == "FAIL"
    assert first["layernorm-is-s-shaped"].results_before["quick"]["status"] == "pass"


def test_alpha0_is_tuned_at_the_quick_width_and_the_rows_judged_only_there():
    """The paper's procedure for LLMs: alpha0 per position from a grid at the model's width and
    learning rate (a pilot at seeds no verdict run uses). The quick size runs the tuned value;
    a parity row at a width with no grid's choice, or with another alpha0, is not judged."""
    quick, full = E.configure(dyt, "quick"), E.configure(dyt, "full")
    key = (quick.base.model.d_model, quick.base.lr)
    assert tuple(quick.llama_alpha) == dyt.TUNED_ALPHA[key] != dyt.LLAMA_ALPHA
    assert (full.base.model.d_model, full.base.lr) not in dyt.TUNED_ALPHA
    row = E.Check.non_inferiority(claim="c", published="p", side="below", margin=0.03,
                                  interval=stats.Interval(0.1, 0.08, 0.12, 3, "m"),
                                  id="dyt-matches-layernorm")
    assert dyt._tuned(row, quick) is row
    for cfg in (full, dataclasses.replace(quick, llama_alpha=dyt.LLAMA_ALPHA)):
        untuned = dyt._tuned(row, cfg)
        assert untuned.passed is None and not untuned.counted and untuned.kind == E.CLAIM


def test_the_s_curve_reads_the_tail():
    """A per-token LayerNorm over tokens of different scales squashes the large inputs: the
    tail's R^2 gain is large where the gain over all points is small; a straight line has
    none."""
    rng = np.random.default_rng(0)
    h = rng.standard_normal((500, 32)) * np.exp(rng.normal(0, 0.5, (500, 1)))  # (tokens, C)
    y = (h - h.mean(1, keepdims=True)) / h.std(1, keepdims=True)
    s_curve = dyt.fit_tanh_vs_linear(h, y, dyt.TAIL)
    assert s_curve["tail_gain"] > 5 * s_curve["gain"] > 0
    line = dyt.fit_tanh_vs_linear(h, 2 * h, dyt.TAIL)
    assert abs(line["tail_gain"]) < 1e-9 and line["tail_edge"] > 2


def test_the_s_curve_has_its_own_seed_count_from_the_pilot():
    quick = E.configure(dyt, "quick")
    pilot = dyt.PILOTS[quick.base.steps]["layernorm-is-s-shaped"]
    from normlab.lab.experiments import _pilots as P

    assert P.needed(pilot, dyt.S_CURVE_GAIN) == quick.s_curve_seeds > quick.seeds
    assert next(r for r in dyt.REGISTER if r.id == "layernorm-is-s-shaped").seeds == (
        "s_curve_seeds")
