"""Check a hand-written backward against central finite differences in float64.

An op is a pair ``forward(*inputs) -> (out, cache)`` and ``backward(dout, cache) -> grads``
(gradients in the order of the inputs). ``gradcheck`` draws a random upstream gradient ``dout``,
so it checks the whole vector-Jacobian product, not only the gradient of ``out.sum()``::

    from functools import partial
    from normlab.functional import layer_norm_forward, layer_norm_backward
    from normlab.testing import gradcheck

    rng = np.random.default_rng(0)
    x, gamma, beta = rng.normal(size=(4, 7)), rng.normal(size=7), rng.normal(size=7)
    report = gradcheck(partial(layer_norm_forward, eps=1e-5), layer_norm_backward,
                       {"x": x, "gamma": gamma, "beta": beta}, rng=rng)
    print(report)            # max absolute and relative error per input
    assert report.passed

Use random parameters (never ones and zeros: they hide wrong backwards) and float64 inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class InputError:
    """Errors of one input's gradient: analytic vs numeric."""

    name: str
    shape: tuple[int, ...]
    max_abs: float  # max |analytic - numeric|
    max_rel: float  # max_abs / max(max |numeric|, tiny): a norm-wise relative error
    passed: bool


@dataclass(frozen=True)
class GradcheckReport:
    """Per-input errors; ``passed`` when every input is within ``rtol`` or ``atol``."""

    inputs: list[InputError] = field(default_factory=list)
    rtol: float = 1e-6
    atol: float = 1e-8

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.inputs)

    @property
    def max_rel(self) -> float:
        return max((e.max_rel for e in self.inputs), default=0.0)

    @property
    def max_abs(self) -> float:
        return max((e.max_abs for e in self.inputs), default=0.0)

    def __getitem__(self, name: str) -> InputError:
        for e in self.inputs:
            if e.name == name:
                return e
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"{'input':<16} {'shape':<16} {'max abs err':>12} {'max rel err':>12}  ok"]
        for e in self.inputs:
            lines.append(
                f"{e.name:<16} {e.shape!s:<16} {e.max_abs:12.3e} {e.max_rel:12.3e}  "
                f"{'yes' if e.passed else 'NO'}"
            )
        return "\n".join(lines)


def numerical_grad(
    f: Callable[[], np.ndarray], x: np.ndarray, dout: np.ndarray, h: float = 1e-6
) -> np.ndarray:
    """Central differences of ``sum(f() * dout)`` with respect to ``x``, perturbed in place.

    ``f`` reads ``x`` (and must not keep it); ``x`` is restored exactly afterwards.
    """
    grad = np.zeros(x.shape, dtype=np.float64)
    flat = x.reshape(-1)  # a view: x must be contiguous
    if not np.shares_memory(flat, x):
        raise ValueError("numerical_grad needs a contiguous x")
    g = grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        plus = np.sum(np.asarray(f(), dtype=np.float64) * dout)
        flat[i] = old - h
        minus = np.sum(np.asarray(f(), dtype=np.float64) * dout)
        flat[i] = old
        g[i] = (plus - minus) / (2.0 * h)
    return grad


def _named_float64(inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]
                   ) -> tuple[list[str], list[np.ndarray]]:
    """The inputs' names (``input0``, ... by position) and float64 C-ordered copies."""
    if isinstance(inputs, Mapping):
        return list(inputs), [np.array(v, dtype=np.float64, order="C") for v in inputs.values()]
    values = [np.array(v, dtype=np.float64, order="C") for v in inputs]
    return [f"input{i}" for i in range(len(values))], values


def gradcheck(
    forward: Callable[..., tuple[Any, Any]],
    backward: Callable[[np.ndarray, Any], Any],
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    *,
    rng: np.random.Generator | None = None,
    wrt: Sequence[str] | None = None,
    h: float = 1e-6,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> GradcheckReport:
    """Compare ``backward`` with central differences of ``forward`` in float64.

    Args:
        forward: ``forward(*inputs) -> (out, cache)``; bind options with ``functools.partial``.
        backward: ``backward(dout, cache) -> grad or tuple of grads`` in the order of ``inputs``
            (None for an input without a gradient).
        inputs: the inputs, by name (a dict) or by position; converted to float64 copies.
        rng: draws the upstream gradient (default: ``np.random.default_rng(0)``).
        wrt: names of the inputs to check (default: every input whose gradient is not None).
        h: finite-difference step.
        rtol, atol: an input passes when ``max_rel <= rtol`` or ``max_abs <= atol``.

    Returns:
        A ``GradcheckReport`` with the max absolute and relative error per input.
    """
    names, values = _named_float64(inputs)
    rng = np.random.default_rng(0) if rng is None else rng

    out, cache = forward(*values)
    out = np.asarray(out, dtype=np.float64)
    dout = rng.normal(size=out.shape)
    grads = backward(dout, cache)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != len(values):
        raise ValueError(f"backward returned {len(grads)} gradients for {len(values)} inputs")
    check = names if wrt is None else list(wrt)
    for name in check:
        if name not in names:
            raise ValueError(f"wrt names an unknown input {name!r}; inputs are {names}")

    errors = []
    for name, x, g in zip(names, values, grads):
        if name not in check or g is None:
            continue
        g = np.asarray(g, dtype=np.float64)
        if g.shape != x.shape:
            raise ValueError(f"gradient of {name} has shape {g.shape}, the input has {x.shape}")
        num = numerical_grad(lambda: forward(*values)[0], x, dout, h)
        max_abs = float(np.max(np.abs(g - num), initial=0.0))
        scale = float(np.max(np.abs(num), initial=0.0))
        max_rel = max_abs / max(scale, 1e-300) if max_abs > 0 else 0.0
        errors.append(
            InputError(name, x.shape, max_abs, max_rel, max_rel <= rtol or max_abs <= atol)
        )
    return GradcheckReport(errors, rtol, atol)
