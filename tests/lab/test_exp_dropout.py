"""The dropout experiment at its tiny size: inverted dropout's identities on normlab's
implementation, checked by Monte Carlo within their standard errors, and the kinds of its rows
(identities and derivations only: the verdict is 'identities hold')."""

import pytest

from normlab.lab import framework as E

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("dropout", size="tiny", seed=0).result
    return _CACHE["r"]


def test_dropout_numbers():
    r = tiny()
    for row in r.data["rows"]:
        assert abs(row["mean_ratio"] - 1) < 0.05
        assert row["var_ratio"] == pytest.approx(row["p"] / (1 - row["p"]), rel=0.1)
    assert r.data["relu_train"] > r.data["relu_eval"] > 0  # Jensen: dropout noise survives ReLU
    assert abs(r.data["lin_ratio"] - 1) < 5 * r.data["lin_ratio_se"] < 0.5
    assert r.data["eval_diff"] == 0.0 and r.data["train_diff"] > 0


def test_kinds():
    r = tiny()
    assert not any(c.kind == E.CLAIM for c in r.checks)  # true by construction: no claim counted
    assert {c.kind for c in r.checks} == {E.IDENTITY, E.DERIVATION, E.SHOWN}
    assert all(c.passed for c in r.checks if c.identity)
    assert r.verdict == E.HOLDS


def test_every_row_names_its_record():
    from normlab.lab import register
    from normlab.lab.experiments import dropout

    register.validate(dropout)
    records = {rec.id: rec.kind for rec in dropout.REGISTER}
    assert {c.id: c.kind for c in tiny().checks} == records
    assert not register.amendments(dropout)  # nothing changed after a committed result
