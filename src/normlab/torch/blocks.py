"""The block-scaled dialects in torch operations: what ``normlab.torch.apply`` runs for them.

Each function is the dialect's ``qdq`` of a float32 tensor on its device, the same bits as
``normlab.precision``'s NumPy path (``tests/torch/test_torch_blocks.py``), and is registered in
``normlab.torch.quantize.TORCH_SCALINGS`` under the dialect's kind when ``normlab.torch`` is
imported. A dialect without an entry here runs through its NumPy ``qdq`` on a CPU copy; so do
stochastic rounding with ``sr_bits`` and float64 input (``apply`` routes them).

The code follows ``normlab.precision``'s line by line: the tiles of ``precision.tiles`` (the same
split and merge), every float32 product and quotient in the same order, the E4M3 and element
roundings by ``normlab.torch.quantize`` (the same bits as ``normlab.precision.quantize``, the
random words drawn in the same order for stochastic rounding), the Hadamard transform by the same
float64 butterflies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..precision.formats import FloatFormat, get_format
from ..precision.policy import Precision
from ..precision.scaling import MXScaling, ScalingState, _quotient_dtype, mx_scale
from .quantize import _BLOCK, TORCH_SCALINGS, TorchScaling, Workspace, quantize

F32 = torch.float32
F32_MAX = float(np.finfo(np.float32).max)
E4M3 = get_format("float8_e4m3fn")
E2M1 = get_format("float4_e2m1fn")


# --- tiles (precision.tiles.Tiling in torch) ---------------------------------------------------

class Tiles:
    """``precision.tiles.Tiling``'s split, merge and grid moves for a torch tensor."""

    def __init__(self, shape: tuple[int, ...], block: int, axis: int, two_d: bool) -> None:
        nd = len(shape)
        if nd == 0:
            raise ValueError("x must have at least 1 dimension for blocks; got a scalar")
        if two_d and nd < 2:
            raise ValueError(f"2D blocks need at least 2 dimensions; got shape {shape}")
        self.shape, self.block, self.two_d = tuple(shape), block, two_d
        self.axis = nd - 1 if two_d else axis % nd

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b = self.block
        if not self.two_d:
            xm = x.movedim(self.axis, -1)
            n = xm.shape[-1]
            pad = (-n) % b
            if pad:
                xm = torch.nn.functional.pad(xm, (0, pad))
            return xm.reshape(xm.shape[:-1] + ((n + pad) // b, b))
        m, n = x.shape[-2:]
        pm, pn = (-m) % b, (-n) % b
        if pm or pn:
            x = torch.nn.functional.pad(x, (0, pn, 0, pm))
        t = x.reshape(x.shape[:-2] + ((m + pm) // b, b, (n + pn) // b, b)).transpose(-3, -2)
        return t.reshape(t.shape[:-2] + (b * b,))

    def merge(self, blocks: torch.Tensor) -> torch.Tensor:
        b = self.block
        if not self.two_d:
            flat = blocks.reshape(blocks.shape[:-2] + (blocks.shape[-2] * b,))
            return flat[..., :self.shape[self.axis]].movedim(-1, self.axis)
        m, n = self.shape[-2:]
        gm, gn = blocks.shape[-3], blocks.shape[-2]
        t = blocks.reshape(blocks.shape[:-1] + (b, b)).transpose(-3, -2)
        return t.reshape(blocks.shape[:-3] + (gm * b, gn * b))[..., :m, :n]

    def expand(self, cells: torch.Tensor) -> torch.Tensor:
        """Per-block values (split order) repeated over each block's elements: x's shape."""
        k = self.block * self.block if self.two_d else self.block
        return self.merge(cells[..., None].expand(cells.shape + (k,)))


def _amax(xb: torch.Tensor) -> torch.Tensor:
    """max |x| per block, NaN for a block holding one (numpy's max)."""
    if xb.shape[-1] == 0:
        return xb.new_zeros(xb.shape[:-1])
    a = torch.amax(torch.abs(xb), dim=-1)
    return torch.where(torch.isnan(xb).any(dim=-1), float("nan"), a)


def _f(v: float, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(v, dtype=F32, device=like.device)


def _e4m3(v: torch.Tensor) -> torch.Tensor:
    return quantize(v.to(F32), E4M3, overflow="saturate")


def _round(v: torch.Tensor, fmt: FloatFormat, p: Precision, rng: np.random.Generator | None
           ) -> torch.Tensor:
    if fmt == E2M1 and v.dtype == F32:
        if p.rounding == "nearest_even":
            return e2m1_nearest(v)
        if p.rounding == "stochastic" and rng is not None:
            return e2m1_stochastic(v, rng)
    return quantize(v, fmt, rounding=p.rounding, overflow="saturate", rng=rng)


def e2m1_nearest(v: torch.Tensor) -> torch.Tensor:
    """``quantize(v, "float4_e2m1fn", overflow="saturate")`` of float32 v, the same bits in a
    few element-wise passes: |v| clamped to 6 (NaN stays), divided by its binade's spacing
    (0.5 below 2, 1 below 4, 2 above) rounded to nearest even by float32's own addition of
    2^22 times that spacing (whose float32 spacing it is) and its exact subtraction (the
    parity of the sum's last bit is the E2M1 mantissa bit's; a carry into the next binade
    lands on its first value), and v's sign (-0 kept). ``tests/torch/test_torch_e2m1_fast.py``
    compares it with ``quantize`` on every float32 near the grid and its midpoints."""
    a = torch.abs(v).clamp_(max=6.0)
    c = (a.view(torch.int32) >> 23).clamp_(min=127).add_(22).bitwise_left_shift_(23)
    big = c.view(F32)  # 2^(e + 22), e = max(0, exponent of |v|): float32's spacing there
    return a.add_(big).sub_(big).copysign_(v)  # is |v|'s E2M1 spacing: a + big rounds to it


def _words32(rng: np.random.Generator, n: int) -> np.ndarray:
    """``random_bits(rng, n)``'s words (the same draws) as int32 bit patterns."""
    out = []
    for i in range(0, n, _BLOCK):
        m = min(_BLOCK, n - i)
        raw = rng.integers(0, np.iinfo(np.uint64).max, size=(m + 1) // 2, dtype=np.uint64,
                           endpoint=True)
        out.append(raw.view(np.uint32)[:m])
    return np.concatenate(out).view(np.int32) if out else np.zeros(0, np.int32)


def e2m1_stochastic(v: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """``quantize(v, "float4_e2m1fn", rounding="stochastic", overflow="saturate", rng=rng)``
    of float32 v, the same bits from the same random words (one per value in v's order): |v|
    clamped to 6 is k + f spacings of its binade (0.5, 1, 2; f in [0, 1) exact); at or above
    0.5 it rounds up when f plus the word's low s bits over 2^s (s = 22 from 1 up, 23 in
    [0.5, 1): quantize's carry of the bits it drops) reaches 1, a float32 sum that is exact;
    below 0.5 when the whole word is below f 2^32 (rounded up), quantize's smallest-subnormal
    rule. NaN stays, -0 is kept."""
    r = torch.from_numpy(_words32(rng, v.numel())).to(v.device).reshape(v.shape)
    a = torch.abs(v).clamp_(max=6.0)
    e = (a.view(torch.int32) >> 23).clamp_(min=127).sub_(1).bitwise_left_shift_(23)
    ulp = e.view(F32)  # 2^(max(E, 0) - 1), E the binade of |v|
    u = a / ulp
    k = torch.floor(u)
    frac = u.sub_(k)
    t = (r & 0x7FFFFF).to(F32).mul_(2.0**-23)  # the low 23 bits over 2^23
    t2 = t * 2.0
    g = torch.where(a >= 1.0, t2.sub_(torch.floor(t2)), t)  # the low 22 over 2^22 from 1 up
    q = k.add_((frac + g) >= 1.0).mul_(ulp)
    lim = torch.ceil(frac * 2.0**32).to(torch.int64)  # frac = 2 |v| below 0.5
    up = (r.to(torch.int64) & 0xFFFFFFFF) < lim
    q = torch.where(a < 0.5, up.to(F32) * 0.5, q)
    return torch.where(torch.isnan(a), a, q).copysign_(v)


def _saturated(el: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """elements * decode; a finite product beyond float32 is float32's max (never inf)."""
    out = el * d
    inf = torch.isinf(out)
    if not bool(inf.any()):
        return out
    over = inf & torch.isfinite(el) & torch.isfinite(d)
    return torch.where(over, torch.copysign(torch.full_like(out, F32_MAX), out), out)


# --- NVFP4 --------------------------------------------------------------------------------------

def _te_encode(ga: torch.Tensor, e_max: int) -> torch.Tensor:
    s = torch.minimum(_f(e_max * 6, ga) / ga, _f(F32_MAX, ga))
    return torch.where((ga == 0) | (s == 0), _f(1.0, ga), s)


def _te_decode(s_b: torch.Tensor, ga: torch.Tensor, e_max: int) -> torch.Tensor:
    return (s_b * ga) * _f(1.0 / (6 * e_max), s_b)


def _te_plain(xb, a, ga, s_enc, e_max, rnd):
    mult = s_enc * _f(1.0 / 6.0, a)
    s_b = _e4m3(torch.minimum(a * mult, _f(F32_MAX, a)))
    s_dec = _f(1.0, a) / s_enc
    enc = torch.minimum(_f(1.0, a) / (s_b * s_dec), _f(F32_MAX, a))
    return rnd(xb * enc[..., None]), s_b, _te_decode(s_b, ga, e_max)


def _te_error(q, s_b, ga, xb, e_max, mode):
    denom = _f(6 * e_max, q)
    rows = q.shape[-1] // 16
    qr = q.reshape(q.shape[:-1] + (rows, 16))
    xr = xb.reshape(qr.shape)
    err = torch.zeros(qr.shape[:-1], dtype=F32, device=q.device)
    for i in range(16):
        val = (qr[..., i] * s_b[..., None]) * ga[..., None]
        d = val / denom - xr[..., i]
        err = err + (d * d if mode == "mse" else torch.abs(d))
    if rows == 1:
        return err[..., 0]
    while err.shape[-1] > 1:  # TE's tree over a tile's 16 rows
        h = err.shape[-1] // 2
        err = err[..., :h] + err[..., h:]
    return err[..., 0]


def _te_4over6(xb, a, ga, s_enc, e_max, mode, rnd):
    base = (a / _f(6.0, a)) * s_enc
    g_dec = _f(1.0, a) / s_enc
    cands = []
    for s_b in (_e4m3(base * _f(1.5, a)), _e4m3(base)):
        enc = torch.minimum(_f(1.0, a) / (s_b * g_dec), _f(F32_MAX, a))
        q = rnd(xb * enc[..., None])
        cands.append((q, s_b, _te_error(q, s_b, ga, xb, e_max, mode)))
    (q4, s4, e4), (q6, s6, e6) = cands
    pick = e4 < e6
    s_b = torch.where(pick, s4, s6)
    return torch.where(pick[..., None], q4, q6), s_b, _te_decode(s_b, ga, e_max)


def _torchao(xb, a, ga, rnd):
    tiny = _f(2.0**-6, a)
    bs = a / _f(6.0, a)
    if ga is None:
        s_b = _e4m3(torch.clamp(bs, tiny, _f(448.0, a)))
        enc, dec = _f(1.0, a) / s_b, s_b
    else:
        pts = ga / _f(2688.0, a)
        pts = torch.where(pts == 0, _f(1.0, a), pts)
        s_b = _e4m3(torch.clamp(bs / pts, tiny, _f(448.0, a)))
        enc, dec = (_f(1.0, a) / pts) / s_b, pts * s_b
    q = rnd(torch.clamp(xb * enc[..., None], -6.0, 6.0))
    return q, dec


def nvfp4_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
              state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """NVFP4 of float32 x (``NVFP4Scaling``; ``precision.nvfp4``'s arithmetic)."""
    s: Any = p.scaling
    if p.format != E2M1:
        raise ValueError(f"NVFP4's elements are E2M1: the format must be float4_e2m1fn; got "
                         f"{p.format.name}")
    if s.four_over_six is not None and p.rounding != "nearest_even":
        raise ValueError(f"four_over_six compares two round-to-nearest candidates; "
                         f"rounding={p.rounding!r} is not defined for it")

    def rnd(v: torch.Tensor) -> torch.Tensor:
        return _round(v, E2M1, p, rng)

    fast = _fused(p, x, rng)
    if fast is None:
        fast = _te_in_place(p, x, rnd)
    if fast is not None:
        return fast
    tiles = Tiles(tuple(x.shape), 16, s.axis, s.two_d)
    xb = tiles.split(x)
    a = _amax(xb)

    ga = None
    if s.global_scale == "row":
        ga = torch.amax(a, dim=-1, keepdim=True) if a.shape[-1] else a
        ga = torch.where(torch.isnan(a).any(dim=-1, keepdim=True), float("nan"), ga)
    elif s.global_scale == "tensor":
        g = _amax(x.reshape(1, -1))[0] if x.numel() else x.new_zeros(())
        ga = g.reshape((1,) * a.dim())
    if s.dialect == "torchao":
        q, dec = _torchao(xb, a, ga, rnd)
    else:
        assert ga is not None
        s_enc = _te_encode(ga, s.e4m3_max)
        if s.four_over_six is None:
            q, _, dec = _te_plain(xb, a, ga, s_enc, s.e4m3_max, rnd)
        else:
            q, _, dec = _te_4over6(xb, a, ga, s_enc, s.e4m3_max, s.four_over_six, rnd)
    return _saturated(tiles.merge(q), tiles.expand(dec.expand(a.shape)))


def _fused(p: Precision, x: torch.Tensor, rng: np.random.Generator | None
           ) -> torch.Tensor | None:
    """``normlab.kernels.nvfp4``'s one fused pass where it applies (TE's plain NVFP4 with a
    per-tensor scale of a contiguous float32 CPU tensor: the same bits and draws as the
    element-wise passes below), with torch's thread count, else None."""
    if x.device.type != "cpu" or x.dtype != F32 or not x.is_contiguous() or \
            (p.rounding == "stochastic" and rng is None):
        return None
    from ..kernels.nvfp4 import applies, nvfp4_te_qdq

    if not applies(p.scaling, p.rounding, p.sr_bits):
        return None
    s: Any = p.scaling
    y = nvfp4_te_qdq(x.detach().numpy(), two_d=s.two_d, rounding=p.rounding, rng=rng,
                     threads=torch.get_num_threads())
    return None if y is None else torch.from_numpy(y)


def _te_in_place(p: Precision, x: torch.Tensor, rnd: Any) -> torch.Tensor | None:
    """TE's plain NVFP4 with a per-tensor scale where the blocks are views of x (1x16 blocks
    along the last axis, or 16x16 tiles rounded to nearest: their draws would follow the tiles'
    order): the block amax by two reductions, the elements scaled, rounded and decoded in x's
    layout, with ``_te_plain``'s float32 products in its order; None where it does not apply."""
    s: Any = p.scaling
    nd = x.dim()
    if s.dialect != "te" or s.four_over_six is not None or s.global_scale != "tensor" or \
            nd == 0 or x.numel() == 0:
        return None
    shape = x.shape
    if s.two_d:
        if nd < 2 or p.rounding == "stochastic":
            return None
        xp = torch.nn.functional.pad(x, (0, (-shape[-1]) % 16, 0, (-shape[-2]) % 16))
        xr = xp.reshape(*shape[:-2], xp.shape[-2] // 16, 16, xp.shape[-1] // 16, 16)
    elif s.axis % nd == nd - 1:
        xp = torch.nn.functional.pad(x, (0, (-shape[-1]) % 16))  # x itself when aligned
        xr = xp.reshape(*shape[:-1], xp.shape[-1] // 16, 16)
    else:
        return None
    hi, lo = xr.amax(dim=-1, keepdim=True), xr.amin(dim=-1, keepdim=True)  # NaN stays
    if s.two_d:
        hi, lo = hi.amax(dim=-3, keepdim=True), lo.amin(dim=-3, keepdim=True)
    a = torch.maximum(hi, -lo).abs_()
    ga = torch.max(a)
    s_enc = _te_encode(ga, s.e4m3_max)
    mult = s_enc * _f(1.0 / 6.0, a)
    s_b = _e4m3(torch.minimum(a * mult, _f(F32_MAX, a)))
    enc = torch.minimum(_f(1.0, a) / (s_b * (_f(1.0, a) / s_enc)), _f(F32_MAX, a))
    q = rnd(xr * enc)
    dec = _te_decode(s_b, ga, s.e4m3_max)
    if bool(torch.isfinite(dec * 6.0).all()):
        out = q.mul_(dec)  # |q| <= 6: no finite product overflows
    else:
        out = _saturated(q, dec.expand(q.shape))
    out = out.reshape(xp.shape)
    return out if out.shape == shape else out[..., :shape[-2], :shape[-1]] if s.two_d else \
        out[..., :shape[-1]]


# --- FP8 blocks and rows -----------------------------------------------------------------------

def _ceil_ue8m0(sf: torch.Tensor) -> torch.Tensor:
    b = torch.abs(sf).view(torch.int32).to(torch.int64)
    e = ((b >> 23) & 0xFF) + ((b & 0x7FFFFF) != 0).to(torch.int64)
    return torch.ldexp(torch.ones_like(sf), (torch.clamp(e, 1, 254) - 127).to(F32))


def _floor_pow2(s: torch.Tensor) -> torch.Tensor:
    e = torch.frexp(s).exponent
    e = torch.where(torch.isnan(s), torch.zeros_like(e), e)  # numpy's frexp(nan): exponent 0
    return torch.ldexp(torch.ones_like(s), (e - 1).to(F32))


def _fp8_scales(a: torch.Tensor, fmax: float, dialect: str, pow2: bool
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(encode, decode) per block, as ``precision.blocks._fp8_scales``."""
    one = _f(1.0, a)
    if dialect == "deepgemm":
        sf = torch.maximum(a, _f(1e-4, a)) / _f(fmax, a)
        if pow2:
            sf = _ceil_ue8m0(sf)
        return one / sf, sf
    if dialect == "te":
        s = _f(fmax, a) / a
        s = torch.where(s == math.inf, _f(F32_MAX, a), s)
        if pow2:
            s = torch.where(a == math.inf, _f(0.0, a), _floor_pow2(s))
        s = torch.where(a == 0, one, s)
        return s, one / s
    a64 = torch.maximum(a.to(torch.float64), torch.tensor(1e-12, dtype=torch.float64,
                                                          device=a.device))
    s = (fmax / a64).to(F32)
    return s, one / s


def fp8_blocks_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
                   state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """FP8 in blocks of float32 x (``FP8BlockScaling``; ``precision.blocks``' arithmetic)."""
    s: Any = p.scaling
    pow2 = {"deepgemm": False, "te": True, "torchao": False}[s.dialect] if s.pow2 is None \
        else s.pow2
    tiles = Tiles(tuple(x.shape), s.block, s.axis, s.two_d)
    xb = tiles.split(x)
    enc, dec = _fp8_scales(_amax(xb), p.format.max_finite, s.dialect, pow2)
    q = _round(xb * enc[..., None], p.format, p, rng)
    return _saturated(tiles.merge(q), tiles.expand(dec))


def fp8_rows_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
                 state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """Per-row FP8 of float32 x (``FP8RowScaling``): elements / s."""
    sc: Any = p.scaling
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension for rows; got a scalar")
    n = x.shape[sc.axis]
    tiles = Tiles(tuple(x.shape), max(n, 1), sc.axis, False)
    xb = tiles.split(x)
    a64 = torch.maximum(_amax(xb).to(torch.float64),
                        torch.tensor(1e-12, dtype=torch.float64, device=x.device))
    s = (p.format.max_finite / a64).to(F32)
    if sc.pow2:
        s = torch.exp2(torch.floor(torch.log2(s.to(torch.float64)).to(F32)))
    q = _round(xb * s[..., None], p.format, p, rng)
    return tiles.merge(q) / tiles.expand(s)


# --- MX ------------------------------------------------------------------------------------------

def mx_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
           state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """MX blocks of float32 x (``MXScaling``: 1D or 2D, any scale bits): the scales from the
    blocks' amax by ``precision.scaling.mx_scale`` (one value per block, computed on the CPU),
    the elements in torch."""
    s: MXScaling = p.scaling  # type: ignore[assignment]
    fmt = p.format
    tiles = Tiles(tuple(x.shape), s.block_size, s.axis, s.two_d)
    xb = tiles.split(x)
    a = _amax(xb).cpu().numpy()
    X = torch.from_numpy(mx_scale(a, fmt, s.scale_rule, s.scale_bits)).to(x.device)
    wt = torch.float64 if _quotient_dtype(np.dtype(np.float32), fmt, p.rounding) == np.float64 \
        else F32
    v = xb.to(wt) * (1.0 / X[..., None]).to(wt)
    q = quantize(v, fmt, rounding=p.rounding, overflow="saturate", rng=rng).to(F32)
    return _saturated(tiles.merge(q), tiles.expand(X.to(F32)))


# --- the Hadamard rotation ---------------------------------------------------------------------

def _fwht(v: torch.Tensor) -> torch.Tensor:
    n = v.shape[-1]
    out = v.clone()
    h = 1
    while h < n:
        w = out.reshape(out.shape[:-1] + (n // (2 * h), 2, h))
        a, b = w[..., 0, :].clone(), w[..., 1, :].clone()
        w[..., 0, :], w[..., 1, :] = a + b, a - b
        h *= 2
    return out


def _rotate(x: torch.Tensor, axis: int, size: int, signs: str, inverse: bool) -> torch.Tensor:
    from ..precision.hadamard import TE_SIGNS

    ax = axis % x.dim()
    if x.shape[ax] % size:
        raise ValueError(f"the rotated axis ({x.shape[ax]} values) must be a multiple of the "
                         f"Hadamard size {size}")
    if x.device.type == "cpu" and x.dtype == F32:  # kernels.hadamard: the same bits, one pass
        from ..kernels.hadamard import rht_float32

        fast = rht_float32(x.detach().numpy(), ax, np.array(TE_SIGNS if signs == "te" else
                                                            [1.0] * size, np.float64),
                           inverse=inverse, threads=torch.get_num_threads())
        if fast is not None:
            return torch.from_numpy(fast)
    s = torch.tensor(TE_SIGNS if signs == "te" else [1.0] * size, dtype=torch.float64,
                     device=x.device)
    xm = x.to(torch.float64).movedim(ax, -1)
    g = xm.reshape(xm.shape[:-1] + (xm.shape[-1] // size, size))
    y = _fwht(g) * s if inverse else _fwht(g * s)
    y = (y / math.sqrt(size)).to(F32)
    return y.reshape(xm.shape).movedim(-1, ax)


def hadamard_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
                 state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """The rotation, the inner dialect (in torch where it has an entry, else NumPy), the
    rotation back (``HadamardScaling``)."""
    s: Any = p.scaling
    inner = s.scaling
    ax = s.axis if s.axis is not None else getattr(inner, "axis", -1)
    xr = _rotate(x, ax, s.size, s.signs, inverse=False)
    ip = Precision(p.format, p.rounding, p.overflow, inner, p.sr_bits)
    backend = TORCH_SCALINGS.get(inner.kind)
    if backend is None or getattr(inner, "axis", ax) != ax:
        a = ip.apply(xr.cpu().numpy(), rng=rng, state=state, axis=ax)
        y = torch.from_numpy(np.ascontiguousarray(a)).to(x.device)
    else:
        y = backend.qdq(ip, xr, rng, state, None)
    return _rotate(y, ax, s.size, s.signs, inverse=True)


TORCH_SCALINGS.update({
    "mx": TorchScaling(mx_qdq),
    "nvfp4": TorchScaling(nvfp4_qdq),
    "fp8_blocks": TorchScaling(fp8_blocks_qdq),
    "fp8_rows": TorchScaling(fp8_rows_qdq),
    "hadamard": TorchScaling(hadamard_qdq),
})

__all__ = ["Tiles", "e2m1_nearest", "e2m1_stochastic", "fp8_blocks_qdq", "fp8_rows_qdq",
           "hadamard_qdq", "mx_qdq", "nvfp4_qdq"]
