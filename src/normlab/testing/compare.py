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


def errors(actual: Any, expected: Any) -> tuple[float, float]:
    """(max absolute error, norm-wise relative error = max abs error / max |expected|), in float64.

    NaNs in the same places count as equal; a NaN on one side only is an infinite error.
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
    scale = float(np.max(np.abs(e[finite]), initial=0.0))
    return max_abs, (max_abs / scale if scale > 0 else max_abs)


def assert_close(actual: Any, expected: Any, *, dtype: Any = None, ulps: float = 4.0,
                 atol: float = 0.0, what: str = "value") -> None:
    """Assert ``|actual - expected| <= ulps * eps(dtype) * max(|expected|, max|expected|/16) + atol``
    element-wise, with eps from ``dtype`` (default: actual's dtype), and report the worst element.
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
