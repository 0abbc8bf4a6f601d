"""rmsnorm-quality at its tiny size (seconds, in this process): the three norms share seeds and
recipe, pRMSNorm is what the model ran, RMSNorm ends near LayerNorm (the claimed direction, robust
at this size), the rule reads the paired relative excess, the timing is shown and not counted,
and a diverged run counts as its loss at init."""

import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab.experiments import rmsnorm_quality as X
from normlab.lab.stats import mean_interval

_CACHE = {}


def tiny(**overrides):
    key = json.dumps(overrides, sort_keys=True)
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment("rmsnorm-quality", size="tiny", seed=0,
                                       overrides=overrides, executor="serial").result
    return _CACHE[key]


def test_rmsnorm_ends_near_layernorm_and_the_rule_reads_the_paired_excess(tmp_path):
    r = tiny()
    d = r.data
    assert set(d["loss"]) == set(X.NORMS) and all(len(v) == 3 for v in d["loss"].values())
    assert d["k"] == 16 and d["C"] == 32  # ceil(0.5 * 32) features
    assert abs(np.mean(X.excess(d, "rmsnorm"))) < X.REACH_TOL  # RMSNorm reaches LayerNorm
    for n, check in zip(("rmsnorm", "prmsnorm"), r.checks):
        iv = mean_interval(X.excess(d, n))
        assert check.interval == pytest.approx([iv.lo, iv.hi]) and check.counted
    timing = r.checks[2]
    assert timing.passed is None and not timing.counted  # time is shown, never a verdict
    for n in X.NORMS:
        assert len(d["step_s"][n]) == 3 and all(t > 0 for t in d["step_s"][n])
    ratio = X.time_ratio(d, "rmsnorm")  # a wall-clock ratio: shown, never asserted, since
    assert np.isfinite(ratio) and ratio > 0  # the machine's load moves it (5.8 once, loaded)
    assert r.verdict == E.verdict_of(r.checks)
    files = X.plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_prmsnorm_is_what_the_model_ran():
    """The pRMSNorm arm's model estimates the RMS from k features: its output differs from
    RMSNorm's on the same weights and input, and the paper's estimator is k = 32 at quick."""
    from normlab.models import GPT

    cfg = X.Config()
    assert X.partial_width(cfg.base.model.d_model, cfg.partial) == 32  # the paper's 32 of 512
    outs = []
    for over in ({"model.norm": "rmsnorm"}, {"model.norm": "rmsnorm", "model.norm_partial": 0.5}):
        mc = cfg.base.with_overrides(over).model
        m = GPT(mc, rng=np.random.default_rng(0))
        outs.append(m.logits(np.arange(16)[None] % mc.vocab_size))
    assert np.abs(outs[0] - outs[1]).max() > 1e-4


def test_the_rule_is_non_inferiority_with_the_papers_margin():
    """A pRMSNorm 1% worse than LayerNorm, seed by seed, reaches it; 5% worse does not; the
    margin is the paper's largest deficit called comparable (2.1%)."""
    assert X.REACH_TOL == pytest.approx(0.5 / 23.6)
    base = [2.0, 2.1, 2.2, 2.05, 2.15]
    for worse, expected in ((1.01, True), (1.05, False)):
        data = {"norms": list(X.NORMS), "seeds": list(range(5)), "C": 64, "k": 32,
                "partial": 0.5, "loss": {"layernorm": base, "rmsnorm": base,
                                         "prmsnorm": [worse * (v + 0.001 * i)
                                                      for i, v in enumerate(base)]},
                "step_s": {n: [1.0, 1.0] for n in X.NORMS}}
        check = X.judge(data, X.Config())[1]
        assert check.form == "non-inferiority" and check.passed is expected


def test_a_diverged_run_counts_as_its_loss_at_init():
    r = tiny(**{"base.lr": 50.0})
    d = r.data
    assert sum(d["diverged"].values()) > 0
    assert all(np.isfinite(v) and v > 3.0 for vs in d["loss"].values() for v in vs)  # ~ ln V
    assert all(c.passed in (True, False, None) for c in r.checks)
    json.dumps(r.to_json(), allow_nan=False)


def test_the_speed_claim_is_listed_as_not_tested_and_the_seed_raises_are_amendments():
    """The card's "less time per step" is a claim of the paper the register lists as not tested
    (whole models on GPUs; here the norms are a few percent of a CPU step), with the reason: no
    row of it, the time shown beside the loss. The full size's seed raises after verdicts (6 ->
    10 -> 24) are amendments, each with the committed rows before it."""
    speed = next(r for r in X.REGISTER if r.id == "rmsnorm-takes-less-time-per-step")
    assert speed.kind == E.CLAIM and speed.untested and not speed.tested_at("full")
    assert [(c.id, c.kind) for c in tiny().checks] == [
        ("rmsnorm-reaches-layernorm", E.CLAIM), ("prmsnorm-reaches-layernorm", E.CLAIM),
        ("step-time-beside-loss", E.SHOWN), ("prmsnorm-rms-estimate", E.SHOWN)]
    raised = [(a.date, a.results_before["full"]["measured"].split("(n=")[1][:2])
              for a in X.AMENDMENTS
              if a.id == "rmsnorm-reaches-layernorm" and a.date > "2026-12-04"]
    assert raised == [("2026-12-05", "6)"), ("2026-12-06", "10")]
