"""nvfp4-recipe-parts at its tiny size (seconds, in this process): the premise's arms first, the
four ablations only where it holds, each part's effect the paired difference against the whole
recipe counted once; judge's rows on hand-made data where each verdict can come out; the arms'
policies are the library's nvfp4_recipe; bad configs refused."""

import dataclasses
import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import nvfp4_recipe_parts as M
from normlab.precision import PrecisionPolicy, nvfp4_recipe

_CACHE: dict = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("nvfp4-recipe-parts", size="tiny", seed=0,
                                       executor="serial", plots=False).result
    return _CACHE["r"]


def _gate(monkeypatch, margin: float) -> None:
    """Move the premise's margin (as a register amendment would)."""
    rec_id = "task-separates-whole-from-no-parts"
    rec = dataclasses.replace(M.RECORDS[rec_id], margin=(margin,))
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, rec_id: rec})
    monkeypatch.setattr(M, "REGISTER", tuple(rec if r.id == rec_id else r for r in M.REGISTER))


def test_the_premise_reads_the_paired_seeds_of_no_parts_and_whole():
    r = tiny()
    d = r.data
    assert set(d["loss"]) >= set(M.PREMISE_ARMS)
    no, whole = (np.asarray(d["loss"][a]) for a in ("no parts", "whole"))
    row = next(c for c in r.checks if c.id == "task-separates-whole-from-no-parts")
    assert row.estimate == pytest.approx(float(np.mean(no - whole)))
    assert (row.form, row.threshold, row.side) == ("superiority", [M.TOL], "above")
    assert len(no) == len(whole) == E.configure(M, "tiny").seeds
    register.check_rows(M, r.checks, "full")


def test_the_parts_run_when_the_premise_holds_and_each_is_counted_once(monkeypatch, tmp_path):
    _gate(monkeypatch, -50.0)
    r = E.run_experiment("nvfp4-recipe-parts", size="tiny", seed=0, executor="serial",
                         plots=False).result
    d = r.data
    assert set(d["loss"]) == set(M.ARMS)
    for arm, rec_id in M.PARTS.items():
        row = next(c for c in r.checks if c.id == rec_id)
        diff = np.asarray(d["loss"][arm]) - np.asarray(d["loss"]["whole"])
        assert row.estimate == pytest.approx(float(np.mean(diff)))
        assert (row.form, row.threshold, row.side) == ("superiority", [M.TOL], "above")
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted) == 4
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_premise_first_the_parts_do_not_run_when_it_fails(monkeypatch):
    _gate(monkeypatch, 50.0)
    r = E.run_experiment("nvfp4-recipe-parts", size="tiny", seed=0, executor="serial",
                         plots=False).result
    assert r.verdict == E.NOT_TESTED
    assert list(r.data["loss"]) == list(M.PREMISE_ARMS)
    claims = [c for c in r.checks if c.kind == E.CLAIM]
    assert [c.id for c in claims] == [rec.id for rec in M.REGISTER if rec.kind == E.CLAIM]
    assert all(c.passed is None and c.measured.startswith("not run: the premise did not hold")
               for c in claims)


def _data(no_parts: float, parts: dict[str, float], noise: float = 0.002) -> dict:
    """Hand-made losses over 6 seeds: whole about 2.0, each arm offset by its effect."""
    rng = np.random.default_rng(0)
    seeds = list(range(6))
    whole = 2.0 + 0.05 * rng.standard_normal(6)

    def arm(effect: float) -> list[float]:
        return list(whole + effect + noise * rng.standard_normal(6))
    loss = {"whole": list(whole), "no parts": arm(no_parts), "bf16": arm(-0.03)}
    loss.update({a: arm(parts.get(a, 0.0)) for a in M.PART_ARMS})
    return {"seeds": seeds, "keep_last": 1, "steps": 10, "loss": loss}


@pytest.mark.parametrize("effects, verdict", [
    ({a: 0.1 for a in M.PART_ARMS}, E.REPRODUCED),
    ({a: -0.05 for a in M.PART_ARMS}, E.NOT_REPRODUCED),
    ({"no rht": 0.1, "no 2d": 0.1, "no sr": -0.05, "no kept layers": 0.1}, E.PARTLY),
    ({a: 0.02 for a in M.PART_ARMS}, E.INCONCLUSIVE),
])
def test_judge_on_hand_made_data(effects, verdict):
    data = _data(0.2, effects)
    rows = M.judge(data, E.configure(M, "full"))
    register.check_rows(M, rows, "full")
    assert E.verdict_of(rows) == verdict


def test_judge_when_the_premise_fails_on_hand_made_data():
    data = _data(0.0, {})
    data["loss"] = {a: data["loss"][a] for a in M.PREMISE_ARMS}
    data["tested"] = False
    rows = M.judge(data, E.configure(M, "full"))
    assert E.verdict_of(rows) == E.NOT_TESTED
    assert [c.passed for c in rows if c.kind == E.CLAIM] == [None] * 4


def test_the_arms_are_the_library_recipe():
    whole = PrecisionPolicy.from_json(json.loads(M.arm_precision("whole", 4, 1)))
    assert whole == nvfp4_recipe(keep_layers=["blocks.3", "head"])
    assert whole.keeps("blocks.3.mlp.fc") and not whole.keeps("blocks.2.mlp.fc")
    none = PrecisionPolicy.from_json(M.arm_precision("no parts", 4, 1))
    assert none == nvfp4_recipe(rht=False, two_d=False, sr=False, keep_layers=["head"])
    for arm, parts in (("no rht", {"rht": False}), ("no 2d", {"two_d": False}),
                       ("no sr", {"sr": False})):
        assert PrecisionPolicy.from_json(M.arm_precision(arm, 4, 1)) == nvfp4_recipe(
            keep_layers=["blocks.3", "head"], **parts)
    assert PrecisionPolicy.from_json(M.arm_precision("no kept layers", 4, 2)) == nvfp4_recipe(
        keep_layers=["head"])
    assert M.arm_precision("bf16", 4, 1) == "amp_bf16"
    with pytest.raises(ValueError, match="arm must be one of"):
        M.arm_precision("fp8", 4, 1)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="keep_last"):
        E.configure(M, "tiny", overrides={"keep_last": 2})  # two blocks at the tiny size
    with pytest.raises(ValueError, match="multiple of 16"):
        E.configure(M, "tiny", overrides={"base.model.d_model": 24, "base.model.n_heads": 2})
    with pytest.raises(ValueError, match=r"base\.precision"):
        E.configure(M, "tiny", overrides={"base.precision": "amp_bf16"})
    register.validate(M)
