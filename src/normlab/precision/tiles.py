"""Tiles of a tensor: blocks of consecutive values along one axis, or square tiles of the last
two axes, and per-tile values in the *grid layout* (x's shape with each tiled axis divided by
the block, rounded up, in place). The geometry every block-scaled dialect shares (MX,
NVFP4, block FP8) and the per-block statistics read."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class Tiling(NamedTuple):
    """How a tensor of ``shape`` is cut into blocks: ``block`` values along ``axis`` (1D), or
    ``block x block`` tiles of the last two axes (``two_d``; ``axis`` is then -1)."""

    shape: tuple[int, ...]
    axis: int  # the 1D block axis, non-negative (2D: the last axis)
    block: int
    two_d: bool

    @classmethod
    def of(cls, shape: tuple[int, ...], block: int, axis: int = -1,
           two_d: bool = False) -> Tiling:
        """The tiling of ``shape``, its arguments checked (ValueError naming them)."""
        block = ck.integer(block, "block", lo=1, hi=1 << 40)
        nd = len(shape)
        if nd == 0:
            raise ValueError("x must have at least 1 dimension for blocks; got a scalar")
        if two_d:
            if nd < 2:
                raise ValueError(f"2D blocks need at least 2 dimensions; got shape {shape}")
            return cls(tuple(shape), nd - 1, block, True)
        ax = ck.integer(axis, "axis", lo=-nd, hi=nd - 1) % nd
        return cls(tuple(shape), ax, block, False)

    @property
    def grid(self) -> tuple[int, ...]:
        """The grid layout's shape: x's shape, each tiled axis divided by the block (rounded
        up)."""
        g = list(self.shape)
        for a in self.tiled_axes:
            g[a] = -(-g[a] // self.block)
        return tuple(g)

    @property
    def tiled_axes(self) -> tuple[int, ...]:
        n = len(self.shape)
        return (n - 2, n - 1) if self.two_d else (self.axis,)

    @property
    def size(self) -> int:
        """Values per block."""
        return self.block * self.block if self.two_d else self.block

    def split(self, x: Array) -> Array:
        """x (of ``shape``) as (..., k) blocks: the grid's cells in the grid layout's order
        (1D: the block axis moved last first), each block's values in x's order along the tiled
        axes; padded with zeros."""
        b = self.block
        if not self.two_d:
            xm = np.moveaxis(x, self.axis, -1)
            n = xm.shape[-1]
            pad = (-n) % b
            if pad:
                xm = np.concatenate([xm, np.zeros(xm.shape[:-1] + (pad,), xm.dtype)], -1)
            return xm.reshape(xm.shape[:-1] + ((n + pad) // b, b))
        m, n = x.shape[-2:]
        pm, pn = (-m) % b, (-n) % b
        if pm or pn:
            widths = [(0, 0)] * (x.ndim - 2) + [(0, pm), (0, pn)]
            x = np.pad(x, widths)
        lead = x.shape[:-2]
        t = x.reshape(lead + ((m + pm) // b, b, (n + pn) // b, b))
        t = np.swapaxes(t, -3, -2)  # (..., M/b, N/b, b, b)
        return t.reshape(t.shape[:-2] + (b * b,))

    def merge(self, blocks: Array) -> Array:
        """The inverse of :meth:`split`: x's shape, the padding dropped."""
        b = self.block
        if not self.two_d:
            flat = blocks.reshape(blocks.shape[:-2] + (-1,))
            n = self.shape[self.axis]
            return np.moveaxis(flat[..., :n], -1, self.axis)
        m, n = self.shape[-2:]
        gm, gn = blocks.shape[-3], blocks.shape[-2]
        t = blocks.reshape(blocks.shape[:-1] + (b, b))
        t = np.swapaxes(t, -3, -2).reshape(blocks.shape[:-3] + (gm * b, gn * b))
        return t[..., :m, :n]

    def to_grid(self, cells: Array) -> Array:
        """Per-block values in :meth:`split`'s order (its shape without the last axis) in the
        grid layout."""
        return cells if self.two_d else np.moveaxis(cells, -1, self.axis)

    def from_grid(self, grid: Array) -> Array:
        """The inverse of :meth:`to_grid`."""
        return grid if self.two_d else np.moveaxis(grid, self.axis, -1)

    def expand(self, grid: Array) -> Array:
        """Per-tile values (grid layout) repeated over each tile's elements: x's shape."""
        out = grid
        for a in self.tiled_axes:
            out = np.repeat(out, self.block, axis=a).take(np.arange(self.shape[a]), axis=a)
        return out



def block_amax(xb: Array) -> Array:
    """max |x| of each block (the last axis of :meth:`Tiling.split`'s result); NaN for a block
    holding one."""
    with np.errstate(invalid="ignore"):
        return np.max(np.abs(xb), axis=-1) if xb.shape[-1] else np.zeros(xb.shape[:-1],
                                                                             xb.dtype)
