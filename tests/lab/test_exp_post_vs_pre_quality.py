"""post-vs-pre-quality at its tiny size (seconds, in this process): the paired gap is the one the
rule reads, "no difference" is a stated outcome, and a diverged run counts as its loss at init.

At the tiny size (two blocks, 30 steps) no direction of the gap is robust, so none is asserted:
the claim is about converged models, and the quick size reports what a small model resolves."""

import copy
import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import post_vs_pre_quality as X
from normlab.lab.stats import paired_interval

_CACHE = {}


def tiny(**overrides):
    key = json.dumps(overrides, sort_keys=True)
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment("post-vs-pre-quality", size="tiny", seed=0,
                                       overrides=overrides, executor="serial").result
    return _CACHE[key]


def test_result_pairs_the_seeds_and_reads_the_gap(tmp_path):
    r = tiny()
    d = r.data
    assert r.verdict == E.verdict_of(r.checks)
    for lr in d["lrs"]:
        post, pre = d["loss"]["post"][str(lr)], d["loss"]["pre"][str(lr)]
        assert len(post) == len(pre) == 2  # two seeds, shared by the arms
        assert all(x < 0.95 * d["loss_at_init"][p] for p, xs in (("post", post), ("pre", pre))
                   for x in xs)  # both placements learn
        assert X.gaps(d, lr) == pytest.approx([a - b for a, b in zip(pre, post)])
    # the claim: each arm at its own best lr (the lowest mean final loss), paired by seed
    lr_post, lr_pre = X.best_lr(d, "post"), X.best_lr(d, "pre")
    assert all(np.mean(d["loss"]["post"][str(lr_post)]) <= np.mean(d["loss"]["post"][str(lr)])
               for lr in d["lrs"])
    iv = paired_interval(d["loss"]["pre"][str(lr_pre)], d["loss"]["post"][str(lr_post)])
    counted = [c for c in r.checks if c.counted]
    assert len(counted) == 1 and counted[0].interval == [iv.lo, iv.hi]
    assert counted[0].form == "superiority"
    premise = r.checks[0]
    assert premise.kind == E.PREMISE and premise.passed  # Post-LN with warmup trains here
    assert all(0.5 < f < 1.5 for f in X.trained_fraction(d, lr_post, lr_pre))
    files = X.plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_premise_gates_the_verdict_both_ways():
    """The quality claim needs a Post-LN that trains: the measured data passes the premise and is
    judged; the same data with every Post-LN run left at its loss at init is 'not tested'."""
    r = tiny()
    assert next(c for c in r.checks if c.premise).passed is True
    assert r.verdict != E.NOT_TESTED
    stalled = copy.deepcopy(r.data)
    init = stalled["loss_at_init"]["post"]
    stalled["loss"]["post"] = {lr: [init] * len(v) for lr, v in stalled["loss"]["post"].items()}
    checks = X.judge(stalled, E.configure(X, "tiny"))
    assert next(c for c in checks if c.premise).passed is False
    assert E.verdict_of(checks) == E.NOT_TESTED


def test_no_difference_is_a_statable_outcome():
    iv = paired_interval([2.0, 2.1, 1.9], [2.01, 2.08, 1.92])
    assert X._word(iv) == "no difference resolved"
    assert X._word(paired_interval([2.2, 2.3, 2.25], [2.0, 2.1, 2.05])) == "Post-LN lower"
    assert X._word(paired_interval([2.0, 2.1, 2.05], [2.2, 2.3, 2.25])) == "Pre-LN lower"


def test_a_diverged_run_counts_as_its_loss_at_init():
    r = tiny(lrs=(1e-2, 50.0))
    d = r.data
    assert sum(d["diverged"].values()) > 0
    for p in X.PLACEMENTS:
        assert all(np.isfinite(v) for lr in d["lrs"] for v in d["loss"][p][str(lr)])
        top = d["loss"][p][str(50.0)]
        assert all(v > 0.9 * d["loss_at_init"][p] for v in top)  # read as (about) ln V
    assert all(c.passed in (True, False, None) for c in r.checks)
    json.dumps(r.to_json(), allow_nan=False)


def test_one_counted_row_per_claim_and_the_first_registration_rebuilt():
    """One claim, one counted row (each arm at its best lr); the gap at each shared lr is one
    shown row whatever the grid. The first registration counted the claim at each shared lr:
    its lr 1e-2 row is retired with its committed FAIL, its lr 3e-3 row is the claim's result
    before (inconclusive), and the premise was added after it (a claim then, counted)."""
    r = tiny()
    assert [(c.id, c.kind) for c in r.checks] == [
        ("post-ln-trains-at-this-depth", E.PREMISE), ("post-ln-ends-lower-than-pre-ln", E.CLAIM),
        ("gap-at-each-shared-lr", E.SHOWN), ("resolvable-gap-size", E.SHOWN)]
    shared = r.checks[2].measured
    assert all(f"lr {lr:g}:" in shared for lr in r.data["lrs"])
    assert register.retired(X) == {"post-ln-ends-lower-at-lr-1e-2"}
    first = {a.id: a for a in reversed(register.amendments(X))}  # each id's earliest
    assert first["post-ln-trains-at-this-depth"].before == {"kind": None}
    assert first["post-ln-ends-lower-than-pre-ln"].results_before["quick"]["status"] == (
        "inconclusive")
    assert first["post-ln-ends-lower-at-lr-1e-2"].results_before["quick"]["status"] == "FAIL"
