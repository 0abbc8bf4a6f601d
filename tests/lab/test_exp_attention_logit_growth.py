"""attention-logit-growth under the lab's one learning-rate grid rule: the counted sensitivity
over Wortsman et al.'s grid alone, with its measure; points beyond it shown; and a size whose
pilot cannot resolve the counted row is not tested there."""

import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import _pilots as P
from normlab.lab.experiments import attention_logit_growth as A
from normlab.lab.sweep import lr_sensitivity


def test_the_grid_is_the_papers_and_both_sizes_sweep_it():
    assert A.PAPER_LRS == (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # section 2.2
    for size in ("quick", "full"):
        cfg = E.configure(A, size)
        assert set(A.PAPER_LRS) <= set(cfg.lrs)
        assert [cfg.lrs[j] for j in A.on_paper_grid(cfg.lrs)] == list(A.PAPER_LRS)


def test_the_counted_sensitivity_ignores_the_points_beyond_the_grid():
    lrs = [*A.PAPER_LRS, 1.0, 3.0]
    losses = [2.8, 2.4, 2.1, 2.0, 2.1, 2.5, 2.7, 2.9, None]
    on = losses[:7]
    assert A.paper_sensitivity(lrs, losses, 5.0) == pytest.approx(sum(on) / 7 - 2.0)
    assert A.paper_sensitivity(lrs, losses, 5.0) == lr_sensitivity(A.PAPER_LRS, on, 5.0)
    with pytest.raises(ValueError, match="source's grid"):
        A.paper_sensitivity([1.0, 3.0], [2.0, 2.1], 5.0)


def test_the_quick_size_is_not_tested_on_the_papers_grid():
    """The quick size's pilot (seeds 50000-50002): ratio about 0.65 against the 0.7 margin;
    three seeds cannot resolve it, so the premise fails there; the full size has no pilot and
    no premise row."""
    quick, full = E.configure(A, "quick"), E.configure(A, "full")
    pilot = A.PILOTS[quick.base.steps]
    assert not P.resolves(pilot, quick.seeds, 0.0) and P.needed(pilot, 0.0) > quick.seeds
    row = P.premise(pilot, quick.seeds, 0.0, "x", id="size-resolves-the-sensitivity-margin",
                    source="s")
    assert row.kind == E.PREMISE and row.passed is False
    assert full.base.steps not in A.PILOTS
    assert E.verdict_of([row]) == E.NOT_TESTED


def test_the_register_records_the_grid_rule():
    register.validate(A)
    recs = {r.id: r for r in A.REGISTER}
    assert recs["size-resolves-the-sensitivity-margin"].kind == E.PREMISE
    moved = [a for a in A.AMENDMENTS if a.date == "2026-12-07"
             and a.id.startswith("qk-norm-lowers-lr-sensitivity")]
    assert {a.id for a in moved} == {"qk-norm-lowers-lr-sensitivity-d32",
                                     "qk-norm-lowers-lr-sensitivity-d64"}
    assert all(a.remeasure for a in moved)
    d32 = next(a for a in moved if a.id.endswith("d32"))
    assert {s: r["status"] for s, r in d32.results_before.items()} == {"quick": "pass",
                                                                       "full": "pass"}
