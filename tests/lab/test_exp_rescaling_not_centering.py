"""rescaling-not-centering: the tiny size end to end (premise first: the arms of one operation
run only when LayerNorm is stabler than no norm), the rows on hand-made data where each verdict
can come out, the non-inferiority row listed as not tested at the quick size, and bad configs
refused by name."""

import dataclasses

import numpy as np
import pytest
from test_exp_norm_and_learning_rate import FLOOR, LRS, V, losses

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.contract import Check
from normlab.lab.experiments import rescaling_not_centering as M


def data(idx: dict[str, list[int]], **kw) -> dict:
    n = len(next(iter(idx.values())))
    return {"lrs": LRS, "seeds": list(range(n)), "norm": "layernorm", "V": V, "floor": FLOOR,
            "loss": {a: losses(i) for a, i in idx.items()}, **kw}


def verdict(d: dict, size: str = "full") -> tuple[str, list[Check]]:
    rows = M.judge(d, E.configure(M, size))
    register.check_rows(M, rows, size)
    return E.verdict_of(rows), rows


ALL = {"layernorm": [6, 6, 6], "none": [2, 2, 2], "rmsnorm": [6, 6, 6],
       "centernorm": [2, 3, 2]}


def test_each_verdict_can_come_out_on_hand_made_data():
    v, rows = verdict(data(ALL))
    assert v == E.REPRODUCED
    by = {c.id: c for c in rows}
    assert by["rescaling-stabilizes-centering-does-not"].estimate == pytest.approx(11 / 3)
    assert by["centering-can-be-dropped"].estimate == 0.0
    assert (by["centering-can-be-dropped"].form, by["centering-can-be-dropped"].threshold) == (
        "non-inferiority", [1.0])
    assert by["centering-alone-context"].kind == E.SHOWN
    # centering alone as stable as rescaling alone: the first claim fails
    # (LayerNorm one step lower, so that the two counted rows read distinct intervals)
    same = {**ALL, "layernorm": [5, 5, 5], "none": [1, 1, 1], "centernorm": [6, 6, 6]}
    assert verdict(data(same))[0] == E.PARTLY
    # rescaling alone less stable than either: both claims fail
    worse = {**ALL, "rmsnorm": [2, 2, 2], "centernorm": [4, 4, 4]}
    assert verdict(data(worse))[0] == E.NOT_REPRODUCED
    assert verdict(data({**ALL, "rmsnorm": [6, 3, 6]}))[0] == E.INCONCLUSIVE


def test_the_quick_size_judges_the_superiority_row_alone():
    v, rows = verdict(data(ALL), "quick")
    assert v == E.REPRODUCED
    assert "centering-can-be-dropped" not in {c.id for c in rows}
    assert not M.RECORDS["centering-can-be-dropped"].tested_at("quick")
    assert E.configure(M, "full").judge_dropping and not E.configure(M, "quick").judge_dropping
    full_rows = M.judge(data(ALL), E.configure(M, "full"))
    with pytest.raises(register.RegisterError, match="not tested at the quick size"):
        register.check_rows(M, full_rows, "quick")


def test_premise_first_no_stabilizing_effect_tests_nothing():
    d = data({"layernorm": [2, 2, 2], "none": [2, 2, 2]}, tested=False)
    v, rows = verdict(d)
    assert v == E.NOT_TESTED
    claims = [c for c in rows if c.kind == E.CLAIM]
    assert [c.id for c in claims] == ["rescaling-stabilizes-centering-does-not",
                                      "centering-can-be-dropped"]
    assert all(c.passed is None and c.measured.startswith("not run") for c in claims)


def test_tiny_runs_end_to_end_and_the_single_operations_wait_for_the_premise(monkeypatch,
                                                                            tmp_path):
    r = E.run_experiment("rescaling-not-centering", size="tiny", seed=0, executor="serial",
                         plots=False).result
    premise = next(c for c in r.checks if c.kind == E.PREMISE)
    run = {"layernorm", "none"} | ({"rmsnorm", "centernorm"} if premise.passed else set())
    assert set(r.data["loss"]) == run
    rec = M.RECORDS["layernorm-stabilizes-here"]
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, rec.id: dataclasses.replace(
        rec, margin=(-50.0,))})
    monkeypatch.setattr(M, "REGISTER", tuple(M.RECORDS[x.id] for x in M.REGISTER))
    both = E.run_experiment("rescaling-not-centering", size="tiny", seed=0, executor="serial",
                            plots=False).result
    assert set(both.data["loss"]) == set(M.ARMS)
    assert np.shape(both.data["loss"]["centernorm"]) == (3, 2)
    assert both.data["loss"]["layernorm"] == r.data["loss"]["layernorm"]  # seeded
    files = M.plot(both, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000
    register.validate(M)


@pytest.mark.parametrize("overrides,message", [
    ({"lrs": (1e-3, 1e-2, 1.0)}, "lrs: at least three increasing learning rates"),
    ({"lrs": (1e-2, 1e-3, 1e-1)}, "lrs: at least three increasing"),
    ({"base.data": "pydoc"}, "base: the Markov source"),
])
def test_bad_configs_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        E.configure(M, "tiny", overrides=overrides)
