"""Fused CPU kernels (numba): the fast paths of ``normlab.functional``, with the same contracts.

Each op here has the signature, the cache type and the dtype rules of its reference in
``normlab.functional`` (a cache from one can be fed to the other's backward), and is tested equal
to it: bitwise where the computation is element-wise (residual sums, dropout, quantization) and
within a tolerance derived from the format wherever a row reduction is involved (a reordered
sum differs in its last bits). See ``tests/kernels``.

    from normlab import kernels
    y, cache = kernels.layer_norm_forward(x, gamma, beta, eps)
    dx, dgamma, dbeta = kernels.layer_norm_backward(dy, cache)

Kernels vs reference: the switch
--------------------------------
Nothing global decides which path runs. ``normlab.functional`` is always the readable NumPy
reference and ``normlab.kernels`` always the fused path; you call the one you want. The ``nn``
modules take ``impl="kernel"`` (the default) or ``impl="reference"`` at construction, and
``module.set_impl("reference")`` switches a module and all its children, as ``eval()`` does for
the mode. ``resolve(impl, name)`` returns the function ``name`` of either path. Both paths agree
within the tolerances of ``tests/kernels``, and dropout draws the same mask from the same
``rng`` on both.

What runs fused: LayerNorm, RMSNorm, the residual add + norm, softmax (plain, and soft-capped
with the causal mask), cross-entropy, GELU, quantization, and attention (``attention.py``: the
matmuls around the capped causal softmax kernel). ``optim.adamw_update`` is AdamW's update in one
pass over flat buffers, bit for bit NumPy's; ``normlab.train.AdamW`` calls it itself.

Compilation: every kernel is compiled on its first call for each combination of argument types
(about 1 to 3 s each) and cached on disk (``cache=True``, in ``__pycache__`` beside this
package, or ``NUMBA_CACHE_DIR``); a later process loads the machine code (milliseconds).
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
from typing import Any, Callable

IMPLS = ("kernel", "reference")

# public name -> submodule of normlab.kernels that defines it
_KERNELS = {
    "layer_norm_forward": "norms",
    "layer_norm_backward": "norms",
    "rms_norm_forward": "norms",
    "rms_norm_backward": "norms",
    "add_norm_forward": "add_norm",
    "add_norm_backward": "add_norm",
    "keep_mask": "add_norm",
    "softmax_forward": "softmax",
    "softmax_backward": "softmax",
    "capped_softmax_forward": "softmax",
    "capped_softmax_backward": "softmax",
    "cross_entropy_forward": "softmax",
    "cross_entropy_backward": "softmax",
    "gelu_forward": "activations",
    "gelu_backward": "activations",
    "attention_forward": "attention",
    "attention_backward": "attention",
    "quantize": "rounding",
}

# public name -> module of the reference with the same name (for resolve(..., "reference"))
_REFERENCE = {
    "layer_norm_forward": "normlab.functional.layernorm",
    "layer_norm_backward": "normlab.functional.layernorm",
    "rms_norm_forward": "normlab.functional.rmsnorm",
    "rms_norm_backward": "normlab.functional.rmsnorm",
    "add_norm_forward": "normlab.functional.add_norm",
    "add_norm_backward": "normlab.functional.add_norm",
    "softmax_forward": "normlab.functional.softmax",
    "softmax_backward": "normlab.functional.softmax",
    "capped_softmax_forward": "normlab.kernels.softmax:capped_softmax_reference",
    "capped_softmax_backward": "normlab.kernels.softmax:capped_softmax_reference_backward",
    "cross_entropy_forward": "normlab.functional.losses",
    "cross_entropy_backward": "normlab.functional.losses",
    "gelu_forward": "normlab.functional.activations",
    "gelu_backward": "normlab.functional.activations",
    "attention_forward": "normlab.functional.attention",
    "attention_backward": "normlab.functional.attention",
    "quantize": "normlab.precision.rounding",
}

__all__ = sorted(_KERNELS) + ["IMPLS", "available", "check_impl", "resolve", "warm_up"]


def __getattr__(name: str) -> Any:
    if name in _KERNELS:
        module = importlib.import_module(f"{__name__}.{_KERNELS[name]}")
        return getattr(module, name)
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


@functools.lru_cache(maxsize=None)
def _resolve(impl: str, name: str) -> Callable:
    check_impl(impl)
    table = _KERNELS if impl == "kernel" else _REFERENCE
    if name not in table:
        raise ValueError(f"no {impl} implementation of {name!r}; known: {sorted(table)}")
    if impl == "kernel":
        return __getattr__(name)
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr or name)


def warm_up() -> float:
    """Compile, or load from the on-disk cache, the float32 kernels on a tiny input; returns the
    seconds it took (the first-call cost a process pays, once)."""
    import time

    import numpy as np

    t0 = time.perf_counter()
    x = np.ones((2, 4), np.float32)
    w = np.ones(4, np.float32)
    y, c = __getattr__("layer_norm_forward")(x, w, w)
    __getattr__("layer_norm_backward")(x, c)
    y, c = __getattr__("rms_norm_forward")(x, w)
    __getattr__("rms_norm_backward")(x, c)
    (y, r), c = __getattr__("add_norm_forward")(x, x, w, w)
    __getattr__("add_norm_backward")((x, x), c)
    return time.perf_counter() - t0
