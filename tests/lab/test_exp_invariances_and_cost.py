"""invariances-and-cost's register: one counted claim (the norm op's saving against the paper's
smallest figure), the whole step shown beside it, the speed claim's history rebuilt from the
amendments, and the rows of a tiny run against the records."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import invariances_and_cost as I
from normlab.lab.experiments import rmsnorm_quality


def test_the_counted_speed_row_is_the_op_and_the_whole_step_is_context():
    register.validate(I)
    assert [r.id for r in I.REGISTER if r.kind == E.CLAIM] == ["norm-op-saving"]
    op = next(r for r in I.REGISTER if r.id == "norm-op-saving")
    assert op.form == "superiority" and op.margin == (I.MIN_OP_SAVING,) and op.side == "above"
    # the margin is the paper's smallest whole-model saving: Transformer-base 248 s -> 231 s
    assert I.MIN_OP_SAVING == pytest.approx(1 - 231 / 248, abs=1e-3)
    step = next(r for r in I.REGISTER if r.id == "rmsnorm-step-faster-than-layernorm")
    assert step.kind == E.SHOWN


def test_one_claim_one_place_the_whole_step_is_untested_in_rmsnorm_quality():
    """The paper's whole-step claim is registered once, as not tested, by rmsnorm-quality; here
    it is shown, never counted."""
    whole = next(r for r in rmsnorm_quality.REGISTER
                 if r.id == "rmsnorm-takes-less-time-per-step")
    assert whole.kind == E.CLAIM and whole.untested
    assert not any(r.kind == E.CLAIM and "step" in r.id for r in I.REGISTER)


def test_the_history_of_the_speed_claim_is_in_the_amendments():
    moves = sorted((a for a in I.AMENDMENTS if a.id == "rmsnorm-step-faster-than-layernorm"),
                   key=lambda a: a.date)
    assert [a.date for a in moves] == ["2026-12-03", "2026-12-04", "2026-12-07"]
    # as first registered: the op's forward + backward, which passed at the quick size
    assert moves[0].before["grid"] == ["speed_shapes"]
    assert moves[0].results_before["quick"]["status"] == "pass"
    assert moves[1].results_before["quick"]["status"] == "FAIL"
    # 2026-12-07: counted -> shown, with both sizes' committed FAILs before it
    assert moves[2].before["kind"] == "claim" and not moves[2].remeasure
    assert {s: r["status"] for s, r in moves[2].results_before.items()} == {
        "quick": "FAIL", "full": "FAIL"}
    op = [a for a in I.AMENDMENTS if a.id == "norm-op-saving"]
    assert len(op) == 1 and op[0].before["kind"] == "shown"


def _row(saves: list[float]) -> dict:
    return {"shape": [4096, 64], "rms_savings": saves, "prms_saving": 0.4}


def test_the_op_row_passes_only_when_every_shape_clears_the_margin():
    rng = np.random.default_rng(0)
    fast = list(0.35 + 0.01 * rng.standard_normal(31))
    slow = list(0.02 + 0.01 * rng.standard_normal(31))
    ok = I._op_check([_row(fast), _row(fast)], "m")
    assert ok.passed is True and ok.id == "norm-op-saving"
    bad = I._op_check([_row(fast), _row(slow)], "m")
    assert bad.passed is False and bad.interval[1] < I.MIN_OP_SAVING


def test_a_tiny_run_keeps_to_the_records():
    r = E.run_experiment("invariances-and-cost", size="tiny", seed=0, plots=False).result
    kinds = {rec.id: rec.kind for rec in I.REGISTER}
    assert {c.id: c.kind for c in r.checks} == kinds
    assert [c.id for c in r.checks if c.kind == E.CLAIM] == ["norm-op-saving"]
    step = r.data["step"]
    assert step["n_norms"] == 2 * I.SIZES["tiny"].get("step_model.model.n_layers", 2) + 1
    assert all(0 < s < 1 for s in step["norm_share"])
    assert step["predicted"] == pytest.approx(
        [a * b for a, b in zip(step["norm_share"], step["kernel_op_savings"])])
