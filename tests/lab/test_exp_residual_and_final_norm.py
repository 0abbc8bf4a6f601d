"""residual-and-final-norm at its tiny size (seconds, in this process): the premise first, the
skip path's arms paired by seed, the effect counted once, and the final norm's three records
retired (moved to final-norm) with the full size's result before kept in their amendments."""

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


def _gate(monkeypatch: pytest.MonkeyPatch, rec_id: str, margin: float) -> None:
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
    gated = E.run_experiment("residual-and-final-norm", size="tiny", seed=0, executor="serial",
                             plots=False).result
    assert gated.verdict == E.NOT_TESTED
    assert list(gated.data["skip"]["loss"]) == [M._skip_variant(True, gated.data["depth"])]
    assert "final_norm" not in gated.data
    claims = [c for c in gated.checks if c.kind == E.CLAIM]
    assert [c.id for c in claims] == ["skips-make-a-deep-stack-trainable"]
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)


_FINAL_NORM = {"text-separates-post-and-pre", "final-norm-helps-pre-ln",
               "post-ln-needs-no-final-norm"}


def test_the_final_norm_records_are_retired_with_the_full_result_before(tmp_path):
    """The three final-norm records stay declared, each retired by an amendment that keeps the
    full size's committed row (the premise's FAIL and its interval, the claims not run); no
    size produces them, and a row of one is refused."""
    r = tiny()
    assert {c.id for c in r.checks} == {"pre-ln-with-skips-trains", "no-skip-share-context",
                                        "skips-make-a-deep-stack-trainable"}
    assert register.retired(M) == _FINAL_NORM and _FINAL_NORM <= set(M.RECORDS)
    by_id = {a.id: a for a in M.AMENDMENTS}
    premise = by_id["text-separates-post-and-pre"].results_before["full"]
    assert premise["status"] == "FAIL" and premise["kind"] == E.PREMISE
    assert premise["interval"] == pytest.approx([-0.0225, 0.0351], abs=1e-4)
    assert all(by_id[i].results_before["full"]["status"] == "shown"
               for i in _FINAL_NORM - {"text-separates-post-and-pre"})
    assert all("final-norm" in a.why and a.commit == "ae739cc" for a in M.AMENDMENTS)
    gone = dataclasses.replace(r.checks[0], id="final-norm-helps-pre-ln")
    with pytest.raises(register.RegisterError, match="retired"):
        register.check_rows(M, [gone], "full")
    register.check_rows(M, r.checks, "quick")
    register.check_rows(M, r.checks, "full")
    register.validate(M)
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="placement 'pre'"):
        E.configure(M, "tiny", overrides={"base.model.placement": "post"})
