"""norm-and-learning-rate: the tiny size end to end (premise first: the arm with the norm runs
only when the arm without one stops inside the grid), the rows on hand-made data where each
verdict can come out, the stability rule itself, and bad configs refused by name."""

import math

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.contract import Check
from normlab.lab.experiments import norm_and_learning_rate as M

LRS = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1]
FLOOR, V = 1.14, 16


def losses(idx: list[int], n_lrs: int = len(LRS)) -> list[list[float]]:
    """(lrs, seeds): a loss under the bar up to each seed's index, a diverged run's above."""
    return [[1.2 if j <= i else 20.0 for i in idx] for j in range(n_lrs)]


def data(norm_idx, none_idx, **kw) -> dict:
    d = {"lrs": LRS, "seeds": list(range(len(none_idx))), "norm": "layernorm", "V": V,
         "floor": FLOOR, "loss": {"none": losses(none_idx)}}
    if norm_idx is not None:
        d["loss"]["layernorm"] = losses(norm_idx)
    return {**d, **kw}


def verdict(d: dict) -> tuple[str, list[Check]]:
    rows = M.judge(d, E.configure(M, "quick"))
    register.check_rows(M, rows, "quick")
    return E.verdict_of(rows), rows


def test_the_stable_index_is_the_highest_lr_that_closes_half_the_way():
    bar = M.trains_below(FLOOR, V)
    assert bar == pytest.approx(FLOOR + 0.5 * (math.log(V) - FLOOR))
    grid = [[3.0, 3.0, 1.5], [bar - 1e-9, 3.0, 1.5], [bar + 1e-9, 1.3, 1.5], [40.0, 1.2, 2.5]]
    np.testing.assert_array_equal(M.stable_index(grid, bar), [1, 3, 2])
    np.testing.assert_array_equal(M.stable_index([[3.0], [4.0]], bar), [-1])


def test_the_counted_row_passes_fails_or_is_inconclusive_on_hand_made_data():
    v, rows = verdict(data([6, 6, 6], [2, 2, 2]))
    assert v == E.REPRODUCED
    row = next(c for c in rows if c.id == "norm-allows-larger-learning-rates")
    assert row.estimate == 4.0 and (row.form, row.threshold, row.side) == (
        "superiority", [0.5], "above")
    assert "0.3, 0.3, 0.3" in row.measured and "0.003, 0.003, 0.003" in row.measured
    context = next(c for c in rows if c.id == "norm-top-of-grid-context")
    assert context.measured.startswith("3 of 3 seeds")
    assert verdict(data([1, 2, 1], [2, 3, 2]))[0] == E.NOT_REPRODUCED
    assert verdict(data([3, 2, 4], [2, 2, 2]))[0] == E.INCONCLUSIVE


def test_premise_first_a_no_norm_arm_stable_at_the_top_tests_nothing():
    v, rows = verdict(data(None, [6, 6, 6], tested=False))
    assert v == E.NOT_TESTED
    claim = next(c for c in rows if c.kind == E.CLAIM)
    assert claim.passed is None and claim.measured.startswith("not run: the premise")
    premise = next(c for c in rows if c.kind == E.PREMISE)
    assert premise.passed is False and premise.estimate == 0.0


def test_a_seed_that_trains_at_no_lr_counts_below_the_grid_as_amended():
    """The amended premise (stops before the top) holds with a seed at -1, and that seed's gap
    counts from -1, a lower bound; the band as first registered would have been inconclusive."""
    v, rows = verdict(data([6, 6, 6], [-1, 2, 2]))
    assert v == E.REPRODUCED
    premise = next(c for c in rows if c.kind == E.PREMISE)
    assert premise.passed is True and premise.estimate == pytest.approx(5.0)
    row = next(c for c in rows if c.id == "norm-allows-larger-learning-rates")
    assert row.estimate == pytest.approx(5.0) and "-, 0.003, 0.003" in row.measured
    (amendment,) = M.AMENDMENTS
    assert amendment.id == premise.id and amendment.before["form"] == "band"
    assert amendment.results_before["quick"]["status"] == "inconclusive"


def test_tiny_runs_end_to_end_and_the_norm_arm_waits_for_the_premise(monkeypatch, tmp_path):
    r = E.run_experiment("norm-and-learning-rate", size="tiny", seed=0, executor="serial",
                         plots=False).result
    premise = next(c for c in r.checks if c.kind == E.PREMISE)
    assert set(r.data["loss"]) == ({"none"} if premise.passed is not True
                                   else {"none", "layernorm"})
    let_through = Check(id="no-norm-stops-inside-the-grid", claim="", published="-",
                        measured="", rule="", passed=True, kind=E.PREMISE)
    monkeypatch.setattr(M, "_premise", lambda d: let_through)
    both = E.run_experiment("norm-and-learning-rate", size="tiny", seed=0, executor="serial",
                            plots=False).result.data
    assert set(both["loss"]) == {"none", "layernorm"}
    assert np.shape(both["loss"]["layernorm"]) == (3, 2) == np.shape(both["loss"]["none"])
    assert both["loss"]["none"] == r.data["loss"]["none"]  # the same runs: seeded
    monkeypatch.undo()
    files = M.plot(E.Result(card=M.CARD, setting="", measured="", checks=[], data=both),
                   tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000
    register.validate(M)


@pytest.mark.parametrize("overrides,message", [
    ({"lrs": (1e-3, 2e-3, 1e-2)}, "lrs: at least three increasing learning rates of the lab's"),
    ({"lrs": (1e-3, 1e-2)}, "lrs: at least three"),
    ({"norm": "none"}, "norm: the arm with a norm needs one"),
    ({"base.data": "pydoc"}, "base: the Markov source"),
])
def test_bad_configs_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        E.configure(M, "tiny", overrides=overrides)
