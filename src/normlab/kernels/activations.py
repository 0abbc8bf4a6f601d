"""GELU (exact erf form and GPT-2's tanh form): a numba kernel with the contract and cache of
``normlab.functional.gelu_forward`` / ``gelu_backward``.

The reference computes erf with ``math.erf`` one Python call per value; here the same libm
``erf`` runs in a compiled loop, in float64 as in the reference, so the exact form matches it
bitwise. The tanh form and the exact form's backward use tanh and exp, whose NumPy (SIMD) and
libm versions may differ in the last bit.

Memory passes: forward reads x, writes y and s (Phi(x) or tanh(u), the cache the backward
reads, as in the reference); backward reads x, s and dy, writes dx.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..functional import activations as _ref
from ..functional.activations import GeluCache
from ._common import launch
from ._rows import F16_TABLE, kernel_view, load_row, native, out_row, store_row

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_BLOCK = 4096  # elements per work item


@njit(parallel=True, cache=True)
def _gelu_fwd(x, xc, write_xc, s, y, tanh_form, fx, table):
    """Blocks of the flat x -> y, s (and x in the compute dtype when it is not already)."""
    n = x.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
    one = s.dtype.type(1.0)
    half = s.dtype.type(0.5)
    c0 = s.dtype.type(_SQRT_2_OVER_PI)
    c1 = s.dtype.type(_GELU_CUBIC)
    for b in prange(nb):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        xbuf = np.empty(hi - lo, s.dtype)
        ybuf = np.empty(hi - lo, s.dtype)
        v = load_row(x[lo:hi], xbuf, fx, table)  # read x
        if write_xc:
            xc[lo:hi] = v
        o = out_row(y[lo:hi], ybuf)
        for j in range(hi - lo):
            xj = v[j]
            if tanh_form:
                t = np.tanh(c0 * (xj + c1 * xj * xj * xj))
                s[lo + j] = t
                o[j] = half * xj * (one + t)
            else:
                phi = s.dtype.type(0.5 * (1.0 + math.erf(np.float64(xj) * _SQRT_HALF)))
                s[lo + j] = phi
                o[j] = xj * phi
        store_row(y[lo:hi], o, fx)  # write y


@njit(parallel=True, cache=True)
def _gelu_bwd(x, s, dy, dx, tanh_form, fdy, fx, table):
    n = x.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
    one = x.dtype.type(1.0)
    half = x.dtype.type(0.5)
    c0 = x.dtype.type(_SQRT_2_OVER_PI)
    c3 = x.dtype.type(3 * _GELU_CUBIC)
    cpdf = x.dtype.type(_INV_SQRT_2PI)
    mhalf = x.dtype.type(-0.5)
    for b in prange(nb):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        gbuf = np.empty(hi - lo, x.dtype)
        obuf = np.empty(hi - lo, x.dtype)
        g = load_row(dy[lo:hi], gbuf, fdy, table)  # read dy
        o = out_row(dx[lo:hi], obuf)
        for j in range(hi - lo):
            xj = x[lo + j]
            sj = s[lo + j]
            if tanh_form:
                du = c0 * (one + c3 * xj * xj)
                local = half * (one + sj) + half * xj * (one - sj * sj) * du
            else:
                local = sj + xj * (cpdf * np.exp(mhalf * xj * xj))
            o[j] = g[j] * local
        store_row(dx[lo:hi], o, fx)  # write dx


def gelu_forward(x, approximate: str = "none"):
    """GELU, elementwise; as ``normlab.functional.gelu_forward`` (same cache)."""
    x = ck.float_array(x, "x")
    approximate = _ref._approximate(approximate)
    if not native(x.dtype) or x.size == 0:
        return _ref.gelu_forward(x, approximate)
    ct = ck.compute_dtype(x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1)
    xk, fx = kernel_view(flat)
    write_xc = x.dtype != ct
    xc = np.empty(flat.size, ct) if write_xc else flat
    s = np.empty(flat.size, ct)
    y = np.empty(flat.size, x.dtype)
    launch(_gelu_fwd, flat.size, xk, xc, write_xc, s, kernel_view(y)[0], approximate == "tanh", fx, F16_TABLE)
    return y.reshape(x.shape), GeluCache(xc.reshape(x.shape), s.reshape(x.shape), approximate,
                                         x.dtype)


def gelu_backward(dout, cache: GeluCache):
    """Gradient of GELU; as ``normlab.functional.gelu_backward``."""
    x, s, approximate, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    if not native(dtype) or x.size == 0:
        return _ref.gelu_backward(dout, cache)
    ct = x.dtype
    d = np.ascontiguousarray(dout if native(dout.dtype) else dout.astype(ct)).reshape(-1)
    dyk, fdy = kernel_view(d)
    dx = np.empty(x.size, dtype)
    launch(_gelu_bwd, x.size, np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(s).reshape(-1), dyk,
              kernel_view(dx)[0], approximate == "tanh", fdy, kernel_view(dx)[1], F16_TABLE)
    return dx.reshape(x.shape)
