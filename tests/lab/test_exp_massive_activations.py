"""massive-activations at its tiny size (seconds, in this process): at the high learning rate
Pre-LN's last block carries far larger activations than Peri-LN's and they grew over training
(the claimed direction, robust at this size); the headroom rows come from the trainer's
per-block records; a diverged run reads as at initialization and the checks still evaluate."""

import json
import math

import numpy as np

from normlab.lab import framework as E
from normlab.lab.experiments import massive_activations as X
from normlab.precision.headroom import HEADROOM_FORMATS as FORMATS

_CACHE = {}


def tiny(**overrides):
    key = json.dumps(overrides, sort_keys=True)
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment("massive-activations", size="tiny", seed=0,
                                       overrides=overrides, executor="serial").result
    return _CACHE[key]


def test_pre_ln_activations_are_larger_and_grew(tmp_path):
    r = tiny()
    d = r.data
    top = d["lrs"][-1]
    pre = X.values(d, "pre", top, "log_max")
    peri = X.values(d, "sandwich", top, "log_max")
    assert all(a > b + 0.5 for a, b in zip(pre, peri))  # > 3x larger, every seed
    assert np.mean(X.values(d, "pre", top, "log_growth")) > math.log10(10)  # grew > 10x
    assert r.checks[0].premise and r.checks[0].passed  # the blow-up occurs: Pre-LN's grows
    by = {c.id: c for c in r.checks}
    assert by["pre-ln-activations-much-larger-than-peri-ln"].passed  # larger than Peri-LN's
    assert by["pre-ln-max-grows-more-over-training"].estimate > 0  # and grew more (shown)
    # the depth ratio reads against the embedding output x_0, which every run records
    assert all(run["x0_rms"] > 0 for arm in d["arms"].values() for run in arm["runs"])
    assert np.mean(X.values(d, "pre", top, "depth_ratio")) > np.mean(
        X.values(d, "sandwich", top, "depth_ratio"))
    for arm in d["arms"].values():
        for run in arm["runs"]:
            assert len(run["rms"]) == len(run["max"]) == d["n_layers"]
            assert all(m >= s > 0 for m, s in zip(run["max"], run["rms"]))
            assert set(run["formats"]) == set(FORMATS)
            assert run["formats"]["bfloat16"]["overflow"] == 0.0  # nothing near 3.4e38
    assert r.verdict == E.verdict_of(r.checks)
    files = X.plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_a_diverged_run_reads_as_at_init_and_the_checks_evaluate():
    r = tiny(lrs=(1e-2, 50.0))
    d = r.data
    diverged = [run for arm in d["arms"].values() for run in arm["runs"] if run["diverged"]]
    assert diverged
    for run in diverged:
        assert run["growth"] == 1.0 and run["formats"][X.FP8]["overflow"] == 0.0
        assert all(np.isfinite(run["max"]))
    assert all(c.passed in (True, False, None) for c in r.checks)
    json.dumps(r.to_json(), allow_nan=False)


def test_the_premise_gates_the_verdict_both_ways():
    """Pre-LN's stream growing over training is the premise: with it the claims are judged;
    when Pre-LN's max |x| did not grow (growth <= 1 in every seed), nothing is judged."""
    import copy

    r = tiny()
    assert r.verdict != E.NOT_TESTED
    d = copy.deepcopy(r.data)
    for run in d["arms"][X._key("pre", d["lrs"][-1])]["runs"]:
        run["growth"] = 0.9
    checks = X.judge(d, X.Config())
    assert checks[0].premise and checks[0].passed is False
    assert E.verdict_of(checks) == E.NOT_TESTED


def test_runs_trained_as_one_ensemble_read_as_each_trained_alone():
    """A diverging member included: each member's reading equals its single run's."""
    from normlab.train import Trainer

    cfg = E.configure(X, "tiny")
    L = cfg.base.model.n_layers
    configs = [cfg.base.with_overrides({"model.placement": "pre", "lr": lr, "seed": s})
               for lr, s in ((1e-2, 0), (30.0, 1), (1e-1, 2))]
    got = X._train(configs, L, lambda step: None)
    for c, g in zip(configs, got):
        t = Trainer(c)
        x0 = X._embed_stats(t, t.val[0][0])
        t.run()
        want = X._read(t, L, x0)
        assert json.dumps(g) == json.dumps(want)
    assert got[1]["diverged"] and not got[0]["diverged"]


def test_one_effect_counted_once():
    """The register (lab-audit.md, row 20): max|x| and the layer-by-layer growth (block L
    against block 1, the claim as first registered) are counted; the growth over training and
    the ratio against the embedding restate max|x| and are shown; fp8's overflow follows from
    max|x| beyond 448 (a derivation)."""
    kinds = {c.id: c.kind for c in tiny().checks if c.id in {r.id for r in X.REGISTER[:6]}}
    assert kinds == {"pre-ln-max-grows-over-training": E.PREMISE,
                     "pre-ln-activations-much-larger-than-peri-ln": E.CLAIM,
                     "pre-ln-rms-grows-more-layer-by-layer": E.CLAIM,
                     "rms-ratio-against-the-embedding": E.SHOWN,
                     "pre-ln-max-grows-more-over-training": E.SHOWN,
                     "more-of-pre-ln-overflows-fp8": E.DERIVATION}
    d = tiny().data
    lr = d["lrs"][-1]
    layer = next(c for c in tiny().checks if c.id == "pre-ln-rms-grows-more-layer-by-layer")
    pre = X.values(d, "pre", lr, "layer_ratio")
    want = [math.log10(run["rms"][-1] / run["rms"][0])
            for run in d["arms"][X._key("pre", lr)]["runs"]]
    assert pre == want and "RMS(block 1)" in layer.measured
