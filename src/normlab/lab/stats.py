"""Intervals over seeds, and checks decided from them.

A training or random quantity is a distribution, not a number: a check on it is decided from
several seeds with an interval, and the rule compares the interval with the threshold, never a
point. Every interval is a two-sided 95% interval (:data:`LEVEL`). Over ``n`` seeds with mean
``m`` and sample standard deviation ``s``::

    mean_interval:   m +- t(n-1) s / sqrt(n)   Student-t: t(n-1) is the 97.5% quantile of
                                               Student's t with n-1 degrees of freedom
                                               (12.7 at n = 2, 4.30 at 3, 2.78 at 5, 2.07 at 24)
    paired_interval: the mean_interval of a_i - b_i, arms that share seed i
    bootstrap:       percentiles (2.5, 97.5) of the statistic over resamples of whole seeds,
                     only from n >= 10 seeds (:data:`BOOTSTRAP_MIN`: below that a percentile
                     bootstrap covers far less than it says)

An interval entirely beyond the threshold passes, entirely short of it fails, and one that
straddles it is *inconclusive* (:func:`decide`; :func:`within` for a band [lo, hi]). A
diverged run is not NaN: :func:`outcome` reads it as the value its caller names (the loss at
initialisation, say), so a comparison is never silently false. A claim that one curve grows like
one form and not another is a model comparison (:func:`form_comparison`): each form fitted to
each seed's curve, and the paired interval of the difference of their information criteria.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .formatting import fmt

INCONCLUSIVE = "inconclusive"
ABOVE, BELOW = "above", "below"
LEVEL = 0.95  # the two-sided confidence level of every interval the lab reads
BOOTSTRAP_MIN = 10  # the fewest seeds a percentile bootstrap is drawn from


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    ln = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
          + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1, df > 0):
    the root of :func:`t_cdf` by bisection to double precision."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def t_factor(n: int) -> float:
    """The half-width of the lab's interval in standard errors at ``n`` seeds: the two-sided
    :data:`LEVEL` quantile of Student's t with n - 1 degrees of freedom."""
    if n < 2:
        raise ValueError(f"an interval needs at least 2 seeds, got {n}")
    return t_quantile(0.5 + LEVEL / 2, n - 1)


class Interval(NamedTuple):
    """An estimate over seeds: the centre, the interval [lo, hi], the seeds it saw, and how."""

    mean: float
    lo: float
    hi: float
    n: int
    method: str  # "mean +- t se (95%)", "paired mean +- t se (95%)", "bootstrap 95% ..."

    def text(self, digits: int = 3) -> str:
        """'0.412 [0.301, 0.523] (n=5)': each number through :func:`~.formatting.fmt` with the
        spec ``.{digits}g``, Python's general form, fixed down to 1e-4 ('0.000182'): the form the
        committed results' intervals are written in (fmt's own rule would write 1.82e-04)."""
        spec = f".{digits}g"
        return (f"{fmt(self.mean, spec=spec)} [{fmt(self.lo, spec=spec)}, "
                f"{fmt(self.hi, spec=spec)}] (n={self.n})")


def _values(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"{name}: an interval needs at least 2 seeds, got {v.size}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name}: values must be finite (read a diverged run with outcome() "
                         f"first), got {v.tolist()}")
    return v


T_METHOD = "mean +- t se (95%)"


def mean_interval(values: Sequence[float] | np.ndarray) -> Interval:
    """The Student-t 95% interval of the mean over seeds: mean +- t(n-1) standard errors
    (sample standard deviation, ddof=1)."""
    v = _values(values, "values")
    m, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
    k = t_factor(v.size)
    return Interval(m, m - k * se, m + k * se, int(v.size), T_METHOD)


def standard_error(values: Any, axis: int = 0) -> np.ndarray:
    """The standard error of the mean along ``axis``: the sample standard deviation (ddof=1)
    over sqrt(n) (NaN from a single value: callers that plot one seed draw no bar). The one
    formula behind every interval of the lab's data and its error bars."""
    v = np.asarray(values)
    return v.std(axis=axis, ddof=1) / np.sqrt(v.shape[axis])


def se_interval(mean: float, se: float, n: int) -> Interval:
    """mean +- t(n-1) se from a known standard error of the mean of ``n`` seeds."""
    k = t_factor(int(n))
    return Interval(float(mean), float(mean - k * se), float(mean + k * se), int(n), T_METHOD)


