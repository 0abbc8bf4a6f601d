"""Intervals over seeds, and checks decided from them.

A training or random quantity is a distribution, not a number: a check on it is decided from
several seeds with an interval, and the rule compares the interval with the threshold, never a
point. Over ``n`` seeds with mean ``m`` and sample standard deviation ``s``::

    mean_interval:   m +- 2 s / sqrt(n)      (covers the mean of normal draws 82% of the time
                                              at n = 3, 88% at 5, 91% at 8, 94% at 24: a lenient
                                              interval at few seeds, as the lab's rules state)
    paired_interval: the mean_interval of a_i - b_i, arms that share seed i
    bootstrap:       percentiles (2.5, 97.5) of the statistic over resamples of the seeds
                     (bootstrap_rows: whole rows resampled, for fits and ratios of means)

An interval entirely beyond the threshold passes, entirely short of it fails, and one that
straddles it is *inconclusive* (:func:`decide`; :func:`within` for a band [lo, hi]). A
diverged run is not NaN: :func:`outcome` reads it as the value its caller names (the loss at
initialisation, say), so a comparison is never silently false.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .formatting import fmt

INCONCLUSIVE = "inconclusive"
ABOVE, BELOW = "above", "below"


class Interval(NamedTuple):
    """An estimate over seeds: the centre, the interval [lo, hi], the seeds it saw, and how."""

    mean: float
    lo: float
    hi: float
    n: int
    method: str  # "mean +- 2 se", "paired mean +- 2 se", "bootstrap 95%"

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


def mean_interval(values: Sequence[float] | np.ndarray) -> Interval:
    """Mean +- 2 standard errors over seeds (sample standard deviation, ddof=1)."""
    v = _values(values, "values")
    m, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
    return Interval(m, m - 2 * se, m + 2 * se, int(v.size), "mean +- 2 se")


def standard_error(values: Any, axis: int = 0) -> np.ndarray:
    """The standard error of the mean along ``axis``: the sample standard deviation (ddof=1)
    over sqrt(n) (NaN from a single value: callers that plot one seed draw no bar). The one
    formula behind every mean +- 2 se of the lab's data and error bars."""
    v = np.asarray(values)
    return v.std(axis=axis, ddof=1) / np.sqrt(v.shape[axis])


def se_interval(mean: float, se: float, n: int) -> Interval:
    """mean +- 2 se from a known standard error (of ``n`` draws)."""
    return Interval(float(mean), float(mean - 2 * se), float(mean + 2 * se), int(n),
                    "mean +- 2 se")


def difference_interval(a: float, se_a: float, b: float, se_b: float, n: int) -> Interval:
    """The interval of a - b for independent estimates: (a - b) +- 2 sqrt(se_a^2 + se_b^2)."""
    return se_interval(a - b, math.hypot(se_a, se_b), n)._replace(method="difference +- 2 se")


def paired_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> Interval:
    """The interval of the difference a - b, seed by seed (arms that share seeds)."""
    va, vb = _values(a, "a"), _values(b, "b")
    if va.shape != vb.shape:
        raise ValueError(f"a and b must pair seed by seed, got {va.size} and {vb.size} values")
    return mean_interval(va - vb)._replace(method="paired mean +- 2 se")


def bootstrap_interval(values: Sequence[float] | np.ndarray,
                       statistic: Callable[[np.ndarray], float] = np.mean,
                       *, resamples: int = 2000, seed: int = 0) -> Interval:
    """A percentile bootstrap 95% interval of ``statistic`` over the seeds (fixed resampling seed,
    so a result is judged alike every time)."""
    v = _values(values, "values")
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
    lo, hi = _percentile_bootstrap(R, statistic, resamples, seed)
    return Interval(float(statistic(R)), lo, hi, int(R.shape[0]), "bootstrap 95% over seeds")


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
    """:func:`slopes`, one per seed, as a mean +- 2 se interval over the seeds."""
    return mean_interval(slopes(x, ys, log=log))._replace(method="slope per seed, mean +- 2 se")


def outcome(value: float | None, diverged_as: float) -> float:
    """A run's value, or ``diverged_as`` when the run diverged (None, NaN or inf)."""
    return diverged_as if value is None or not math.isfinite(value) else float(value)
