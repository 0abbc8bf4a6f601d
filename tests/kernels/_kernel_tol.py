"""Tolerances for kernel-vs-reference comparisons, derived from the formats.

Element-wise results are compared bitwise. Where a row reduction is involved the kernel sums in a
different order than NumPy (vector partial sums vs pairwise), so the two differ by a few units of
the compute format; a result rounded to a lower format then differs by at most one unit of that
format (a rounding boundary crossed).
"""

import numpy as np

from normlab import _checks as ck
from normlab.kernels._common import ROW_BLOCK
from normlab.testing import assert_close, format_eps


def assert_rowwise(actual, expected, *, ulps_ct=8.0, scale=0.0, what="value"):
    """A row-reduction result: ``ulps_ct`` units of the compute dtype (float32/float64) relative
    to the result (and to ``scale``, the magnitude of the terms when they cancel, as in a
    gradient), or, in a lower output format, one unit of that format plus the same."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    ct = ck.compute_dtype(expected.dtype)
    e_ct = format_eps(ct)
    if ct == expected.dtype:
        assert_close(actual, expected, dtype=ct, ulps=ulps_ct, atol=ulps_ct * e_ct * scale,
                     what=what)
    else:
        e_t = format_eps(expected.dtype)
        assert_close(actual, expected, dtype=expected.dtype, ulps=1.0 + ulps_ct * e_ct / e_t,
                     atol=ulps_ct * e_ct * scale, what=what)


def assert_param_grad(actual, expected, terms, ct, *, what="dparam"):
    """A parameter gradient: a column sum over rows of ``terms`` (rows, C). The kernel sums blocks
    of ROW_BLOCK rows in the compute dtype and the blocks in float64; the reference sums in
    float64. The summation error bound is n eps(ct) sum|terms| with n = ROW_BLOCK + 1 for float32
    (n = rows + 1 for float64, summed sequentially), plus the final rounding to the result's
    dtype."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    terms = np.asarray(terms, np.float64).reshape(-1, np.shape(terms)[-1])
    n = ROW_BLOCK + 1 if np.dtype(ct) == np.float32 else terms.shape[0] + 1
    bound = n * format_eps(ct) * np.abs(terms).sum(axis=0)
    bound += format_eps(actual.dtype) * np.abs(expected.astype(np.float64))
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    bad = diff > bound
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {diff.size} columns out of the summation "
                           f"bound; worst excess {float(np.max(diff - bound)):.3g}")


def as64(a):
    return np.asarray(a).astype(np.float64)
