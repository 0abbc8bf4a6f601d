"""mxfp4-sr-rht at its tiny size (seconds, in this process): the premise's arms first, SR + RHT
and the deterministic Hadamard only where it holds, each counted row the paired difference it
names; judge's rows on hand-made data where each verdict can come out; the arms' policies are
the library's mxfp4_recipe; bad configs refused."""

import dataclasses
import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import mxfp4_sr_rht as M
from normlab.precision import PrecisionPolicy, mxfp4_recipe

_PREMISE = "task-separates-nearest-from-bf16"


def _gate(monkeypatch, margin: float) -> None:
    """Move the premise's margin (as a register amendment would)."""
    rec = dataclasses.replace(M.RECORDS[_PREMISE], margin=(margin,))
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, _PREMISE: rec})
    monkeypatch.setattr(M, "REGISTER", tuple(rec if r.id == _PREMISE else r for r in M.REGISTER))


def test_the_claim_arms_run_when_the_premise_holds(monkeypatch, tmp_path):
    _gate(monkeypatch, -50.0)
    r = E.run_experiment("mxfp4-sr-rht", size="tiny", seed=0, executor="serial",
                         plots=False).result
    d = r.data
    assert set(d["loss"]) == set(M.ARMS)
    assert all(len(v) == E.configure(M, "tiny").seeds for v in d["loss"].values())
    premise = next(c for c in r.checks if c.id == _PREMISE)
    gap = np.asarray(d["loss"]["nearest"]) - np.asarray(d["loss"]["bf16"])
    assert premise.estimate == pytest.approx(float(np.mean(gap)))
    for rec_id, (a, b) in M.CLAIMS.items():
        row = next(c for c in r.checks if c.id == rec_id)
        diff = np.asarray(d["loss"][a]) - np.asarray(d["loss"][b])
        assert row.estimate == pytest.approx(float(np.mean(diff)))
        assert row.form == M.RECORDS[rec_id].form
    # the SR arm and the deterministic arm are different runs (the rounding differs)
    assert d["loss"]["sr+rht"] != d["loss"]["hadamard"]
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted) == 2
    register.check_rows(M, r.checks, "full")
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_premise_first_the_claim_arms_do_not_run_when_it_fails(monkeypatch):
    _gate(monkeypatch, 50.0)
    r = E.run_experiment("mxfp4-sr-rht", size="tiny", seed=0, executor="serial",
                         plots=False).result
    assert r.verdict == E.NOT_TESTED
    assert list(r.data["loss"]) == list(M.PREMISE_ARMS)
    claims = [c for c in r.checks if c.kind == E.CLAIM]
    assert [c.id for c in claims] == [rec.id for rec in M.REGISTER if rec.kind == E.CLAIM]
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)


def _data(nearest: float, sr_rht: float, hadamard: float, noise: float = 0.002) -> dict:
    """Hand-made losses over 8 seeds: bf16 about 2.0, each arm offset by its effect."""
    rng = np.random.default_rng(0)
    bf16 = 2.0 + 0.05 * rng.standard_normal(8)

    def arm(effect: float) -> list[float]:
        return list(bf16 + effect + noise * rng.standard_normal(8))
    loss = {"bf16": list(bf16), "nearest": arm(nearest), "sr+rht": arm(sr_rht),
            "hadamard": arm(hadamard)}
    return {"seeds": list(range(8)), "steps": 10, "loss": loss}


@pytest.mark.parametrize("sr_rht, hadamard, verdict", [
    (0.0, -0.1, E.REPRODUCED),       # SR+RHT matches bf16, the Hadamard beats it
    (0.1, 0.1, E.NOT_REPRODUCED),     # SR+RHT far from bf16, the Hadamard no better
    (0.0, 0.0, E.PARTLY),             # Tseng holds, Cim does not
    (0.02, 0.0, E.INCONCLUSIVE),      # both on their margins
])
def test_judge_on_hand_made_data(sr_rht, hadamard, verdict):
    rows = M.judge(_data(0.2, sr_rht, hadamard), E.configure(M, "full"))
    register.check_rows(M, rows, "full")
    assert E.verdict_of(rows) == verdict


def test_judge_when_the_premise_fails_on_hand_made_data():
    data = _data(0.0, 0.0, 0.0)
    data["loss"] = {a: data["loss"][a] for a in M.PREMISE_ARMS}
    data["tested"] = False
    rows = M.judge(data, E.configure(M, "full"))
    assert E.verdict_of(rows) == E.NOT_TESTED
    assert [c.passed for c in rows if c.kind == E.CLAIM] == [None, None]


def test_the_arms_are_the_library_recipe():
    keep = {"keep_layers": ("head",)}
    assert PrecisionPolicy.from_json(json.loads(M.arm_precision("sr+rht"))) == \
        mxfp4_recipe().replace(**keep)
    assert PrecisionPolicy.from_json(M.arm_precision("hadamard")) == \
        mxfp4_recipe(sr=False).replace(**keep)
    assert PrecisionPolicy.from_json(M.arm_precision("nearest")) == \
        mxfp4_recipe(rht=False, sr=False).replace(**keep)
    assert M.arm_precision("bf16") == "amp_bf16"
    with pytest.raises(ValueError, match="arm must be one of"):
        M.arm_precision("fp8")


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        E.configure(M, "tiny", overrides={"base.model.d_model": 24, "base.model.n_heads": 2})
    with pytest.raises(ValueError, match=r"base\.precision"):
        E.configure(M, "tiny", overrides={"base.precision": "amp_bf16"})
    with pytest.raises(ValueError, match="seeds"):
        E.configure(M, "tiny", overrides={"seeds": 1})
    register.validate(M)
