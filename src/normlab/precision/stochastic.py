"""Statistical conformance of a stochastic rounding, against its closed forms.

A stochastic rounding of v between its two neighbours lo < hi on a format's grid returns hi with
probability p and lo otherwise. With exact probabilities p = f = (v - lo) / (hi - lo), so
E[q] = v (unbiased) and Var[q] = (hi - lo)^2 f (1 - f). Hardware and the emulators draw k random
bits (``quantize(..., sr_bits=k)``: k bits added below the last kept bit, the sum truncated), so
p = floor(2^k f) / 2^k: E[q] = lo + (hi - lo) p, biased toward zero by less than 2^-k of a
spacing, and Var[q] = (hi - lo)^2 p (1 - p).

:func:`sr_check` rounds ``draws`` copies of values placed in every one of ``2^k`` probability
cells (256 for exact probabilities) of several grid intervals (the subnormal one, normal ones,
the top one, negative ones) and tests, each at false-alarm rate ``alpha``:

* **support**: every result is lo or hi;
* **probabilities**: the up-counts of every cell against p, a chi-square over the cells;
* **bias**: the pooled mean of q - E[q] (E[q] the closed form), a z-score;
* **variance**: the pooled mean of (q - v)^2 against its closed form
  (1 - p)(v - lo)^2 + p (hi - v)^2, a z-score;
* **independence**: the lag-1 correlation of consecutive results (the values are laid out so
  that neighbours sit in different cells), a z-score: a random word reused for two values fails.

The draws are sized so that a rounding that drops one of its k random bits (p off by 2^-k in
half the cells) or repeats one (two of the k bits equal) fails by many standard deviations
(``tests/precision/test_stochastic_conformance.py`` shows both failing, and normlab's roundings
passing: ``quantize``, the fused kernel, the block dialects' element rounding, torch's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat, get_format
from .rounding import quantize


class SRCheck(NamedTuple):
    """The outcome of :func:`sr_check`: each statistic and its limit at ``alpha``."""

    draws: int  # values rounded in all
    cells: int  # probability cells (values x intervals)
    off_grid: int  # results that are neither neighbour (must be 0)
    chi2: float  # the cells' up-counts against p (df = cells with 0 < p < 1)
    df: int
    chi2_limit: float  # its 1 - alpha quantile
    z_bias: float  # pooled (q - E[q]) / sd
    z_variance: float  # pooled ((q - v)^2 - its expectation) / sd
    z_lag: float  # lag-1 correlation of the standardized up-indicators, times sqrt(n)
    z_limit: float  # the two-sided 1 - alpha normal quantile
    alpha: float

    @property
    def passed(self) -> bool:
        return (self.off_grid == 0 and self.chi2 <= self.chi2_limit
                and max(abs(self.z_bias), abs(self.z_variance), abs(self.z_lag)) <= self.z_limit)

    def summary(self) -> str:
        """One line: each statistic against its limit, and the verdict."""
        return (f"{'PASS' if self.passed else 'FAIL'}: {self.draws} draws in {self.cells} cells; "
                f"off grid {self.off_grid}; chi2 {self.chi2:.1f} (df {self.df}, limit "
                f"{self.chi2_limit:.1f}); z bias {self.z_bias:+.2f}, variance "
                f"{self.z_variance:+.2f}, lag-1 {self.z_lag:+.2f} (limit {self.z_limit:.2f}; "
                f"alpha {self.alpha:g} each)")


def normal_quantile(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation refined by one Halley step
    on erfc: relative error below 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1); got {p}")
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
         3.754408661907416e+00)
    q = min(p, 1 - p)
    if q < 0.02425:
        r = math.sqrt(-2 * math.log(q))
        x = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / \
            ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
        x = x if p < 0.5 else -x
    else:
        r = (p - 0.5) ** 2
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (p - 0.5) / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    e = 0.5 * math.erfc(-x / math.sqrt(2)) - p  # one Halley step
    u = e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - u / (1 + x * u / 2)


def chi2_quantile(p: float, df: int) -> float:
    """The chi-square quantile by Wilson and Hilferty's cube-root normal approximation (within
    0.5% of the exact value for df >= 50, which the checks here have)."""
    z = normal_quantile(p)
    k = 2.0 / (9 * df)
    return df * (1 - k + z * math.sqrt(k)) ** 3


def _intervals(fmt: FloatFormat) -> list[tuple[float, float]]:
    """Grid intervals (lo, hi) to test in: the first subnormal one, one at 1, the top one, and
    the one at 1 negated (hi below lo in value: rounding away from zero is 'up')."""
    v = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())])) if fmt.bits <= 16 else None
    one_lo = 1.0 if fmt.min_normal <= 1 <= fmt.max_finite else fmt.min_normal
    one_hi = one_lo + 2.0 ** (math.floor(math.log2(one_lo)) - fmt.mantissa_bits)
    top_lo = fmt.max_finite - 2.0 ** (fmt.emax - fmt.mantissa_bits)
    out = [(one_lo, one_hi), (top_lo, fmt.max_finite), (-one_lo, -one_hi)]
    if fmt.zero and fmt.subnormals and fmt.mantissa_bits > 0:
        out.insert(0, (0.0, fmt.min_subnormal))
    if v is not None and v.size > 3:  # one more, in the middle of the grid
        i = v.size // 2
        out.append((float(v[i]), float(v[i + 1])))
    return out


def sr_check(round_fn: Callable[[Array, np.random.Generator], Any], fmt: Any, *,
             sr_bits: int | None = None, draws: int = 1 << 14, alpha: float = 1e-6,
             seed: int = 0) -> SRCheck:
    """Test a stochastic rounding to ``fmt`` against its closed forms (module docstring).

    Args:
        round_fn: ``round_fn(v, rng)`` rounds the float32 array v stochastically with the
            Generator rng; it returns the results (v's shape), or ``(results, scaled)`` where
            ``scaled`` are the values actually rounded (a block dialect's v times its encode
            scale), which the probabilities are then computed from.
        fmt: the format rounded to.
        sr_bits: the k random bits the rounding is documented to draw (None: exact
            probabilities).
        draws: values rounded per probability cell.
        alpha: the false-alarm rate of each statistic (the limits' level).
        seed: the Generator's seed.

    Returns:
        SRCheck; ``passed`` is the verdict, ``summary()`` one line.
    """
    fmt = get_format(fmt)
    n = ck.integer(draws, "draws", lo=64, hi=1 << 24)
    k = None if sr_bits is None else ck.integer(sr_bits, "sr_bits", lo=1, hi=32)
    alpha = ck.probability(alpha, "alpha")
    cells = 1 << min(k or 8, 8)
    rng = np.random.default_rng(seed)
    acc = _Accumulator()
    for lo, hi in _intervals(fmt):
        f = (np.arange(cells) + 0.5) / cells  # cell midpoints
        v = np.float32(lo + f * (hi - lo))
        x = np.tile(v, n)  # neighbours in different cells
        out = round_fn(x, rng)
        q, scaled = out if isinstance(out, tuple) else (out, x)
        acc.add(np.asarray(q, np.float64).reshape(n, cells),
                np.asarray(scaled, np.float64).reshape(n, cells)[0], lo, hi, k)
    zl = normal_quantile(1 - alpha / 2)
    return acc.result(chi2_quantile(1 - alpha, max(acc.df, 1)), zl, alpha)


class _Accumulator:
    """The statistics of :func:`sr_check`, summed over intervals."""

    def __init__(self) -> None:
        self.draws = self.cells = self.off = self.df = 0
        self.chi2 = self.bias = self.bias_var = self.mse = self.mse_var = 0.0
        self.lag = 0.0
        self.lag_n = 0

    def add(self, q: Array, v: Array, lo: float, hi: float, k: int | None) -> None:
        """q (draws, cells) results for the values v (cells) between lo and hi."""
        n, c = q.shape
        self.draws += q.size
        self.cells += c
        up = q == hi
        self.off += int(np.count_nonzero(~(up | (q == lo))))
        f = (v - lo) / (hi - lo)
        p = f if k is None else np.floor(np.ldexp(f, k)) / 2.0**k
        live = (p > 0) & (p < 1)
        count = up.sum(axis=0)
        var = np.where(live, n * p * (1 - p), 1.0)
        self.chi2 += float(np.sum(np.where(live, (count - n * p) ** 2 / var, 0.0)))
        # deterministic cells: any result on the wrong side is a failure of its own
        self.off += int(np.sum(np.where(p == 0, count, 0)) + np.sum(np.where(p == 1, n - count,
                                                                              0)))
        self.df += int(live.sum())
        span = hi - lo
        self.bias += float(np.sum(q - (lo + span * p)))
        self.bias_var += float(n * np.sum(span**2 * p * (1 - p)))
        a, b = (v - lo) ** 2, (hi - v) ** 2
        self.mse += float(np.sum((q - v) ** 2 - ((1 - p) * a + p * b)))
        self.mse_var += float(n * np.sum(p * (1 - p) * (b - a) ** 2))
        sd = np.sqrt(np.where(live, p * (1 - p), 1.0))
        z = np.where(live, (up - p) / sd, 0.0).reshape(-1)
        self.lag += float(np.dot(z[:-1], z[1:]))
        self.lag_n += int(np.count_nonzero(z[:-1] * z[1:] != 0) or 1)

    def result(self, chi2_limit: float, z_limit: float, alpha: float) -> SRCheck:
        def z(s: float, var: float) -> float:
            return s / math.sqrt(var) if var > 0 else 0.0

        return SRCheck(self.draws, self.cells, self.off, self.chi2, self.df, chi2_limit,
                       z(self.bias, self.bias_var), z(self.mse, self.mse_var),
                       self.lag / math.sqrt(max(self.lag_n, 1)), z_limit, alpha)


def quantize_sr(fmt: Any, sr_bits: int | None = None,
                quantizer: Callable | None = None) -> Callable[[Array, np.random.Generator],
                                                               Array]:
    """``round_fn`` for :func:`sr_check` from ``quantize`` (or another function with its
    signature, e.g. ``normlab.kernels.quantize``) with stochastic rounding."""
    q = quantizer or quantize

    def run(v: Array, rng: np.random.Generator) -> Array:
        if sr_bits is None:
            return q(v, fmt, rounding="stochastic", rng=rng)
        return q(v, fmt, rounding="stochastic", rng=rng, sr_bits=sr_bits)

    return run
