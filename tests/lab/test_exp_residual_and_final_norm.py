"""residual-and-final-norm at its tiny size (seconds, in this process): premises first for both
ablations, the arms paired by seed, each effect counted once, the final norm's rows listed as not
tested at the quick size, and the rows refused by the register where a size does not test them."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import residual_and_final_norm as M

_CACHE: dict = {}


def tiny(**overrides):
    key = tuple(sorted(overrides.items()))
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment("residual-and-final-norm", size="tiny", seed=0,
                                       executor="serial", overrides=overrides,
                                       plots=False).result
    return _CACHE[key]


def _gate(monkeypatch, rec_id: str, margin: float) -> None:
    """Move one premise's margin (as a register amendment would)."""
    rec = dataclasses.replace(M.RECORDS[rec_id], margin=(margin,))
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, rec_id: rec})
    monkeypatch.setattr(M, "REGISTER", tuple(rec if r.id == rec_id else r for r in M.REGISTER))


def test_the_skip_rows_read_the_paired_seeds_of_the_two_arms():
    """The counted skip row is the paired mean over seeds of loss(no skip) - loss(skip), at the
    config's depth and lr, and the arms differ only in GPTConfig.residual."""
    r = tiny()
    d, L = r.data, r.data["depth"]
    skip = d["skip"]
    no, yes = (np.asarray(skip["loss"][M._skip_variant(s, L)]) for s in (False, True))
    row = next(c for c in r.checks if c.id == "skips-make-a-deep-stack-trainable")
    assert row.estimate == pytest.approx(float(np.mean(no - yes)))
    assert (row.form, row.threshold, row.side) == ("superiority", [0.1], "above")
    assert len(no) == len(yes) == E.configure(M, "tiny").seeds
    assert f"L={L}, lr={d['lr']:g}" in row.measured
    points = M._skip_points(E.configure(M, "tiny"), False, [0])
    assert points[0][1]["model.residual"] is False and points[0][1]["model.n_layers"] == L


def test_premise_first_the_no_skip_arm_runs_only_when_the_skips_train(monkeypatch):
    """With a premise margin no run clears, only the arm with skips trains, and the claim is
    kept with why, undecided."""
    _gate(monkeypatch, "pre-ln-with-skips-trains", 1.5)
    _gate(monkeypatch, "text-separates-post-and-pre", 50.0)
    gated = E.run_experiment("residual-and-final-norm", size="tiny", seed=0, executor="serial",
                             plots=False).result
    assert gated.verdict == E.NOT_TESTED
    assert list(gated.data["skip"]["loss"]) == [M._skip_variant(True, gated.data["depth"])]
    assert list(gated.data["final_norm"]["loss"]) == [M._fn_variant(p, f)
                                                      for p, f in M.FN_ARMS[:2]]
    claims = [c for c in gated.checks if c.kind == E.CLAIM]
    assert [c.id for c in claims] == [r.id for r in M.REGISTER if r.kind == E.CLAIM]
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)


def test_the_final_norm_rows_read_each_placement_with_and_without(monkeypatch, tmp_path):
    """With the text premise let through, the four arms run and each placement's row is the
    paired difference without - with its final norm: Pre-LN's superiority, Post-LN's
    non-inferiority, both at the 0.1 nats margin; four counted intervals, none read twice."""
    _gate(monkeypatch, "text-separates-post-and-pre", -50.0)
    r = E.run_experiment("residual-and-final-norm", size="tiny", seed=0, executor="serial",
                         plots=False).result
    fn = r.data["final_norm"]
    assert set(fn["loss"]) == {M._fn_variant(p, f) for p, f in M.FN_ARMS}
    for rec_id, p in (("final-norm-helps-pre-ln", "pre"), ("post-ln-needs-no-final-norm",
                                                          "post")):
        row = next(c for c in r.checks if c.id == rec_id)
        diff = np.asarray(fn["loss"][M._fn_variant(p, False)]) - np.asarray(
            fn["loss"][M._fn_variant(p, True)])
        assert row.estimate == pytest.approx(float(np.mean(diff)))
    forms = {c.id: (c.form, c.threshold, c.side) for c in r.checks if c.kind == E.CLAIM}
    assert forms["final-norm-helps-pre-ln"] == ("superiority", [0.1], "above")
    assert forms["post-ln-needs-no-final-norm"] == ("non-inferiority", [0.1], "below")
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted) == 3
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_the_quick_size_runs_no_final_norm_arm_and_its_rows_are_untested_there():
    """The register lists the final norm's rows as not tested at the quick size (with the
    reason), the quick config runs none of its arms, and a row of them at the quick size is
    refused."""
    quick = E.configure(M, "quick")
    assert quick.final_norm_arms is False and E.configure(M, "full").final_norm_arms is True
    untested = {r.id for r in M.REGISTER if not r.tested_at("quick")}
    assert untested == {"text-separates-post-and-pre", "final-norm-helps-pre-ln",
                        "post-ln-needs-no-final-norm"}
    assert all(M.RECORDS[i].tested_at("full") and "budget" in M.RECORDS[i].untested
               for i in untested)
    rows = tiny().checks
    with pytest.raises(register.RegisterError, match="not tested at the quick size"):
        register.check_rows(M, rows, "quick")
    register.check_rows(M, [c for c in rows if c.id not in untested], "quick")
    register.validate(M)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="placement 'pre'"):
        E.configure(M, "tiny", overrides={"base.model.placement": "post"})
    with pytest.raises(ValueError, match="need a norm"):
        E.configure(M, "tiny", overrides={"text.model.norm": "none"})
