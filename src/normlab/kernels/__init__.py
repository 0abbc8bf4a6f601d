"""Fused CPU kernels (numba): the fast paths of ``normlab.functional``, with the same contracts.

Each op here has the signature, the cache type and the dtype rules of its reference in
``normlab.functional`` (a cache from one can be fed to the other's backward), and is tested equal
to it: bitwise where the computation is element-wise (residual sums, dropout, quantization) and
within a tolerance derived from the format wherever a row reduction is involved (a reordered
sum differs in its last bits). See ``tests/kernels``.

    from normlab import kernels
    y, cache = kernels.layer_norm_forward(x, weight, bias, eps=1e-5)
    dx, dweight, dbias = kernels.layer_norm_backward(dy, cache)

Kernels vs reference: the switch
--------------------------------
Nothing global decides which path runs. ``normlab.functional`` is always the readable NumPy
reference and ``normlab.kernels`` always the fused path; you call the one you want. The ``nn``
modules take ``impl="kernel"`` (the default) or ``impl="reference"`` at construction, and
``module.set_impl("reference")`` switches a module and all its children, as ``eval()`` does for
the mode. ``resolve(impl, name)`` returns the function ``name`` of either path, from ``OPS``:
the one table that pairs each kernel with its reference. Both paths agree
within the tolerances of ``tests/kernels``, and dropout draws the same mask from the same
``rng`` on both.

What runs fused: LayerNorm, RMSNorm, the residual add + norm, softmax (plain, and soft-capped
with the causal mask), cross-entropy, GELU, quantization, low-precision accumulation
(``accumulate.py``: the norms, softmax and cross-entropy take ``accumulate=``, a policy's
``norm_accumulate`` / ``softmax_accumulate``, and equal the reference bit for bit), and
attention (``attention.py``: products, soft-cap, causal mask and softmax of every sequence of a
call in one compiled call each way, each sequence a SIMD lane, ``attention_lanes.py``; exp and
tanh the vectorized float32 polynomials of ``vmath.py``), and QK-norm's LayerNorm
(``qk_norm.py``: NumPy's order of additions, bit for bit the reference, so that a QK-norm model
computes the same bits on either path).
``nvfp4.nvfp4_te_qdq`` is TransformerEngine's plain NVFP4 quantize-dequantize in one fused pass,
bit for bit ``precision.nvfp4_quantize(..., dialect="te").dequantize()``, and
``hadamard.rht_float32`` the random Hadamard transform, bit for bit ``precision.rht``
(``normlab.torch`` runs a CPU tensor's NVFP4 and rotations through them).
``optim.adamw_update`` is AdamW's update in one pass over flat buffers, bit for bit NumPy's;
``normlab.train.AdamW`` calls it itself.

Compilation: every kernel is compiled on its first call for each combination of argument types
(about 1 to 3 s each) and cached on disk (``cache=True``, in ``__pycache__/numba-<hash>``
beside this package, the hash of the package's source, so that an edit to any kernel file
compiles everything again; or ``NUMBA_CACHE_DIR``); a later process loads the machine code
(milliseconds).
``warm_up()`` compiles (or loads) the common float32 specializations ahead of time.

Threads: problems of 4M elements and more are split across numba's threads (``NUMBA_NUM_THREADS``,
``numba.set_num_threads``); smaller ones run on the calling thread (``_common.PARALLEL_MIN``).
Idle OpenMP workers sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` unless set).

numba is imported only when a kernel is first used: ``import normlab`` and ``import
normlab.kernels`` stay light.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

IMPLS = ("kernel", "reference")


class Op(NamedTuple):
    """A fused op and the reference it is tested equal to (``tests/kernels``)."""

    kernel: str  # the submodule of normlab.kernels that defines it (under the op's name)
    reference: str | None  # "module" (same name) or "module:attr"; None: kernel-only


# public name -> (kernel submodule, reference): the one table that pairs them
OPS: dict[str, Op] = {
    "layer_norm_forward": Op("norms", "normlab.functional.layernorm"),
    "layer_norm_backward": Op("norms", "normlab.functional.layernorm"),
    "rms_norm_forward": Op("norms", "normlab.functional.rmsnorm"),
    "rms_norm_backward": Op("norms", "normlab.functional.rmsnorm"),
    "add_norm_forward": Op("add_norm", "normlab.functional.add_norm"),
    "add_norm_backward": Op("add_norm", "normlab.functional.add_norm"),
    "keep_mask": Op("add_norm", None),  # the reference's keep_mask takes (key, rows, C)
    "softmax_forward": Op("softmax", "normlab.functional.softmax"),
    "softmax_backward": Op("softmax", "normlab.functional.softmax"),
    "capped_softmax_forward": Op("softmax", "normlab.functional.softmax"),
    "capped_softmax_backward": Op("softmax", "normlab.functional.softmax"),
    "cross_entropy_forward": Op("softmax", "normlab.functional.losses"),
    "cross_entropy_backward": Op("softmax", "normlab.functional.losses"),
    "gelu_forward": Op("activations", "normlab.functional.activations"),
    "gelu_backward": Op("activations", "normlab.functional.activations"),
    "attention_forward": Op("attention", "normlab.functional.attention"),
    "attention_backward": Op("attention", "normlab.functional.attention"),
    "qk_norm_forward": Op("qk_norm", "normlab.functional.attention"),
    "qk_norm_backward": Op("qk_norm", "normlab.functional.attention"),
    "qk_norm_members_forward": Op("qk_norm", "normlab.functional.attention"),
    "qk_norm_members_backward": Op("qk_norm", "normlab.functional.attention"),
    # quantization is a precision op, not a layer: its reference is normlab.precision's
    "quantize": Op("rounding", "normlab.precision.rounding"),
    # a low-precision running sum, chunked: the accumulation roles' reference is precision's
    "accumulate_sum": Op("accumulate", "normlab.precision.accumulate"),
    # NVFP4's quantize-dequantize (TE's plain path): equal to nvfp4_quantize(...).dequantize()
    "nvfp4_te_qdq": Op("nvfp4", None),
}

__all__ = sorted(OPS) + ["IMPLS", "OPS", "Op", "available", "check_impl", "resolve", "warm_up"]


def __getattr__(name: str) -> Any:
    """An op, imported from its submodule at its first use and kept as this module's attribute
    (later uses do not come back here: an experiment's step calls ops by this module's name)."""
    if name in OPS:
        module = importlib.import_module(f"{__name__}.{OPS[name].kernel}")
        value = globals()[name] = getattr(module, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available() -> bool:
    """Whether numba can be imported (the kernels' only extra dependency)."""
    try:
        importlib.import_module("numba")
    except ImportError:
        return False
    return True


def check_impl(impl: Any) -> str:
    """``impl`` if it is "kernel" or "reference", else a ValueError naming the choices."""
    from .. import _checks as ck

    ck.choice(impl, "impl", IMPLS)
    return impl


def resolve(impl: str, name: str) -> Callable:
    """The function ``name`` (e.g. "layer_norm_forward") of the kernel or the reference path
    (looked up once per pair, as modules resolve their ops at every call; a bad pair raises and
    is not remembered)."""
    try:
        return _resolve(impl, name)
    except TypeError:  # an unhashable impl or name: the checks say what is accepted
        check_impl(impl)
        raise


@functools.cache
def _resolve(impl: str, name: str) -> Callable:
    check_impl(impl)
    known = sorted(n for n, op in OPS.items() if impl == "kernel" or op.reference is not None)
    if name not in known:
        raise ValueError(f"no {impl} implementation of {name!r}; known: {known}")
    if impl == "kernel":
        return __getattr__(name)
    module, _, attr = str(OPS[name].reference).partition(":")
    return getattr(importlib.import_module(module), attr or name)


def warm_up() -> float:
    """Compile, or load from the on-disk cache, the float32 kernels on a tiny input; returns the
    seconds it took (the first-call cost a process pays, once)."""
    import time

    import numpy as np

    t0 = time.perf_counter()
    x = np.ones((2, 4), np.float32)
    w = np.ones(4, np.float32)
    _y, c = __getattr__("layer_norm_forward")(x, w, w)
    __getattr__("layer_norm_backward")(x, c)
    _y, c = __getattr__("rms_norm_forward")(x, w)
    __getattr__("rms_norm_backward")(x, c)
    (_y, _r), c = __getattr__("add_norm_forward")(x, x, w, w)
    __getattr__("add_norm_backward")((x, x), c)
    return time.perf_counter() - t0
