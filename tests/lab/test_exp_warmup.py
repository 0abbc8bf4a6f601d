"""warmup at its tiny size (seconds, in this process): the counted rows read the learning rate
fixed in the config (never one chosen from the verdict's own runs), premises first, each effect
counted once, and "comparable results" listed as not tested with its reason."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import warmup

_CACHE = {}


def tiny(**overrides):
    key = tuple(sorted(overrides.items()))
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment("warmup", size="tiny", seed=0, executor="serial",
                                       overrides=overrides, plots=False).result
    return _CACHE[key]


def test_direction_at_the_counted_lr():
    """At the tiny size warmup already helps Post-LN at the counted (high) learning rate and not
    at the low one, and DeepNorm trains without it: the claimed directions, in the per-seed
    means."""
    d = tiny().data
    top = max(d["depths"])
    assert d["lr"] == E.configure(warmup, "tiny").lr == max(d["lrs"])
    gaps = [np.mean(warmup._gaps(d, "post", top, lr)) for lr in d["lrs"]]
    assert gaps[-1] > 0.1 and gaps[-1] > gaps[0]
    no_warm = {p: np.mean(warmup._seeds(d, p, top, False, d["lr"])) for p in warmup.PLACEMENTS}
    assert no_warm["deepnorm"] < no_warm["post"] - 0.1
    pre, post = (np.mean(warmup._gaps(d, p, top, d["lr"])) for p in ("pre", "post"))
    assert abs(pre) < 0.1 and post > 3 * abs(pre)


def test_the_rows_read_the_configured_lr_not_the_grid_edge():
    """The counted lr is the config's, whatever the other runs do: moved to the grid's lowest
    lr, every counted row reads the runs there (lr* is gone: it picked the highest lr where the
    mean trains, the edge of stability by construction)."""
    low = tiny(lr=1e-3)
    d, top = low.data, max(low.data["depths"])
    assert d["lr"] == 1e-3
    premise = next(c for c in low.checks if c.id == "post-ln-with-warmup-trains")
    share = warmup._share(d, warmup._variant("post", top, True), 1e-3)
    assert premise.estimate == pytest.approx(np.mean(share)) and "(lr 0.001)" in premise.claim
    if low.data.get("tested", True):  # the premise may not hold at the low lr in 40 steps
        gap = next(c for c in low.checks if c.id == "post-ln-no-warmup-gap")
        assert gap.estimate == pytest.approx(np.mean(warmup._gaps(d, "post", top, 1e-3)))
    with pytest.raises(ValueError, match="must be one of lrs"):
        E.configure(warmup, "tiny", overrides={"lr": 5e-3})


def test_premise_first_runs_the_other_arms_only_when_it_holds(monkeypatch):
    """Premises first: Post-LN with warmup at the largest depth and the counted lr trains first;
    with a premise margin no run clears it is the only arm trained, the claims are not judged,
    each kept with why, and its runs are the tested measurement's, bit for bit."""
    tested = tiny()
    rec = dataclasses.replace(warmup.RECORDS["post-ln-with-warmup-trains"], margin=(1.5,))
    monkeypatch.setattr(warmup, "RECORDS", {**warmup.RECORDS, rec.id: rec})
    monkeypatch.setattr(warmup, "REGISTER", tuple(
        rec if r.id == rec.id else r for r in warmup.REGISTER))
    gated = E.run_experiment("warmup", size="tiny", seed=0, executor="serial", plots=False).result
    top, lr = max(gated.data["depths"]), gated.data["lr"]
    post_w = warmup._variant("post", top, True)
    assert gated.verdict == E.NOT_TESTED and gated.data["tested"] is False
    assert list(gated.data["loss"]) == [post_w] and gated.data["gaps"] == {}
    assert gated.data["lrs"] == [lr]  # only the counted lr ran
    i = tested.data["lrs"].index(lr)
    assert gated.data["seed_loss"][post_w] == [tested.data["seed_loss"][post_w][i]]
    claims = [c for c in gated.checks if c.kind == E.CLAIM]
    assert [c.id for c in claims] == [r.id for r in warmup.REGISTER
                                      if r.kind == E.CLAIM and not r.untested]
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)
    assert gated.measured.startswith("not tested: Post-LN with warmup at L=")


def test_each_effect_counted_once_and_comparable_results_not_tested(tmp_path):
    """Three counted claims, each its own effect (Post-LN's gap, Pre-LN's and DeepNorm's own
    gaps), the baseline a premise, the gaps of the grid shown; the growth with lr and depth and
    "comparable results" listed as not tested, each with its reason and no row."""
    r = tiny()
    assert {c.id: c.kind for c in r.checks} == {
        "post-ln-with-warmup-trains": E.PREMISE, "warmup-gap-context": E.SHOWN,
        "post-ln-no-warmup-gap": E.CLAIM, "pre-ln-needs-no-warmup": E.CLAIM,
        "deepnorm-trains-without-warmup": E.CLAIM}
    forms = {c.id: (c.form, c.threshold, c.side) for c in r.checks if c.kind == E.CLAIM}
    assert forms["post-ln-no-warmup-gap"] == ("superiority", [0.1], "above")
    assert forms["pre-ln-needs-no-warmup"] == ("non-inferiority", [0.1], "below")
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted) == 3
    untested = {x.id: x.untested for x in warmup.REGISTER if x.untested}
    assert set(untested) == {"gap-grows-with-lr", "gap-grows-with-depth",
                             "pre-ln-without-matches-post-ln-with"}
    assert "convergence" in untested["pre-ln-without-matches-post-ln-with"]
    files = warmup.plot(tiny(), tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_the_amendments_of_the_counted_lr_carry_the_results_before():
    """Every row that reads the counted lr has an amendment dated 2026-12-07 with its committed
    rows at both sizes (the full premise's bimodal interval among them), marked remeasure; the
    row made not tested is a change of what is counted only."""
    last = {a.id: a for a in register.amendments(warmup) if a.date == "2026-12-07"}
    for i in ("post-ln-with-warmup-trains", "post-ln-no-warmup-gap", "pre-ln-needs-no-warmup",
              "deepnorm-trains-without-warmup", "warmup-gap-context"):
        a = next(a for a in register.amendments(warmup)
                 if a.id == i and a.date == "2026-12-07" and "pilot" in a.changed)
        assert a.remeasure and set(a.results_before) == {"quick", "full"}
    premise = next(a for a in register.amendments(warmup)
                   if a.id == "post-ln-with-warmup-trains" and a.date == "2026-12-07")
    assert premise.results_before["full"]["interval"][0] < 0.62  # the bimodal baseline
    comparable = last["pre-ln-without-matches-post-ln-with"]
    assert comparable.before == {"untested": ""} and not comparable.remeasure
    assert comparable.results_before["full"]["status"] == "inconclusive"
    register.validate(warmup)
