"""Shared pieces of the numba kernels: compile options, row chunks, row reductions.

Every kernel is ``@njit(parallel=True, cache=True)``: compiled on first use for each combination
of argument types and cached on disk next to this package (``__pycache__``), so a new process
loads machine code instead of compiling. The rows of a (rows, C) problem are split into one
contiguous chunk per thread (``prange`` over chunks); a row is read from memory once into the
cache and every further pass over it runs out of L1/L2.

Floating-point rules: element-wise arithmetic is written in the same order as the NumPy reference
(``normlab.functional``) and compiled without fast-math, so it rounds the same way. Only row
reductions (sums over the C features) may be reordered (``reassoc``), which lets LLVM vectorize
them into several partial sums; a reordered sum differs from NumPy's pairwise sum in its last
bits, which is why the kernels match the reference within a tolerance rather than bitwise
wherever a reduction is involved.
"""

from __future__ import annotations

import os
from typing import Any

# Idle OpenMP workers sleep instead of spinning (unless the user chose otherwise). On a shared
# machine with more runnable processes than cores, spinning workers take the cores that the
# working threads need: measured on 2 loaded cores, a 512K-element kernel took 12 ms with the
# default spin-wait and 0.9 ms with PASSIVE. Read once, when numba's OpenMP pool starts; results
# do not depend on it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba
import numpy as np
from numba import njit
from numpy.typing import DTypeLike

from .. import _checks as ck


def _source_keyed_cache() -> None:
    """Keep numba's disk cache in a folder named by a hash of this package's source
    (``__pycache__/numba-<hash>``), unless ``NUMBA_CACHE_DIR`` chose one. numba checks a cached
    kernel against its own file only, while the machine code holds every kernel it calls from
    the other files: after an edit to ``accumulate.py``, say, the norms' cached kernels kept the
    old running sum until the cache was cleared, and a refactor checked bit for bit against the
    committed results would have run the old code. Set before any kernel is decorated (numba
    reads ``config.CACHE_DIR`` then); where the folder cannot be written numba falls back to its
    usual places."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    numba.config.CACHE_DIR = str(  # type: ignore[attr-defined]  # set at numba import
        here / "__pycache__" / f"numba-{h.hexdigest()[:16]}")


_source_keyed_cache()

# Fast-math flags for reductions only: reassociation (vectorized partial sums). No 'nnan'/'ninf':
# NaN and inf propagate as in NumPy. No 'nsz' either: with it, a reduction called from another
# kernel compiled to different code in the process that compiled it and in one that loaded it
# from numba's disk cache (RMSNorm's input gradient differed in its last bits between a first and
# a second run; tests/kernels/test_cache_bits.py).
REDUCE = {"reassoc"}

# Parameter gradients: each thread sums ROW_BLOCK rows into float32 partials (for float32
# compute), then adds them into its float64 accumulator; the threads' accumulators are summed in
# float64 and rounded once.
ROW_BLOCK = 32


# Below this many elements (16 MB of float32) a kernel runs on the calling thread alone: the data
# sits in the caches and one core finishes in a few ms, while waking the thread pool costs more,
# and on a shared, loaded machine a woken thread may wait a whole time slice for a core.
# Measured on the 2 loaded cores (LayerNorm forward+backward, one thread / two): 1024 x 128 0.2 ms
# / 15 ms; 4096 x 512 2.1 ms / 6.1 ms; 8192 x 768 16 ms / 18 ms; 8192 x 4096 143 ms / 143 ms (on
# an idle machine two threads read memory faster than one).
PARALLEL_MIN = 1 << 22


# Whether this process's numba pool has one thread (NUMBA_NUM_THREADS=1: the lab's workers,
# ``make results``), found at the first launch: every calling thread then has one thread for good
# (numba refuses a count above the pool's, and the pool's is fixed once it runs), so ``launch``
# calls the kernel straight away without asking numba for the count (a few microseconds of
# Python a launch: under 1% of a lab ensemble's step, more where small kernels run one by one).
_ONE_THREAD = False


def nchunks(rows: int, work: int | None = None) -> int:
    """Chunks (= threads used) for a problem of ``rows`` rows and ``work`` elements."""
    if work is not None and work < PARALLEL_MIN:
        return 1
    return max(1, min(rows, numba.get_num_threads()))


def launch(kernel: Any, work: int, *args: Any) -> Any:
    """Call a parallel kernel; below PARALLEL_MIN elements with one thread (the thread count is
    per calling thread in numba, so this changes nothing for other threads)."""
    global _ONE_THREAD
    if work >= PARALLEL_MIN or _ONE_THREAD:
        return kernel(*args)
    saved = numba.get_num_threads()  # (starts numba's thread pool at the first launch)
    if saved == 1:  # already one thread (the lab's workers): nothing to set or restore
        _ONE_THREAD = numba.config.NUMBA_NUM_THREADS == 1  # type: ignore[attr-defined]
        return kernel(*args)
    numba.set_num_threads(1)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(saved)


def rows_of(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous (rows, C) array (a view when it already is one)."""
    return np.ascontiguousarray(a.reshape(-1, a.shape[-1]))


def ct_of(*dtypes: DTypeLike) -> np.dtype:
    """The compute dtype of an op over inputs of these dtypes (float64 if any is float64)."""
    return max((ck.compute_dtype(d) for d in dtypes if d is not None), key=lambda d: d.itemsize)


@njit(cache=True, inline="always")
def chunk_bounds(c, n, rows):
    """Rows [lo, hi) of chunk c of n."""
    return c * rows // n, (c + 1) * rows // n


@njit(cache=True, fastmath=REDUCE)
def row_sum(v, k):
    """sum(v[:k]) in v's dtype."""
    acc = v.dtype.type(0.0)
    for j in range(k):
        acc += v[j]
    return acc


@njit(cache=True, fastmath=REDUCE)
def row_sumsq(v, k):
    """sum(v[:k]**2) in v's dtype."""
    acc = v.dtype.type(0.0)
    for j in range(k):
        acc += v[j] * v[j]
    return acc


@njit(cache=True, fastmath=REDUCE)
def row_centered_sumsq(v, mu):
    """sum((v - mu)**2) in v's dtype (the second pass of a two-pass variance, from the cache)."""
    acc = v.dtype.type(0.0)
    for j in range(v.shape[0]):
        d = v[j] - mu
        acc += d * d
    return acc


@njit(cache=True)
def flush(acc, part):
    """Add the float32 block partials ``acc`` into the float64 accumulator ``part``; zero acc."""
    for j in range(acc.shape[0]):
        part[j] += acc[j]
        acc[j] = 0
