"""Comparison helpers whose tolerances come from the number format, never from one fixed atol."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np


def format_eps(dtype: Any) -> float:
    """Machine epsilon (the gap above 1.0) of a NumPy or ml_dtypes float dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float(np.finfo(dtype).eps)
    return float(ml_dtypes.finfo(dtype).eps)


def errors(actual: Any, expected: Any, scale: float = 0.0) -> tuple[float, float]:
    """(max absolute error, norm-wise relative error = max abs error / max(max |expected|, scale)),
    in float64.

    ``scale`` is the natural magnitude of the result when it is smaller than its parts (a sum with
    cancellation, say): relative errors are then taken against the parts, the condition number's
    way, instead of against a tiny result. NaNs in the same places count as equal; a NaN on one
    side only is an infinite error.
    """
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    if a.shape != e.shape:
        raise ValueError(f"shapes differ: actual {a.shape}, expected {e.shape}")
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & (a == e)
    diff = np.where(both_nan | same_inf, 0.0, np.abs(a - e))
    diff = np.where(np.isnan(diff), np.inf, diff)
    max_abs = float(np.max(diff, initial=0.0))
    finite = np.isfinite(e)
    scale = max(float(np.max(np.abs(e[finite]), initial=0.0)), float(scale))
    return max_abs, (max_abs / scale if scale > 0 else max_abs)


def assert_close(actual: Any, expected: Any, *, dtype: Any = None, ulps: float = 4.0,
                 atol: float = 0.0, what: str = "value") -> None:
    """Assert ``|actual - expected| <= tol`` element-wise and report the worst element, where
    ``tol = ulps * eps(dtype) * max(|expected|, max|expected|/16) + atol`` with eps from ``dtype``
    (default: actual's dtype).
    """
    dtype = np.asarray(actual).dtype if dtype is None else np.dtype(dtype)
    eps = format_eps(dtype)
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shapes differ: {a.shape} vs {e.shape}")
    if not np.array_equal(np.isnan(a), np.isnan(e)):
        raise AssertionError(f"{what}: NaN in different places")
    ok = np.isnan(e)
    ref = np.abs(np.where(ok, 0.0, e))
    floor = float(np.max(ref, initial=0.0)) / 16.0
    tol = ulps * eps * np.maximum(ref, floor) + atol
    diff = np.abs(np.where(ok, 0.0, a - e))
    bad = diff > tol
    if np.any(bad):
        i = np.unravel_index(np.argmax(np.where(bad, diff - tol, -np.inf)), a.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {a.size} elements out of tolerance "
            f"({ulps} ulps of {dtype}, eps={eps:.3g}, atol={atol:.3g}); worst at {i}: "
            f"actual {a[i]!r}, expected {e[i]!r}, |diff| {diff[i]:.3g} > tol {tol[i]:.3g}"
        )


def assert_no_worse_than(actual: Any, baseline: Any, reference: Any, *, dtype: Any = None,
                         factor: float = 2.0, ulps: float = 8.0, scale: float = 0.0,
                         what: str = "value") -> None:
    """Assert that ``actual`` is at most ``factor`` times as far from ``reference`` as
    ``baseline`` is, plus ``ulps`` units of the format's epsilon (norm-wise, relative to
    max(max |reference|, scale); see ``errors``).

    The pattern of flash-attention's tests: when no result is exact (a low-precision op), compare
    two implementations by their distance to a high-precision reference instead of to each other.
    """
    dtype = np.asarray(actual).dtype if dtype is None else np.dtype(dtype)
    ours = errors(actual, reference, scale)[1]
    theirs = errors(baseline, reference, scale)[1]
    bound = factor * theirs + ulps * format_eps(dtype)
    if not ours <= bound:
        raise AssertionError(
            f"{what}: relative error {ours:.3g} vs the reference exceeds {factor} x the baseline's "
            f"{theirs:.3g} + {ulps} eps({dtype}) = {bound:.3g}"
        )
