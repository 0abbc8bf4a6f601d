"""Intervals over seeds and the three-way decision against a threshold."""

import math

import numpy as np
import pytest

from normlab.lab import stats as S


def test_mean_interval_is_two_standard_errors():
    v = [1.0, 2.0, 3.0, 4.0]
    iv = S.mean_interval(v)
    se = np.std(v, ddof=1) / 2
    assert (
        iv.mean == 2.5 and math.isclose(iv.lo, 2.5 - 2 * se) and math.isclose(iv.hi, 2.5 + 2 * se)
    )
    assert iv.n == 4 and "2 se" in iv.method and iv.text() == "2.5 [1.21, 3.79] (n=4)"


def test_paired_interval_removes_the_shared_seed_effect():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 10, 8)  # large, shared by both arms
    a, b = seed_effect + 1.0 + rng.normal(0, 0.01, 8), seed_effect
    paired, unpaired_a = S.paired_interval(a, b), S.mean_interval(a)
    assert paired.lo > 0.9 and paired.hi < 1.1  # the difference is resolved ...
    assert unpaired_a.hi - unpaired_a.lo > 5  # ... where each arm alone is not


def test_bootstrap_interval_covers_the_mean_and_is_repeatable():
    v = np.random.default_rng(1).normal(3.0, 1.0, 20)
    a, b = S.bootstrap_interval(v), S.bootstrap_interval(v)
    assert a == b and a.lo < v.mean() < a.hi and a.method == "bootstrap 95%"
    assert S.bootstrap_interval(v, np.median).mean == np.median(v)


@pytest.mark.parametrize("lo, hi, threshold, side, want", [
    (1.0, 2.0, 0.5, "above", True), (1.0, 2.0, 2.5, "above", False),
    (1.0, 2.0, 1.5, "above", None), (1.0, 2.0, 2.5, "below", True),
    (1.0, 2.0, 0.5, "below", False), (1.0, 2.0, 1.5, "below", None),
])
def test_decide(lo, hi, threshold, side, want):
    assert S.decide(S.Interval(1.5, lo, hi, 3, "m"), threshold, side) is want


def test_outcome_reads_a_diverged_run_as_named():
    assert S.outcome(None, 5.0) == 5.0 and S.outcome(float("nan"), 5.0) == 5.0
    assert S.outcome(float("inf"), 5.0) == 5.0 and S.outcome(1.25, 5.0) == 1.25


@pytest.mark.parametrize("call, match", [
    (lambda: S.mean_interval([1.0]), "at least 2"),
    (lambda: S.mean_interval([1.0, float("nan")]), "finite"),
    (lambda: S.paired_interval([1.0, 2.0], [1.0, 2.0, 3.0]), "pair"),
    (lambda: S.decide(S.Interval(0, 0, 0, 2, "m"), 0.0, "left"), "side"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("lo, hi, want", [(0.2, 0.4, True), (-1.0, 0.05, False), (0.6, 2.0, False),
                                          (0.0, 0.3, None), (0.45, 0.9, None)])
def test_within_a_band(lo, hi, want):
    assert S.within(S.Interval(0.3, 0.2, 0.5, 4, "m"), 0.1, 0.5) is True
    band = S.Interval((lo + hi) / 2, lo, hi, 4, "m")
    assert S.within(band, 0.1, 0.5) is want
    with pytest.raises(ValueError, match="lo <= hi"):
        S.within(band, 1.0, 0.0)


def test_all_of():
    assert S.all_of([True, True]) is True and S.all_of([True, None]) is None
    assert S.all_of([None, False]) is False and S.all_of([]) is True


def test_slopes_recover_power_laws_seed_by_seed():
    x = np.array([2.0, 4.0, 8.0, 16.0])
    ys = np.stack([3.0 * x**-0.5, 0.5 * x**-0.4, 2.0 * x**-0.6])
    assert np.allclose(S.slopes(x, ys), [-0.5, -0.4, -0.6])
    iv = S.slope_interval(x, ys)
    assert iv.mean == pytest.approx(-0.5) and iv.lo < -0.5 < iv.hi and iv.n == 3
    assert np.allclose(S.slopes(x, np.stack([1 + 2 * x, 5 - x]), log=False), [2.0, -1.0])
    with pytest.raises(ValueError, match="positive"):
        S.slopes(x, -ys)
    with pytest.raises(ValueError, match="one curve"):
        S.slopes(x, ys[:, :3])


def test_bootstrap_rows_resamples_whole_seeds():
    rng = np.random.default_rng(2)
    a = rng.normal(2.0, 0.1, 12)
    rows = np.stack([a, a / 2.0], axis=1)  # two arms with a shared seed effect: ratio exactly 2
    iv = S.bootstrap_rows(rows, lambda r: r[:, 0].mean() / r[:, 1].mean())
    assert iv.mean == pytest.approx(2.0) and iv.hi - iv.lo < 1e-12  # pairing kept
    spread = S.bootstrap_rows(rows, lambda r: r[:, 0].mean())
    assert spread.lo < 2.0 < spread.hi and spread == S.bootstrap_rows(
        rows, lambda r: r[:, 0].mean()
    )
    with pytest.raises(ValueError, match="finite"):
        S.bootstrap_rows(np.array([[1.0], [np.nan]]), np.mean)


def test_intervals_from_standard_errors():
    iv = S.se_interval(1.0, 0.25, 100)
    assert (iv.lo, iv.hi, iv.n) == (0.5, 1.5, 100)
    d = S.difference_interval(3.0, 0.3, 1.0, 0.4, 50)
    assert d.mean == 2.0 and d.lo == pytest.approx(2.0 - 2 * 0.5) and d.hi == pytest.approx(3.0)
