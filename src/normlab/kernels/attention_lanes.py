"""Attention with every sequence in a SIMD lane: the products, the soft-cap, the causal mask and
the softmax of all the sequences of a call (an ensemble's members, batch rows and heads) in one
compiled call forward and one backward.

At the lab's shapes a head's matrices are 16 x 8: as separate sgemm calls (NumPy's batched
matmul, one call per batch row and head) each product costs its call, not its arithmetic. Here
the sequences n = (b, h) are the lanes of the vectors instead: a block of sequences (whole batch
rows, about ``LANES``) is gathered into (T, D, lanes) buffers whose last axis runs over the
sequences, and every step is element-wise across that axis, a loop LLVM vectorizes whatever T and
D are:

    s[i, j]  = scale sum_d q[i, d] k[j, d]          d = 0, 1, ..., D - 1 in turn
    s[i, j] <- cap tanh(s[i, j] / cap)              with a soft-cap (``vmath.vtanh``)
    p[i, j]  = exp(s[i, j] - max_j s) / sum_j ...   j <= i when causal (``vmath.vexp``)
    out[i]   = sum_j p[i, j] v[j]                   j = 0, 1, ... in turn

and upwards, with dp = dy v^T and ds = p (dp - sum_j p dp) (1 - tanh^2) scale:

    dq[i] = sum_j ds[i, j] k[j]      dk[j] = sum_i ds[i, j] q[i]      dv[j] = sum_i p[i, j] dy[i]

Every sum runs in the order written, one IEEE operation at a time (no fast-math: no
reassociation, no contraction into FMA), so a sequence's result does not depend on its lane, on
how many sequences the call has, or on the vector width: an ensemble member's rows are its single
run's bit for bit. The order differs from a BLAS call's, so the results agree with
``normlab.functional.attention`` within a tolerance derived from the format
(tests/kernels/test_kernel_attention.py). Causal rows stop at their diagonal, forward and
backward, so the masked half of the (T, T) logits is never computed.

Grouped key/value heads (Hkv = H / G): query head h's lane reads key/value head h // G (the
gather's offsets say where), and dk, dv are summed over each group's G query heads (g = 0, 1, ...
in turn) as they are written back.

Memory passes: forward reads q, k and v (any strides: the fused projection's column blocks) into
lane arrays (T, D, lanes), which it keeps for the backward, and writes p (T, T, lanes) (and the
cap's tanh) and the output; backward reads the lane arrays, p and dy, and writes dq, dk and dv
(into the fused projection's gradient columns when given), a block of lanes at a time, so that a
block's rows stay in the caches between the gather and the write-back. The attention cache holds
q, k, v and p as (B, H, T, ...) views of the lane arrays, so that the reference's backward takes
the kernel's cache; a reference cache given to this backward is gathered into lanes first.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np
from numba import njit
from numpy.lib.stride_tricks import as_strided

from .vmath import vexp, vtanh

LANES = 64  # about this many sequences per block (whole batch rows): vectors of a few registers

# id(lane array of p) -> whether its forward was causal (the cache does not say; a backward of a
# p it does not know runs every key, which is exact: p = 0 where the mask was)
_CAUSAL: dict[int, bool] = {}


# ---- a block's lanes in and out ----------------------------------------------------------------
# An operand is ``(flat, off, st, sx)``: a (B, Hx, T, X) array seen as the 1-D ``flat`` from its
# first element, lane l's row t, column x at flat[off[l] + t st + x sx]. Offsets are unsigned, so
# that the kernels index without negative-index checks (which keep LLVM from vectorizing).
@njit(cache=True, error_model="numpy")
def _gather(op, lo, n, out):
    """out[t, x, l] = lane lo + l's (t, x) for l < n, 0 past n: a block's lanes (16 at a time,
    each lane's row read along x: plain loads, no gather instructions)."""
    flat, off, st, sx = op
    T, X, NB = out.shape
    for l0 in range(0, n, 16):
        for t in range(T):
            for lane in range(l0, min(n, l0 + 16)):
                o = off[lo + lane] + np.uint64(t * st)
                for x in range(X):
                    out[t, x, lane] = flat[o + np.uint64(x * sx)]
    for t in range(T):
        for x in range(X):
            for lane in range(n, NB):
                out[t, x, lane] = 0


@njit(cache=True, error_model="numpy")
def _scatter(src, G, op, lo, n):
    """Lane lo + l's (t, x) = sum_g src[t, x, l G + g] (g = 0 .. G-1 in turn) for l < n: a
    block's lanes written back, each group of G lanes summed (plain stores, as ``_gather``:
    scatter instructions run one element at a time on some processors)."""
    flat, off, st, sx = op
    T, X, _ = src.shape
    for l0 in range(0, n, 16):
        for t in range(T):
            for lane in range(l0, min(n, l0 + 16)):
                o = off[lo + lane] + np.uint64(t * st)
                for x in range(X):
                    acc = src[t, x, lane * G]
                    for g in range(1, G):
                        acc = acc + src[t, x, lane * G + g]
                    flat[o + np.uint64(x * sx)] = acc


# ---- forward -----------------------------------------------------------------------------------
# The compute reads lane arrays (T, X, lanes) from a block's first lane ``o`` (unsigned), so that
# it runs on the forward's own lane arrays (kept for the backward) and on a block's buffers alike.
@njit(cache=True, error_model="numpy", inline="always")
def _dot_rows(a, i, ao, b, j, bo, acc):
    """acc[n] = sum_d a[i, d, ao + n] b[j, d, bo + n], d in turn."""
    D, NB = a.shape[1], acc.shape[0]
    for n in range(np.uint64(NB)):
        acc[n] = a[i, 0, ao + n] * b[j, 0, bo + n]
    for d in range(1, D):
        for n in range(np.uint64(NB)):
            acc[n] = acc[n] + a[i, d, ao + n] * b[j, d, bo + n]


@njit(cache=True, error_model="numpy", inline="always")
def _logits_row(QL, i, u0, KL, kmax, scale, cap, s, m, raw, TH, acc):
    """Row i of a block: s[j] (j < kmax) the scaled (and capped) logits, m their max, raw the
    max before the cap; the cap's tanh into TH[i]."""
    NB = np.uint64(acc.shape[0])
    for n in range(NB):
        m[n] = -np.inf
        raw[n] = -np.inf
    for j in range(kmax):
        _dot_rows(QL, i, u0, KL, j, u0, acc)
        if cap > 0:
            for n in range(NB):
                z = acc[n] * scale
                raw[n] = z if (z > raw[n] or z != z) else raw[n]
                t = vtanh(z / cap)
                TH[i, j, u0 + n] = t
                z = cap * t
                s[j, n] = z
                m[n] = z if (z > m[n] or z != z) else m[n]
        else:
            for n in range(NB):
                z = acc[n] * scale
                s[j, n] = z
                m[n] = z if (z > m[n] or z != z) else m[n]


@njit(cache=True, error_model="numpy", inline="always")
def _softmax_row(s, m, kmax, total, P, i, u0):
    """s[j] <- exp(s[j] - m) / sum (j < kmax, the sum j = 0, 1, ... in turn), into P[i] too;
    P[i, j] = 0 for the masked j >= kmax."""
    T, NB = P.shape[1], np.uint64(s.shape[1])
    for n in range(NB):
        total[n] = 0
    for j in range(kmax):
        for n in range(NB):
            e = vexp(s[j, n] - m[n])
            s[j, n] = e
            total[n] = total[n] + e
    for j in range(kmax):
        for n in range(NB):
            p = s[j, n] / total[n]
            s[j, n] = p
            P[i, j, u0 + n] = p
    for j in range(kmax, T):
        for n in range(NB):
            P[i, j, u0 + n] = 0


@njit(cache=True, error_model="numpy", inline="always")
def _mix_row(s, VL, u0, kmax, ob, i):
    """ob[i, d] = sum_j s[j] v[j, d] (j < kmax in turn)."""
    D, NB = VL.shape[1], np.uint64(s.shape[1])
    for d in range(D):
        for n in range(NB):
            ob[i, d, n] = s[0, n] * VL[0, d, u0 + n]
    for j in range(1, kmax):
        for d in range(D):
            for n in range(NB):
                ob[i, d, n] = ob[i, d, n] + s[j, n] * VL[j, d, u0 + n]


@njit(cache=True, error_model="numpy")
def _forward_block(QL, KL, VL, u0, causal, scale, cap, P, TH, RM, ob, s, m, raw, total, acc):
    """The lanes u0 .. u0 + NB of the lane arrays: p into P, the cap's tanh into TH, each row's
    largest logit before the cap into RM, the output into ob (T, D, NB)."""
    T, NB = QL.shape[0], np.uint64(ob.shape[2])
    for i in range(T):
        kmax = i + 1 if causal else T
        _logits_row(QL, i, u0, KL, kmax, scale, cap, s, m, raw, TH, acc)
        for n in range(NB):
            RM[i, u0 + n] = raw[n] if cap > 0 else m[n]
        if cap > 0:
            for j in range(kmax, T):
                for n in range(NB):
                    TH[i, j, u0 + n] = 0
        _softmax_row(s, m, kmax, total, P, i, u0)
        _mix_row(s, VL, u0, kmax, ob, i)


@njit(cache=True, error_model="numpy")
def _forward_call(q, k, v, y, NB, causal, scale, cap, QL, KL, VL, P, TH, RM):
    """One forward over every lane: blocks of NB lanes gathered from q, k, v (operands; k's and
    v's offsets one per query lane) into the lane arrays QL, KL, VL (T, D, L), computed, their
    output written to y. P (T, T, L), TH (T, T, L) with a cap, RM (T, L); L, the lanes padded to
    whole blocks, a multiple of NB."""
    T, D, L = QL.shape
    dt = QL.dtype
    N = q[1].shape[0]
    sc, cp = dt.type(scale), dt.type(cap)
    ob, s = np.empty((T, D, NB), dt), np.empty((T, NB), dt)
    m, raw, total, acc = np.empty(NB, dt), np.empty(NB, dt), np.empty(NB, dt), np.empty(NB, dt)
    for lo in range(0, L, NB):
        n = min(NB, N - lo)
        _gather(q, lo, n, QL[:, :, lo:lo + NB])
        _gather(k, lo, n, KL[:, :, lo:lo + NB])
        _gather(v, lo, n, VL[:, :, lo:lo + NB])
        _forward_block(QL, KL, VL, np.uint64(lo), causal, sc, cp, P, TH, RM, ob, s, m, raw,
                       total, acc)
        _scatter(ob, 1, y, lo, n)


# ---- backward ----------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", inline="always")
def _grad_logits_row(dyb, i, VL, u0, P, TH, cap, scale, kmax, ds, rd, acc):
    """Row i: ds[j] = p (dp[j] - sum_j p dp) (1 - t^2) scale, dp[j] = sum_d dy[i, d] v[j, d]."""
    NB = np.uint64(acc.shape[0])
    zero = np.uint64(0)
    for j in range(kmax):
        _dot_rows(dyb, i, zero, VL, j, u0, acc)
        for n in range(NB):
            ds[j, n] = acc[n]
    for n in range(NB):
        rd[n] = 0
    for j in range(kmax):
        for n in range(NB):
            rd[n] = rd[n] + ds[j, n] * P[i, j, u0 + n]
    for j in range(kmax):
        for n in range(NB):
            g = P[i, j, u0 + n] * (ds[j, n] - rd[n])
            if cap > 0:
                t = TH[i, j, u0 + n]
                g = g * (P.dtype.type(1.0) - t * t)
            ds[j, n] = g * scale


@njit(cache=True, error_model="numpy", inline="always")
def _grad_inputs_row(QL, KL, u0, dyb, i, P, ds, kmax, dqb, dkb, dvb):
    """dq[i] = sum_j ds[j] k[j] (in turn); dk[j] += ds[j] q[i], dv[j] += p[i, j] dy[i]."""
    D, NB = QL.shape[1], np.uint64(ds.shape[1])
    for d in range(D):
        for n in range(NB):
            dqb[i, d, n] = ds[0, n] * KL[0, d, u0 + n]
    for j in range(1, kmax):
        for d in range(D):
            for n in range(NB):
                dqb[i, d, n] = dqb[i, d, n] + ds[j, n] * KL[j, d, u0 + n]
    for j in range(kmax):
        for d in range(D):
            for n in range(NB):
                dkb[j, d, n] = dkb[j, d, n] + ds[j, n] * QL[i, d, u0 + n]
    for j in range(kmax):
        for d in range(D):
            for n in range(NB):
                dvb[j, d, n] = dvb[j, d, n] + P[i, j, u0 + n] * dyb[i, d, n]


@njit(cache=True, error_model="numpy")
def _backward_block(QL, KL, VL, u0, dyb, P, TH, causal, scale, cap, dqb, dkb, dvb, ds, rd,
                    acc):
    """The lanes u0 .. u0 + NB: dq into dqb, dk and dv (one per query lane) into dkb, dvb."""
    T = QL.shape[0]
    dkb[:] = 0
    dvb[:] = 0
    for i in range(T):
        kmax = i + 1 if causal else T
        _grad_logits_row(dyb, i, VL, u0, P, TH, cap, scale, kmax, ds, rd, acc)
        _grad_inputs_row(QL, KL, u0, dyb, i, P, ds, kmax, dqb, dkb, dvb)


@njit(cache=True, error_model="numpy")
def _backward_call(dy, dq, dk, dv, G, NB, causal, scale, cap, QL, KL, VL, P, TH):
    """One backward over every lane: blocks of NB lanes of the lane arrays QL, KL, VL (k's and
    v's one per query lane) and of dy (gathered), their dq written to dq and their dk, dv summed
    over each group of G query lanes and written to dk, dv (offsets one per key/value lane)."""
    T, D, L = QL.shape
    dt = QL.dtype
    N = dy[1].shape[0]
    sc, cp = dt.type(scale), dt.type(cap)
    dyb, dqb = np.empty((T, D, NB), dt), np.empty((T, D, NB), dt)
    dkb, dvb = np.empty((T, D, NB), dt), np.empty((T, D, NB), dt)
    ds = np.empty((T, NB), dt)
    rd, acc = np.empty(NB, dt), np.empty(NB, dt)
    for lo in range(0, L, NB):
        n = min(NB, N - lo)
        _gather(dy, lo, n, dyb)
        _backward_block(QL, KL, VL, np.uint64(lo), dyb, P, TH, causal, sc, cp, dqb, dkb, dvb,
                        ds, rd, acc)
        _scatter(dqb, 1, dq, lo, n)
        _scatter(dkb, G, dk, lo // G, n // G)
        _scatter(dvb, G, dv, lo // G, n // G)


# ---- Python: operands, p's lane array, the two calls -------------------------------------------
def _operand(a: np.ndarray, lanes_of: int = 1) -> tuple | None:
    """A (B, Hx, T, X) array as the kernels address it, ``(flat, off, t stride, x stride)``, with
    ``lanes_of`` = G > 1 one offset per query lane (query head h reads head h // G); None where a
    stride is negative or not a whole element."""
    isz = a.itemsize
    s0, s1, s2, s3 = a.strides
    if min(s0, s1, s2, s3) < 0 or (s0 | s1 | s2 | s3) % isz:
        return None
    B, Hx, T, X = a.shape
    s0, s1, s2, s3 = s0 // isz, s1 // isz, s2 // isz, s3 // isz
    span = 1 + (B - 1) * s0 + (Hx - 1) * s1 + (T - 1) * s2 + (X - 1) * s3
    return _flat(a, span), _offsets(B, Hx, lanes_of, s0, s1), s2, s3


def _addressable(a: np.ndarray, lanes_of: int = 1) -> tuple:
    """``_operand`` of a, or of a contiguous copy where a cannot be addressed in place."""
    got = _operand(a, lanes_of)
    if got is None:
        got = _operand(np.ascontiguousarray(a), lanes_of)
    assert got is not None  # a contiguous array always is
    return got


@njit(cache=True)
def _address(a):
    """The address of a's first element (what ``a.ctypes.data`` says, about 10x faster)."""
    return a.ctypes.data


def _flat(a: np.ndarray, span: int) -> np.ndarray:
    """The 1-D view of ``span`` elements of memory from a's first element."""
    base = a.base
    if isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == a.dtype:
        start = (_address(a) - _address(base)) // a.itemsize
        if 0 <= start and start + span <= base.size:
            return base.reshape(-1)[start:start + span]
    if a.flags.c_contiguous:
        return a.reshape(-1)
    return as_strided(a, shape=(span,), strides=(a.itemsize,), writeable=a.flags.writeable)


@functools.lru_cache(maxsize=64)
def _offsets(B: int, Hx: int, G: int, s0: int, s1: int) -> np.ndarray:
    """The offset b s0 + h s1 of each lane (b, h), h over Hx G query heads reading head h // G,
    in lane order (unsigned); read-only, shared by the calls of one shape."""
    h = np.arange(Hx * G, dtype=np.uint64) // np.uint64(G)
    off = (np.arange(B, dtype=np.uint64)[:, None] * np.uint64(s0) + h * np.uint64(s1))
    off = off.reshape(-1)
    off.flags.writeable = False
    return off


def blocks(B: int, H: int) -> tuple[int, int]:
    """``(lanes per block, lanes padded to whole blocks)``: blocks of whole batch rows (so that
    a group's query heads share a block), about ``LANES`` lanes."""
    rows = max(1, min(B, LANES // H))
    return rows * H, -(-B // rows) * rows * H


def lane_view(L: np.ndarray, B: int, Hx: int, G: int = 1) -> np.ndarray:
    """The (B, Hx, T, X) view of a lane array L (T, X, >= B Hx G) whose lane (b, h) is the
    sequence (b, h // G) (one lane per query head, G of them reading each key/value head)."""
    T, X, _ = L.shape
    return L[:, :, : B * Hx * G].reshape(T, X, B, Hx, G)[..., 0].transpose(2, 3, 0, 1)


def _lane_array(view: np.ndarray, lanes: int, G: int) -> np.ndarray | None:
    """The lane array (T, X, ``lanes``) that ``view`` (B, Hx, T, X) is the ``lane_view`` of, or
    None when it is not one (a reference forward's cache, a copy)."""
    base = view.base
    _, Hx, T, X = view.shape
    if (not isinstance(base, np.ndarray) or base.shape != (T, X, lanes)
            or base.dtype != view.dtype or not base.flags.c_contiguous):
        return None
    isz = view.itemsize
    if (view.strides != (Hx * G * isz, G * isz, X * lanes * isz, lanes * isz)
            or _address(view) != _address(base)):
        return None
    return base


def _lanes(view: np.ndarray, lanes: int, G: int = 1) -> np.ndarray:
    """``view``'s lane array: its own where it is a lane view, else gathered into a new one."""
    own = _lane_array(view, lanes, G)
    if own is not None:
        return own
    B, Hx, T, X = view.shape
    out = np.empty((T, X, lanes), view.dtype)
    _gather(_addressable(view, G), 0, B * Hx * G, out)
    return out


def forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool, scale: float,
            softcap: float | None, out: np.ndarray | None = None) -> tuple:
    """Attention of q (B, H, T, D), k, v (B, Hkv, T, D) of one float dtype, checked by the
    caller: ``(y, (q, k, v), p, tanh, rowmax)``, y (B, H, T, D) (``out`` when given); q, k, v,
    p (B, H, T, T) and tanh (with a cap, else None) views of the lane arrays the backward reads;
    rowmax (B, H, T) each row's largest logit before the cap."""
    B, H, T, D = q.shape
    G, dt = H // k.shape[1], q.dtype
    NB, L = blocks(B, H)
    QL, KL, VL = (np.empty((T, D, L), dt) for _ in range(3))
    P, RM = np.empty((T, T, L), dt), np.empty((T, L), dt)
    TH = np.empty((T, T, L) if softcap else (0, 0, 0), dt)
    y, y_op, copy_to = _writable((B, H, T, D), dt, out)
    _forward_call(_addressable(q), _addressable(k, G), _addressable(v, G), y_op, NB,
                  bool(causal), float(scale), float(softcap or 0.0), QL, KL, VL, P, TH, RM)
    if copy_to is not None:
        copy_to[...] = y
        y = copy_to
    _CAUSAL[id(P)] = bool(causal)
    weakref.finalize(P, _CAUSAL.pop, id(P), None)
    views = (lane_view(QL, B, H), lane_view(KL, B, H // G, G), lane_view(VL, B, H // G, G))
    th = lane_view(TH, B, H) if softcap else None
    return y, views, lane_view(P, B, H), th, RM[:, : B * H].T.reshape(B, H, T)


def _writable(shape: tuple, dtype: np.dtype, given: np.ndarray | None) -> tuple:
    """Where a result goes: ``(array, operand, copy_to)``: ``given`` itself when the kernels can
    address it, else a fresh array copied into ``given`` afterwards (``copy_to``)."""
    if given is not None and given.flags.writeable:
        got = _operand(given)
        if got is not None:
            return given, got, None
    fresh = np.empty(shape, dtype)
    return fresh, _operand(fresh), given


def backward(dout: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, p: np.ndarray,
             tanh: np.ndarray | None, *, scale: float, softcap: float | None,
             dq: np.ndarray | None = None, dk: np.ndarray | None = None,
             dv: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dq, dk, dv)`` of ``forward`` from dout (B, H, T, D) and the forward's q, k,
    v, p and tanh (its lane views, or a reference cache's arrays, gathered first), into dq, dk,
    dv when given (float arrays of q's dtype, checked by the caller)."""
    B, H, T, D = q.shape
    Hkv = k.shape[1]
    G, dt = H // Hkv, q.dtype
    NB, L = blocks(B, H)
    QL, KL, VL = _lanes(q, L), _lanes(k, L, G), _lanes(v, L, G)
    PL = _lanes(p, L)
    TH = _lanes(tanh, L) if softcap and tanh is not None else np.empty((0, 0, 0), dt)
    causal = _CAUSAL.get(id(PL), False)  # unknown: every key (p = 0 where it was masked)
    outs = [_writable(shape, dt, given) for shape, given in
            (((B, H, T, D), dq), ((B, Hkv, T, D), dk), ((B, Hkv, T, D), dv))]
    _backward_call(_addressable(dout), outs[0][1], outs[1][1], outs[2][1], G, NB, causal,
                   float(scale), float(softcap or 0.0), QL, KL, VL, PL, TH)
    result = []
    for a, _, copy_to in outs:
        if copy_to is not None:
            copy_to[...] = a
            a = copy_to
        result.append(a)
    return result[0], result[1], result[2]
