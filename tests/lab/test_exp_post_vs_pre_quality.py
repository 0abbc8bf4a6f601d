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
    premise = next(c for c in r.checks if c.id == "post-ln-trains-at-this-depth")
    assert premise.kind == E.PREMISE and premise.passed  # Post-LN with warmup trains here
    assert all(0.5 < f < 1.5 for f in X.trained_fraction(d, lr_post, lr_pre))
    files = X.plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def _flat(data, drop=0.0):
    """The data with every run's second-half fall set to ``drop`` (a converged curve at 0)."""
    out = copy.deepcopy(data)
    out["late_drop"] = {p: {lr: [drop] * len(v) for lr, v in by.items()}
                        for p, by in out["late_drop"].items()}
    return out


def _row(checks, id_):
    return next(c for c in checks if c.id == id_)


def test_premises_gate_the_verdict_both_ways():
    """The quality claim needs both arms trained to convergence and a Post-LN that trains: at 30
    steps the loss still falls (the convergence premise fails: 'not tested'); the same data with
    flat second halves is judged; with every Post-LN run left at its loss at init it is 'not
    tested' again."""
    r = tiny()
    conv = _row(r.checks, "both-arms-converged")
    assert conv.kind == E.PREMISE and conv.passed is False and conv.estimate > X.CONVERGED
    assert r.verdict == E.NOT_TESTED
    cfg = E.configure(X, "tiny")
    flat = X.judge(_flat(r.data), cfg)
    assert all(c.passed for c in flat if c.premise)
    assert E.verdict_of(flat) != E.NOT_TESTED
    assert _row(flat, "post-ln-ends-lower-than-pre-ln").interval == _row(
        r.checks, "post-ln-ends-lower-than-pre-ln").interval  # the claim reads the same runs
    stalled = _flat(r.data)
    init = stalled["loss_at_init"]["post"]
    stalled["loss"]["post"] = {lr: [init] * len(v) for lr, v in stalled["loss"]["post"].items()}
    checks = X.judge(stalled, cfg)
    assert _row(checks, "post-ln-trains-at-this-depth").passed is False
    assert E.verdict_of(checks) == E.NOT_TESTED
    # a drop just inside / outside the margin (the larger arm's fall per seed is what counts)
    inside, outside = (X.judge(_flat(r.data, d), cfg) for d in (0.02, 0.04))
    assert _row(inside, "both-arms-converged").passed is True
    assert _row(outside, "both-arms-converged").passed is False


def test_the_convergence_premise_reads_each_arm_at_its_best_lr():
    """The second half's fall is each arm's own at its own best lr, the larger of the two per
    seed; a run that did not finish counts as not converged (its loss at init)."""
    d = copy.deepcopy(tiny().data)
    lr_post, lr_pre = X.best_lr(d, "post"), X.best_lr(d, "pre")
    d["late_drop"]["post"][str(lr_post)] = [0.01, 0.05]
    d["late_drop"]["pre"][str(lr_pre)] = [0.02, 0.0]
    assert X.late_drops(d) == pytest.approx([0.02, 0.05])
    d["late_drop"]["pre"][str(lr_pre)] = [None, 0.0]
    assert X.late_drops(d)[0] == pytest.approx(d["loss_at_init"]["pre"])


def test_late_drop_reads_the_evaluation_at_half_the_steps():
    """_training.late_drop against evaluations written by hand: the loss at the requested
    fraction of the steps minus the last; None without that evaluation or for a run that did
    not finish; a fraction outside (0, 1) is refused."""
    from normlab.lab.experiments._training import Run, late_drop

    evals = [{"step": s, "val_loss": v} for s, v in ((25, 3.0), (50, 2.5), (75, 2.2),
                                                      (100, 2.1))]
    run = Run("a", 1e-3, 0, "done", None, 2.1, 5.0, None, 100, 0, evals=evals)
    assert late_drop(run) == pytest.approx(0.4)
    assert late_drop(run, 0.25) == pytest.approx(0.1)
    assert late_drop(run, 0.6) is None  # no evaluation at step 40
    assert late_drop(Run("a", 1e-3, 0, "diverged", "nan", None, 5.0, None, 60, 0,
                         evals=evals[:2])) is None
    with pytest.raises(ValueError, match="fraction"):
        late_drop(run, 1.0)


def test_the_corpus_is_named_by_its_hash():
    src = tiny().data["source"]
    assert src["name"] == "pydoc" and len(src["sha256"]) == 64 and src["vocab_size"] > 50


def test_steps_must_put_an_evaluation_at_half_the_run():
    with pytest.raises(ValueError, match="eval_interval must divide half"):
        X.validate(E.configure(X, "tiny", overrides={"base.eval_interval": 10}))


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
        ("both-arms-converged", E.PREMISE), ("post-ln-trains-at-this-depth", E.PREMISE),
        ("post-ln-ends-lower-than-pre-ln", E.CLAIM),
        ("gap-at-each-shared-lr", E.SHOWN), ("resolvable-gap-size", E.SHOWN)]
    shared = _row(r.checks, "gap-at-each-shared-lr").measured
    assert all(f"lr {lr:g}:" in shared for lr in r.data["lrs"])
    assert register.retired(X) == {"post-ln-ends-lower-at-lr-1e-2"}
    first = {a.id: a for a in reversed(register.amendments(X))}  # each id's earliest
    assert first["post-ln-trains-at-this-depth"].before == {"kind": None}
    assert first["post-ln-ends-lower-than-pre-ln"].results_before["quick"]["status"] == (
        "inconclusive")
    assert first["post-ln-ends-lower-at-lr-1e-2"].results_before["quick"]["status"] == "FAIL"
    # the convergence premise (2026-12-07): added after the committed FAILs, which it now gates
    assert first["both-arms-converged"].before == {"kind": None}
    last = [a for a in register.amendments(X) if a.id == "post-ln-ends-lower-than-pre-ln"][-1]
    assert last.remeasure and last.before == {"premise": ["post-ln-trains-at-this-depth"]}
    assert {s: row["status"] for s, row in last.results_before.items()} == {
        "quick": "FAIL", "full": "FAIL"}
    rec = next(r for r in X.REGISTER if r.id == "post-ln-ends-lower-than-pre-ln")
    assert rec.premise == ("both-arms-converged", "post-ln-trains-at-this-depth")