def difference_interval(a: float, se_a: float, b: float, se_b: float, n: int) -> Interval:
    """The interval of a - b for independent estimates of ``n`` seeds each:
    (a - b) +- t sqrt(se_a^2 + se_b^2), with Welch-Satterthwaite's degrees of freedom."""
    se = math.hypot(se_a, se_b)
    va, vb = se_a * se_a, se_b * se_b
    df = (n - 1) * (va + vb) ** 2 / (va * va + vb * vb) if va + vb > 0 else n - 1
    k = t_quantile(0.5 + LEVEL / 2, max(df, n - 1))
    return Interval(float(a - b), float(a - b - k * se), float(a - b + k * se), int(n),
                    "difference +- t se (95%, Welch)")


def paired_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> Interval:
    """The interval of the difference a - b, seed by seed (arms that share seeds)."""
    va, vb = _values(a, "a"), _values(b, "b")
    if va.shape != vb.shape:
        raise ValueError(f"a and b must pair seed by seed, got {va.size} and {vb.size} values")
    return mean_interval(va - vb)._replace(method="paired " + T_METHOD)


def bootstrap_interval(values: Sequence[float] | np.ndarray,
                       statistic: Callable[[np.ndarray], float] = np.mean,
                       *, resamples: int = 2000, seed: int = 0) -> Interval:
    """A percentile bootstrap 95% interval of ``statistic`` over the seeds (fixed resampling seed,
    so a result is judged alike every time), from at least :data:`BOOTSTRAP_MIN` seeds."""
    v = _values(values, "values")
    _bootstrap_size(v.size)
    lo, hi = _percentile_bootstrap(v, statistic, resamples, seed)
    return Interval(float(statistic(v)), lo, hi, int(v.size), "bootstrap 95%")


def bootstrap_rows(rows: Any, statistic: Callable[[np.ndarray], float], *, resamples: int = 2000,
                   seed: int = 0) -> Interval:
    """A percentile bootstrap 95% interval of ``statistic(rows)``, where ``rows`` holds one row
    per seed (a curve, or several arms' values side by side) and the seeds are resampled whole
    (a fit or a ratio of means over the seeds, with the arms kept paired)."""
    R = np.asarray(rows, dtype=np.float64)
    if R.ndim < 1 or R.shape[0] < 2:
        raise ValueError(f"rows: an interval needs at least 2 seeds, got shape {R.shape}")
    if not np.isfinite(R).all():
        raise ValueError("rows: values must be finite (read a diverged run with outcome() first)")
    _bootstrap_size(R.shape[0])
    lo, hi = _percentile_bootstrap(R, statistic, resamples, seed)
    return Interval(float(statistic(R)), lo, hi, int(R.shape[0]), "bootstrap 95% over seeds")


def _bootstrap_size(n: int) -> None:
    if n < BOOTSTRAP_MIN:
        raise ValueError(f"a percentile bootstrap needs at least {BOOTSTRAP_MIN} seeds, got {n}: "
                         f"use a Student-t interval (mean_interval, paired_interval) or the "
                         f"per-seed statistic's mean_interval")


def _percentile_bootstrap(R: np.ndarray, statistic: Callable[[np.ndarray], float],
                          resamples: int, seed: int) -> tuple[float, float]:
    """The one bootstrap: ``resamples`` draws of R's rows (seeds) with replacement from a fixed
    seed, ``statistic`` of each, and the (2.5, 97.5) percentiles of those."""
    n = R.shape[0]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    stats = np.array([statistic(R[i]) for i in idx], dtype=np.float64)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def decide(interval: Interval, threshold: float, side: str = ABOVE) -> bool | None:
    """True when the whole interval is on ``side`` of ``threshold`` ("above": lo > threshold;
    "below": hi < threshold), False when the whole interval is on the other side, None
    (inconclusive) when it straddles the threshold."""
    if side not in (ABOVE, BELOW):
        raise ValueError(f"side must be 'above' or 'below', got {side!r}")
    lo, hi = (interval.lo, interval.hi) if side == ABOVE else (-interval.hi, -interval.lo)
    t = threshold if side == ABOVE else -threshold
    if lo > t:
        return True
    if hi <= t:
        return False
    return None


