"""batchnorm-vs-layernorm's register: every row names its record, nothing is counted (the
train/eval mismatch, once the one counted claim, is a derivation since 2026-12-03)."""

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import batchnorm_vs_layernorm as B


def test_every_row_keeps_to_its_record_and_none_is_counted():
    r = E.run_experiment("batchnorm-vs-layernorm", size="tiny", seed=0, plots=False).result
    register.validate(B)
    records = {rec.id: rec for rec in B.REGISTER}
    assert [c.id for c in r.checks] == list(records)  # one row per record, in order
    assert all(c.kind == records[c.id].kind for c in r.checks)
    assert not [c for c in r.checks if c.counted] and r.verdict == E.HOLDS
    (a,) = B.AMENDMENTS  # the mismatch row as first registered: a counted claim that passed
    assert a.id == "train-eval-mismatch-falls-with-batch-size" and a.before == {"kind": "claim"}
    assert a.results_before["quick"]["status"] == "pass"
