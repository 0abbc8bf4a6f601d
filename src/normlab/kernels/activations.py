"""GELU (exact erf form and GPT-2's tanh form): a numba kernel with the contract and cache of
``normlab.functional.gelu_forward`` / ``gelu_backward``.

The reference computes erf with ``math.erf`` one Python call per value; here the same libm
``erf`` runs in a compiled loop, in float64 as in the reference, so the exact forward matches it
bitwise and runs about 20x faster. The tanh form's backward is plain arithmetic on the cache: one
pass (read x, s, dy; write dx).

numba calls libm's scalar tanh and exp (no SVML), while NumPy's are vectorized. The tanh form's
forward evaluates tanh in float32 with a rational approximation (``vmath.tanh_f32``: Eigen's, the
one PyTorch's and XLA's vectorized CPU tanh descend from; ``fast_tanh=False`` runs the bitwise
reference instead), which LLVM vectorizes: within 4 units of 2^-23 relative to float64 tanh over
every float32 input (tests/kernels/test_vmath.py), where NumPy's own is within 1 ulp; float64
inputs run the reference. The tanh form's float32 forward and its backward on float32 or float64
arrays are one plain loop LLVM vectorizes (the backward: the reference's lines, its bits), from
``PARALLEL_MIN`` values on the same loop a block at a time (in parallel where numba has threads;
the blocked kernels through the row access, which 16-bit formats still run, were 3-4x slower on
one thread: 4.9 against 1.6 ms forward and 9.7 against 2.7 ms backward on 4M values). The exact
form's backward (an exp per value) runs NumPy's. Measured on (1024, 512) float32 on one loaded
core: tanh form forward 0.9 ms in the kernel vs 5.7 ms in NumPy (of which 4.3 ms is np.tanh);
exact backward 2.7 ms in numba vs 0.7 ms in NumPy.

Memory passes of the kernels: forward reads x, writes y and s (Phi(x), the cache the backward
reads, as in the reference); backward reads x, s and dy, writes dx.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..functional import activations as _ref
from ..functional.activations import GeluCache
from ._common import PARALLEL_MIN, launch
from ._rows import F16_TABLE, kernel_view, load_row, native, out_row, store_row
from .vmath import tanh_f32

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
_SQRT_HALF = math.sqrt(0.5)
_BLOCK = 4096  # elements per work item


@njit(parallel=True, cache=True)
def _gelu_exact_fwd(x, xc, write_xc, s, y, fx, table):
    """Blocks of the flat x -> y = x * Phi(x) and s = Phi(x) (and x in the compute dtype when it
    is not already), erf in float64 as the reference's math.erf."""
    n = x.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
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
            phi = s.dtype.type(0.5 * (1.0 + math.erf(np.float64(v[j]) * _SQRT_HALF)))
            s[lo + j] = phi
            o[j] = v[j] * phi
        store_row(y[lo:hi], o, fx)  # write y


@njit(parallel=True, cache=True, error_model="numpy")
def _gelu_tanh_fwd(x, xc, write_xc, s, y, fx, table):
    """Blocks of the flat x -> s = t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3), and
    y = (t + 1) x / 2 (and x in float32 when it is not already), float32, every step but the
    tanh in the reference's order."""
    n = x.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
    f = np.float32
    c3 = f(_GELU_CUBIC * _SQRT_2_OVER_PI)
    c1 = f(_SQRT_2_OVER_PI)
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
            u = xj * xj
            u = u * c3
            u = u + c1
            u = u * xj
            t = tanh_f32(u)
            s[lo + j] = t
            o[j] = (t + f(1.0)) * xj * f(0.5)
        store_row(y[lo:hi], o, fx)  # write y


@njit(cache=True, error_model="numpy")
def _gelu_tanh_fwd_f32(x, s, y):
    """``_gelu_tanh_fwd`` for float32 x: one plain loop over the flat arrays (LLVM vectorizes
    it; the blocked kernel, through its row access, runs up to 4x slower)."""
    f = np.float32
    c3 = f(_GELU_CUBIC * _SQRT_2_OVER_PI)
    c1 = f(_SQRT_2_OVER_PI)
    for j in range(x.shape[0]):
        xj = x[j]
        u = xj * xj
        u = u * c3
        u = u + c1
        u = u * xj
        t = tanh_f32(u)
        s[j] = t
        y[j] = (t + f(1.0)) * xj * f(0.5)


@njit(cache=True)
def _gelu_tanh_bwd_plain(x, s, dy, dx):
    """``_gelu_tanh_bwd`` for float32 or float64 x, dy and dx of one dtype:
    one plain loop over the flat arrays, the same lines (LLVM vectorizes it; the blocked
    parallel kernel, through its row access, ran about 10x slower on the lab's sizes)."""
    one = x.dtype.type(1.0)
    half = x.dtype.type(0.5)
    c0 = x.dtype.type(_SQRT_2_OVER_PI)
    c3 = x.dtype.type(3 * _GELU_CUBIC)
    for j in range(x.shape[0]):
        xj = x[j]
        sj = s[j]
        du = c0 * (one + c3 * xj * xj)
        dx[j] = dy[j] * (half * (one + sj) + half * xj * (one - sj * sj) * du)