def within(interval: Interval, lo: float, hi: float) -> bool | None:
    """True when the whole interval lies in the band [lo, hi], False when the whole interval is
    outside it, None (inconclusive) when it crosses an edge."""
    if not lo <= hi:
        raise ValueError(f"the band needs lo <= hi, got [{lo}, {hi}]")
    if lo <= interval.lo and interval.hi <= hi:
        return True
    if interval.hi < lo or interval.lo > hi:
        return False
    return None


def all_of(decisions: Iterable[bool | None]) -> bool | None:
    """Several decisions as one: False when any fails, True when all pass, else None."""
    decisions = list(decisions)
    if any(d is False for d in decisions):
        return False
    return True if all(d is True for d in decisions) else None


def slopes(x: Sequence[float] | np.ndarray, ys: Sequence[Sequence[float]] | np.ndarray, *,
           log: bool = True) -> np.ndarray:
    """The least-squares slope of each row of ``ys`` (a seed's curve over ``x``) against x.
    ``log``: the slope of ln y against ln x (a power law's exponent)."""
    xv = np.asarray(x, dtype=np.float64)
    Y = np.asarray(ys, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != xv.size or xv.size < 2:
        raise ValueError(f"ys must hold one curve of {xv.size} >= 2 points per seed, got shape "
                         f"{Y.shape}")
    if log:
        if (xv <= 0).any() or (Y <= 0).any():
            raise ValueError("a log-log slope needs positive x and y")
        xv, Y = np.log(xv), np.log(Y)
    xc = xv - xv.mean()
    return (Y - Y.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)


def slope_interval(x: Sequence[float] | np.ndarray, ys: Sequence[Sequence[float]] | np.ndarray, *,
                   log: bool = True) -> Interval:
    """:func:`slopes`, one per seed, as a Student-t interval over the seeds."""
    return mean_interval(slopes(x, ys, log=log))._replace(method="slope per seed, " + T_METHOD)


def outcome(value: float | None, diverged_as: float) -> float:
    """A run's value, or ``diverged_as`` when the run diverged (None, NaN or inf)."""
    return diverged_as if value is None or not math.isfinite(value) else float(value)


def form_fits(x: Sequence[float] | np.ndarray, ys: Sequence[Sequence[float]] | np.ndarray,
              basis: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares fits of y = a + b basis(x) to each seed's curve (a row of ``ys``): the
    slopes b, one per seed, and the residual sums of squares."""
    xv = np.asarray(x, dtype=np.float64)
    Y = np.asarray(ys, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != xv.size or xv.size < 3:
        raise ValueError(f"ys must hold one curve of {xv.size} >= 3 points per seed, got shape "
                         f"{Y.shape}")
    if not np.isfinite(Y).all():
        raise ValueError("ys: values must be finite (read a diverged run with outcome() first)")
    f = np.asarray(basis(xv), dtype=np.float64)
    if f.shape != xv.shape or not np.isfinite(f).all() or np.ptp(f) == 0:
        raise ValueError("basis must give a finite, non-constant value at every x")
    A = np.stack([np.ones_like(f), f], axis=1)
    coef, *_ = np.linalg.lstsq(A, Y.T, rcond=None)
    rss = ((Y.T - A @ coef) ** 2).sum(axis=0)
    return coef[1], rss


def form_comparison(x: Sequence[float] | np.ndarray, ys: Sequence[Sequence[float]] | np.ndarray,
                    claimed: Callable[[np.ndarray], np.ndarray],
                    other: Callable[[np.ndarray], np.ndarray]) -> Interval:
    """"The curve grows like ``claimed``, not like ``other``" as a model comparison over seeds.
    Each form y = a + b f(x) (two parameters each) is fitted to each seed's curve; the per-seed
    difference of their Akaike criteria, AIC_other - AIC_claimed = m ln(RSS_other / RSS_claimed)
    over m points, is positive where the claimed form fits better. The Student-t interval of that
    difference over the seeds: the claim holds when it lies wholly above 0."""
    _, rss_c = form_fits(x, ys, claimed)
    _, rss_o = form_fits(x, ys, other)
    m = np.asarray(x).size
    tiny = np.finfo(np.float64).tiny
    delta = m * np.log(np.maximum(rss_o, tiny) / np.maximum(rss_c, tiny))
    return mean_interval(delta)._replace(method="paired AIC difference, " + T_METHOD)
