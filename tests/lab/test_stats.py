"""Intervals over seeds and the three-way decision against a threshold."""

import math

import numpy as np
import pytest

from normlab.lab import stats as S

# Student's t, 97.5% quantiles to 6 digits (any statistics table: Fisher & Yates; NIST/SEMATECH
# e-Handbook 1.3.6.7.2), and two one-sided points.
T_TABLE = [(0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 3, 3.182446),
           (0.975, 4, 2.776445), (0.975, 5, 2.570582), (0.975, 9, 2.262157),
           (0.975, 23, 2.068658), (0.975, 120, 1.979930), (0.95, 1, 6.313752),
           (0.995, 10, 3.169273), (0.9995, 2, 31.599055)]


@pytest.mark.parametrize("p, df, want", T_TABLE)
def test_t_quantile_matches_the_table(p, df, want):
    assert abs(S.t_quantile(p, df) - want) <= 5e-7  # the table's sixth decimal
    assert abs(S.t_quantile(1 - p, df) + want) <= 5e-7
    assert math.isclose(S.t_cdf(want, df), p, rel_tol=1e-6)


def test_t_quantile_tends_to_the_normal():
    assert math.isclose(S.t_quantile(0.975, 1e7), 1.959964, rel_tol=1e-6)


def test_mean_interval_is_student_t():
    v = [1.0, 2.0, 3.0, 4.0]
    iv = S.mean_interval(v)
    half = 3.182446 * np.std(v, ddof=1) / 2
    assert iv.mean == 2.5 and math.isclose(iv.hi - iv.mean, half, rel_tol=1e-6)
    assert math.isclose(iv.mean - iv.lo, half, rel_tol=1e-6)
    assert iv.n == 4 and "t se (95%)" in iv.method and iv.text() == "2.5 [0.446, 4.55] (n=4)"


@pytest.mark.parametrize("n", [2, 3, 5])
def test_mean_interval_covers_95_percent(n):
    """The coverage a 95% interval promises, over 20000 draws of n normal seeds (binomial
    s.e. 0.0015): mean +- 2 se would cover 70% at n = 2 and 82% at n = 3."""
    rng = np.random.default_rng(n)
    x = rng.normal(0.0, 1.0, (20000, n))
    half = S.t_factor(n) * x.std(axis=1, ddof=1) / math.sqrt(n)
    covered = (np.abs(x.mean(axis=1)) <= half).mean()
    assert abs(covered - 0.95) < 0.006


def test_paired_interval_removes_the_shared_seed_effect():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 10, 8)  # large, shared by both arms
    a, b = seed_effect + 1.0 + rng.normal(0, 0.01, 8), seed_effect
    paired, unpaired_a = S.paired_interval(a, b), S.mean_interval(a)
    assert paired.lo > 0.9 and paired.hi < 1.1  # the difference is resolved ...
    assert unpaired_a.hi - unpaired_a.lo > 5  # ... where each arm alone is not


def test_bootstrap_needs_ten_seeds():
    with pytest.raises(ValueError, match="at least 10 seeds"):
        S.bootstrap_interval([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="at least 10 seeds"):
        S.bootstrap_rows(np.ones((5, 3)), np.mean)


def test_difference_interval_is_welch():
    # equal standard errors: Welch's df = 2 (n - 1), the pooled two-sample t
    iv = S.difference_interval(1.0, 0.1, 0.5, 0.1, 5)
    assert math.isclose(iv.hi - iv.mean, S.t_quantile(0.975, 8) * math.hypot(0.1, 0.1))


def test_form_comparison_tells_log_from_linear():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    rng = np.random.default_rng(3)
    logs = np.log(x) * 0.7 + 1.0 + rng.normal(0, 0.02, (6, x.size))
    lines = 0.05 * x + 1.0 + rng.normal(0, 0.02, (6, x.size))
    log_iv = S.form_comparison(x, logs, claimed=np.log, other=lambda v: v)
    lin_iv = S.form_comparison(x, lines, claimed=np.log, other=lambda v: v)
    assert log_iv.lo > 0 and lin_iv.hi < 0 and log_iv.n == 6
    slopes, _ = S.form_fits(x, logs, np.log)
    assert np.allclose(slopes, 0.7, atol=0.03)
    with pytest.raises(ValueError, match="non-constant"):
        S.form_fits(x, logs, lambda v: np.ones_like(v))


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
    k = 1.984217  # t(0.975, 99)
    assert iv.lo == pytest.approx(1 - k * 0.25) and iv.hi == pytest.approx(1 + k * 0.25)
    assert iv.n == 100
    d = S.difference_interval(3.0, 0.3, 1.0, 0.4, 50)
    # Welch-Satterthwaite: df = 49 (0.09 + 0.16)^2 / (0.09^2 + 0.16^2) = 90.9
    k = S.t_quantile(0.975, 49 * 0.25**2 / (0.09**2 + 0.16**2))
    assert d.mean == 2.0 and d.lo == pytest.approx(2.0 - k * 0.5)
    assert d.hi == pytest.approx(2.0 + k * 0.5)
