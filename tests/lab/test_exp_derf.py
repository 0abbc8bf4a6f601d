"""derf at its tiny size (seconds, in this process): the premise's arms first, Derf, DyT and
LayerNorm paired by seed at their own learning rates, each effect counted once; and judge's rows
on hand-made losses where each verdict can come out."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import _pilots as P
from normlab.lab.experiments import derf as M


def _gate(monkeypatch, rec_id: str, margin: float) -> None:
    """Move one record's margin (as a register amendment would)."""
    rec = dataclasses.replace(M.RECORDS[rec_id], margin=(margin,))
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, rec_id: rec})
    monkeypatch.setattr(M, "REGISTER", tuple(rec if r.id == rec_id else r for r in M.REGISTER))


def _data(derf, ln, dyt, bad, none=None) -> dict:
    """Hand-made data as measure returns it (final losses per seed, per arm)."""
    loss = {"layernorm": ln, "dyt-bad": bad, "derf": derf, "dyt": dyt}
    if none is not None:
        loss["none"] = none
    return {"seeds": list(range(len(ln))), "loss": loss,
            "lr": {"layernorm": 3e-2, "dyt": 3e-2, "dyt-bad": 3e-2, "derf": 3e-2, "none": 3e-2},
            "alpha": {"dyt": 0.8, "dyt-bad": 2.0, "derf": 0.5}, "shift": 0.0}


def _rows(data, size: str = "full", **over) -> dict:
    cfg = dataclasses.replace(E.configure(M, size), **over)
    return {c.id: c for c in M.judge(data, cfg)}


def test_the_tiny_size_runs_every_arm_paired_by_seed_at_its_own_lr(monkeypatch, tmp_path):
    """With the premise let through (at 40 steps of a width-16 model no alpha0 is bad yet),
    every arm trains and each counted row is the paired mean of Derf - its comparator."""
    _gate(monkeypatch, "task-tells-bad-dyt-from-layernorm", -50.0)
    r = E.run_experiment("derf", size="tiny", seed=0, executor="serial", plots=False).result
    d = r.data
    cfg = E.configure(M, "tiny")
    assert set(d["loss"]) == {"layernorm", "dyt-bad", "derf", "dyt"}  # no 'none' at tiny
    assert all(len(v) == cfg.seeds for v in d["loss"].values())
    for rec_id, other in (("derf-matches-layernorm", "layernorm"),
                          ("derf-matches-or-beats-dyt", "dyt")):
        row = next(c for c in r.checks if c.id == rec_id)
        diff = np.asarray(d["loss"]["derf"]) - np.asarray(d["loss"][other])
        assert row.estimate == pytest.approx(float(np.mean(diff)))
        assert (row.form, row.threshold, row.side) == ("non-inferiority", [0.03], "below")
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted)
    register.check_rows(M, r.checks, "tiny")
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_each_arm_is_its_norm_its_alpha0_and_its_lr():
    cfg = dataclasses.replace(E.configure(M, "quick"), lr_layernorm=1e-2, lr_dyt=2e-2,
                              lr_derf=5e-3, derf_alpha=0.7, derf_shift=0.1)
    pts = {arm: over for arm, over, _ in M._points(cfg, ("layernorm", "dyt", "dyt-bad",
                                                         "derf", "none"), [7])}
    assert pts["layernorm"] == {"model.norm": "layernorm", "lr": 1e-2, "seed": 7}
    assert pts["dyt"]["model.dyt_alpha"] == cfg.dyt_alpha and pts["dyt"]["lr"] == 2e-2
    assert pts["dyt-bad"]["model.dyt_alpha"] == cfg.bad_alpha and pts["dyt-bad"]["lr"] == 2e-2
    assert (pts["derf"]["model.norm"], pts["derf"]["model.derf_alpha"],
            pts["derf"]["model.derf_shift"], pts["derf"]["lr"]) == ("derf", 0.7, 0.1, 5e-3)
    assert pts["none"] == {"model.norm": "none", "lr": 1e-2, "seed": 7}


