"""invariances-and-cost's register: one counted claim (the whole-step time), its first
registration on the norm op rebuilt from the amendments, and the rows of a tiny run against the
records."""

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import invariances_and_cost as I


def test_the_speed_claim_was_first_registered_on_the_op_and_moved_to_the_whole_step():
    register.validate(I)
    assert [r.id for r in I.REGISTER if r.kind == E.CLAIM] == ["rmsnorm-step-faster-than-layernorm"]
    moves = sorted((a for a in I.AMENDMENTS if a.id == "rmsnorm-step-faster-than-layernorm"),
                   key=lambda a: a.date)
    assert [a.date for a in moves] == ["2026-12-03", "2026-12-04"] and all(a.remeasure
                                                                          for a in moves)
    # as first registered: the op's forward + backward, which passed at the quick size
    assert moves[0].before["grid"] == ["speed_shapes"]
    assert moves[0].results_before["quick"]["status"] == "pass"
    assert moves[1].results_before["quick"]["status"] == "FAIL"


def test_a_tiny_run_keeps_to_the_records():
    r = E.run_experiment("invariances-and-cost", size="tiny", seed=0, plots=False).result
    kinds = {rec.id: rec.kind for rec in I.REGISTER}
    assert {c.id: c.kind for c in r.checks} == kinds
    assert [c.id for c in r.checks if c.kind == E.CLAIM] == ["rmsnorm-step-faster-than-layernorm"]