@njit(parallel=True, cache=True)
def _gelu_tanh_fwd_f32_blocks(x, s, y):
    """``_gelu_tanh_fwd_f32`` from PARALLEL_MIN on: blocks of the flat arrays, each the plain
    loop (its bits: every value is computed on its own)."""
    n = x.shape[0]
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        _gelu_tanh_fwd_f32(x[lo:hi], s[lo:hi], y[lo:hi])


@njit(parallel=True, cache=True)
def _gelu_tanh_bwd_plain_blocks(x, s, dy, dx):
    """``_gelu_tanh_bwd_plain`` from PARALLEL_MIN on, a block at a time (its bits)."""
    n = x.shape[0]
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        _gelu_tanh_bwd_plain(x[lo:hi], s[lo:hi], dy[lo:hi], dx[lo:hi])


@njit(parallel=True, cache=True)
def _gelu_tanh_bwd(x, s, dy, dx, fdy, fx, table):
    """dx = dy * ((1 + t) / 2 + x (1 - t^2) du/dx / 2), t = tanh(u) from the cache."""
    n = x.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
    one = x.dtype.type(1.0)
    half = x.dtype.type(0.5)
    c0 = x.dtype.type(_SQRT_2_OVER_PI)
    c3 = x.dtype.type(3 * _GELU_CUBIC)
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
            du = c0 * (one + c3 * xj * xj)
            o[j] = g[j] * (half * (one + sj) + half * xj * (one - sj * sj) * du)
        store_row(dx[lo:hi], o, fx)  # write dx


def gelu_forward(x: np.ndarray, *, approximate: str = "none",
                 fast_tanh: bool = True) -> tuple[np.ndarray, GeluCache]:
    """GELU, elementwise; as ``normlab.functional.gelu_forward`` (same cache). The tanh form of
    float32 inputs runs the kernel with the rational tanh (within 4 float32 units of tanh; 6x
    faster than NumPy's); ``fast_tanh=False`` runs the reference instead (NumPy's tanh, bit for
    bit)."""
    x = ck.float_array(x, "x")
    approximate = _ref._approximate(approximate)
    fast_tanh = ck.flag(fast_tanh, "fast_tanh")
    ct = ck.compute_dtype(x.dtype)
    if not native(x.dtype) or x.size == 0 or (approximate == "tanh"
                                              and (ct != np.float32 or not fast_tanh)):
        return _ref.gelu_forward(x, approximate=approximate)
    flat = np.ascontiguousarray(x).reshape(-1)
    xk, fx = kernel_view(flat)
    write_xc = x.dtype != ct
    xc = np.empty(flat.size, ct) if write_xc else flat
    s = np.empty(flat.size, ct)
    y = np.empty(flat.size, x.dtype)
    if approximate == "tanh" and x.dtype == ct:  # float32: the plain loop, in blocks if large
        if flat.size < PARALLEL_MIN:
            _gelu_tanh_fwd_f32(flat, s, y)
        else:
            launch(_gelu_tanh_fwd_f32_blocks, flat.size, flat, s, y)
    else:
        kernel = _gelu_tanh_fwd if approximate == "tanh" else _gelu_exact_fwd
        launch(kernel, flat.size, xk, xc, write_xc, s, kernel_view(y)[0], fx, F16_TABLE)
    return y.reshape(x.shape), GeluCache(xc.reshape(x.shape), s.reshape(x.shape), approximate,
                                         x.dtype)


def gelu_backward(dout: np.ndarray, cache: GeluCache) -> np.ndarray:
    """Gradient of GELU; as ``normlab.functional.gelu_backward``."""
    ck.cache(cache, GeluCache, "gelu")
    x, s, approximate, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    if approximate == "none" or not native(dtype) or x.size == 0:  # NumPy's exp is SIMD
        return _ref.gelu_backward(dout, cache)
    ct = x.dtype
    d = np.ascontiguousarray(dout if native(dout.dtype) else dout.astype(ct)).reshape(-1)
    dx = np.empty(x.size, dtype)
    if d.dtype == ct == dtype:  # the plain loop, in blocks if large
        xs = np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(s).reshape(-1)
        if x.size < PARALLEL_MIN:
            _gelu_tanh_bwd_plain(*xs, d, dx)
        else:
            launch(_gelu_tanh_bwd_plain_blocks, x.size, *xs, d, dx)
        return dx.reshape(x.shape)
    dyk, fdy = kernel_view(d)
    launch(_gelu_tanh_bwd, x.size, np.ascontiguousarray(x).reshape(-1),
           np.ascontiguousarray(s).reshape(-1), dyk, kernel_view(dx)[0], fdy, kernel_view(dx)[1],
           F16_TABLE)
    return dx.reshape(x.shape)
