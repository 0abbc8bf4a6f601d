"""The deepnet-update experiment at its tiny size (in this process): DeepNorm's first updates are
smaller than Post-LN's, the probe covers exactly the first steps, and a divergence path (a
diverged run is its loss at init, a blow-up before the first probe an infinite spike; every
check still evaluates)."""

import json

import numpy as np

from normlab._files import jsonable
from normlab.lab import framework as E
from normlab.lab.experiments import deepnet_update as dn

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("deepnet-update", size="tiny", seed=0,
                                       executor="serial").result
    return _CACHE["r"]


def test_deepnorms_early_update_is_below_post_lns():
    d = tiny().data
    peak = {p: np.asarray(d["peak"][p]["model_update"]) for p in dn.PLACEMENTS}
    assert np.all(peak["deepnorm"] < peak["post"])  # seed by seed
    first = {p: np.asarray(d["first"][p]) for p in ("post", "deepnorm")}
    assert np.all(first["post"] > dn.SPIKE * first["deepnorm"])  # the effect's size, per seed
    for p in dn.PLACEMENTS:
        cv = d["curves"][p]
        probed = [v for v in cv["update"] if v is not None]
        assert len(probed) == d["probe"] and all(v > 0 for v in probed)


def test_result_shape_and_checks():
    r = tiny()
    assert r.verdict == E.verdict_of(r.checks)
    assert sum(c.counted for c in r.checks) == 2
    premise = next(c for c in r.checks if c.premise)  # Post-LN stalls at six tiny blocks
    assert premise.passed is True and r.verdict != E.NOT_TESTED
    json.dumps(r.data, allow_nan=False)


def test_premise_gate_where_post_ln_trains():
    """Two blocks: Post-LN trains (closes more than half the way), so the premise fails and
    the verdict is 'not tested at this size'."""
    config = E.configure(dn, "tiny", overrides={"base.model.n_layers": 2, "base.lr": 1e-2,
                                                "base.steps": 40})
    data = dn.measure(config, E.RunContext(executor="serial"))
    checks = dn.judge(json.loads(json.dumps(jsonable(data))), config)
    assert next(c for c in checks if c.premise).passed is not True
    assert E.verdict_of(checks) == E.NOT_TESTED


def test_a_diverged_run_is_recorded_and_judged():
    config = E.configure(dn, "tiny", overrides={"base.lr": 50.0, "base.divergence_factor": 1.2,
                                                "base.steps": 12})
    data = dn.measure(config, E.RunContext(executor="serial"))
    assert sum(data["diverged"].values()) > 0
    assert all(np.isfinite(v) for losses in data["loss"].values() for v in losses)
    checks = dn.judge(json.loads(json.dumps(jsonable(data))), config)
    assert checks[0].interval is not None and all(np.isfinite(checks[0].interval))


def test_the_registered_early_update_rule_is_counted_and_the_first_step_a_derivation():
    """The largest update over the probed steps (papers.md section 6's registered rule, shown
    after it failed in the first registration) is counted again; the first step's update,
    which DeepNorm's alpha and beta fix, is a derivation counted apart."""
    kinds = {c.id: c.kind for c in tiny().checks}
    assert kinds == {"post-ln-stalls-at-depth": E.PREMISE,
                     "post-ln-early-update-exceeds-deepnorm": E.CLAIM,
                     "post-ln-first-step-update-exceeds-deepnorm": E.DERIVATION,
                     "deepnorm-below-post-ln": E.CLAIM,
                     "pre-ln-and-admin-first-update": E.SHOWN, "logit-update-ratio": E.SHOWN}
    early = next(c for c in tiny().checks if c.id == "post-ln-early-update-exceeds-deepnorm")
    assert early.counted and early.threshold == [np.log(dn.SPIKE)] and early.side == "above"
    back = [a for a in dn.AMENDMENTS if a.id == early.id]
    assert [a.date for a in back] == ["2026-12-03", "2026-12-07", "2026-12-07"]
    assert back[0].results_before["quick"]["status"] == "FAIL"  # as first registered, M = 12
    assert {s: r["status"] for s, r in back[1].results_before.items()} == {"quick": "shown",
                                                                          "full": "shown"}


def test_both_sizes_probe_the_rules_twenty_steps():
    """The registered rule reads the largest update over t <= 20 (papers.md section 6): both
    sizes probe 20 steps, and the full size's change from 100 is an amendment that keeps its
    committed rows (the counted row and the logits' ratio) as results before."""
    for size in ("quick", "full"):
        assert E.configure(dn, size).base.update_probe == 20
    window = [a for a in dn.AMENDMENTS if a.changed.startswith("the full size probes the first")]
    assert sorted(a.id for a in window) == ["logit-update-ratio",
                                            "post-ln-early-update-exceeds-deepnorm"]
    assert all(a.remeasure and set(a.results_before) == {"full"} for a in window)