@pytest.mark.parametrize("gap_ln, gap_dyt, expected", [
    (0.0, -0.03, E.REPRODUCED),  # the paper's GPT-2 gaps: pass both
    (0.15, 0.10, E.NOT_REPRODUCED),  # wholly past the margin: FAIL both
    (0.0, 0.15, E.PARTLY),
])
def test_judge_on_hand_made_losses(gap_ln, gap_dyt, expected):
    ln = [1.90, 1.92, 1.88, 1.91, 1.89]
    jitter = np.array([0.001, -0.002, 0.0, 0.002, -0.001])
    derf = list(np.asarray(ln) + gap_ln + jitter)
    dyt = list(np.asarray(derf) - gap_dyt + jitter[::-1])
    bad = list(np.asarray(ln) + 0.3)
    rows = _rows(_data(derf, ln, dyt, bad))
    r = E.Result(card=M.CARD, setting="", measured="", checks=list(rows.values()))
    assert rows["size-resolves-the-parity-margin"].passed is True  # the full size's 8 seeds
    assert rows["task-tells-bad-dyt-from-layernorm"].passed is True
    assert r.verdict == expected
    assert rows["derf-matches-layernorm"].passed is (gap_ln < 0.03)


def test_a_straddling_interval_is_inconclusive_and_a_failed_premise_judges_nothing():
    ln = [1.90, 1.92, 1.88]
    derf = [1.90, 1.98, 1.89]  # derf - ln: 0, 0.06, 0.01 -> straddles 0.03
    rows = _rows(_data(derf, ln, derf, [x + 0.3 for x in ln]), seeds=3)
    assert rows["derf-matches-layernorm"].inconclusive
    rows = _rows(_data(derf, ln, derf, [x + 0.01 for x in ln]))  # bad DyT within the margin
    premise = rows["task-tells-bad-dyt-from-layernorm"]
    assert premise.passed is False
    r = E.Result(card=M.CARD, setting="", measured="", checks=list(rows.values()))
    assert r.verdict == E.NOT_TESTED


def test_premise_first_the_claims_arms_run_only_when_it_holds(monkeypatch):
    _gate(monkeypatch, "task-tells-bad-dyt-from-layernorm", 50.0)
    gated = E.run_experiment("derf", size="tiny", seed=0, executor="serial",
                             plots=False).result
    assert gated.verdict == E.NOT_TESTED
    assert set(gated.data["loss"]) == set(M.PREMISE_ARMS)
    claims = [c for c in gated.checks if c.kind == E.CLAIM]
    assert {c.id for c in claims} == {"derf-matches-layernorm", "derf-matches-or-beats-dyt"}
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)


def test_the_quick_size_whose_seeds_the_pilot_says_cannot_resolve_is_not_tested():
    """The pilot: Derf - LN 0.058 (sd 0.024) needs 6 seeds against the 0.03 margin; the quick
    size's 3 do not resolve it, so its verdict is 'not tested at this size' whatever its rows
    read; the full size's 8 do."""
    assert P.needed(M.PILOTS[300]["derf-matches-layernorm"], M.PARITY_TOL) == 6
    ln = [1.90, 1.92, 1.88]
    rows = _rows(_data([x + 0.1 for x in ln], ln, ln, [x + 0.3 for x in ln]), "quick")
    assert rows["size-resolves-the-parity-margin"].passed is False
    assert "seeds needed: 6" in rows["size-resolves-the-parity-margin"].measured
    r = E.Result(card=M.CARD, setting="", measured="", checks=list(rows.values()))
    assert r.verdict == E.NOT_TESTED
    assert rows["derf-matches-layernorm"].passed is False  # still read, with its interval
    assert E.configure(M, "full").seeds == 8
    monkey = dataclasses.replace(E.configure(M, "quick"), base=E.configure(M, "tiny").base)
    assert M._resolves(monkey) is None  # no pilot at the tiny size's step count


def test_the_no_norm_arm_is_shown_where_it_runs():
    ln = [1.90, 1.92, 1.88]
    rows = _rows(_data(ln, ln, ln, [x + 0.3 for x in ln], none=[x - 0.03 for x in ln]))
    row = rows["no-norm-against-layernorm"]
    assert row.kind == E.SHOWN and row.passed is None and not row.counted
    assert E.configure(M, "full").none_arm and not E.configure(M, "quick").none_arm


def test_the_register_keeps_its_rules():
    register.validate(M)
    untested = {r.id for r in M.REGISTER if r.untested}
    assert untested == {"derf-beats-layernorm-beyond-language", "derf-gain-is-generalization"}
    assert all(not M.RECORDS[i].tested_at("full") for i in untested)


@pytest.mark.parametrize("over, words", [
    ({"base.model.placement": "post"}, "Pre-LN"),
    ({"lr_derf": 0.0}, "lr_derf"),
    ({"bad_alpha": 0.5}, "bad_alpha"),
    ({"seeds": 1}, "at least 2"),
])
def test_bad_configs_are_refused(over, words):
    with pytest.raises(ValueError, match=words):
        E.configure(M, "tiny", overrides=over)
