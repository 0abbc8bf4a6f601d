"""The one PyTorch-parity driver: normlab and PyTorch, each against PyTorch in float64.

For an op given as normlab's ``forward(*inputs) -> (out, cache)`` / ``backward(dout, cache) ->
grads`` and PyTorch's ``torch_fn(**tensors) -> out``, :func:`torch_parity` runs both libraries in
``dtype`` on the same rounded inputs and the same output gradient, and measures each one's
norm-wise relative error (``errors``) against PyTorch's float64 result on those inputs, for the
forward and every gradient. Neither library is taken as exact; the rule (flash-attention's
tests' pattern) is

    ours <= 2 x torch's + ulps x eps(dtype)        (or ours <= min_ulps x eps(dtype))

and in float64, where PyTorch's own error is 0, ``ours <= rtol64`` for ops whose float64 results
differ by summation order (matrix products), else the same rule. The tests
(``tests/functional``) and ``normlab check`` both use it; torch is imported through
``normlab.testing.oracles`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .compare import errors, format_eps


class Tolerance(NamedTuple):
    """How close to PyTorch an op must be (see the module docstring)."""

    ulps: float = 8.0  # low formats: ours <= 2 x torch's error + ulps x eps
    min_ulps: float = 0.0  # an error of at most this many eps passes outright
    rtol64: float | None = None  # float64: ours <= rtol64 (None: the rule above)


DEFAULT = Tolerance()
GEMM = Tolerance(min_ulps=64.0, rtol64=1e-12)  # matrix products: torch sums in another order


def dyt_scales(inputs: dict[str, np.ndarray], dout: np.ndarray) -> dict[str, float]:
    """DyT's dalpha = sum(dy * weight * (1 - t^2) * x) is a sum of mixed signs: its error is
    measured against the sum of the terms' magnitudes (``scales`` of :func:`torch_parity`)."""
    t = np.tanh(inputs["alpha"] * inputs["x"])
    return {"alpha": float(np.sum(np.abs(dout * inputs["weight"] * (1 - t * t) * inputs["x"])))}


def derf_scales(inputs: dict[str, np.ndarray], dout: np.ndarray) -> dict[str, float]:
    """Derf's dalpha and dshift are sums of mixed signs: their errors are measured against the
    sums of the terms' magnitudes (``scales`` of :func:`torch_parity`)."""
    z = inputs["alpha"] * inputs["x"] + inputs["shift"]
    s = np.abs(dout * inputs["weight"] * 2 / np.sqrt(np.pi) * np.exp(-z * z))
    return {"alpha": float(np.sum(s * np.abs(inputs["x"]))), "shift": float(np.sum(s))}


class ParityRow(NamedTuple):
    what: str  # "forward" or "d<input>"
    ours: float  # normlab's norm-wise relative error against PyTorch float64
    torch: float  # PyTorch's own error in the same dtype
    bound: float  # the largest error the rule accepts for ours
    ok: bool


@dataclass
class ParityReport:
    """Forward and backward errors of both libraries against the float64 reference."""

    dtype: str
    rows: list[ParityRow]  # the forward first, then one row per gradient compared
    out: Any = None  # normlab's output
    grads: dict[str, Any] = field(default_factory=dict)  # normlab's gradients, by input name
    dtype_kept: bool = True  # normlab's output came back in the input dtype (not part of ok:
    #                          a loss, say, is returned in float32 by design)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def forward(self) -> ParityRow:
        return self.rows[0]

    def backward(self) -> tuple[float, float]:
        """(ours, torch's): the worst gradient error of each library (0 when none compared)."""
        grads = self.rows[1:]
        return (max((r.ours for r in grads), default=0.0),
                max((r.torch for r in grads), default=0.0))

    def failures(self) -> str:
        return "; ".join(f"{r.what}: norm-wise relative error {r.ours:.3g} > {r.bound:.3g} "
                         f"(PyTorch's own {r.torch:.3g}, {self.dtype})"
                         for r in self.rows if not r.ok)


def torch_parity(forward: Callable, backward: Callable, torch_fn: Callable,
                 inputs: dict[str, np.ndarray], dtype: Any, rng: np.random.Generator, *,
                 out_keep: np.ndarray | None = None, skip: tuple[str, ...] = (),
                 scales: Callable | None = None, tol: Tolerance = DEFAULT) -> ParityReport:
    """Run normlab and PyTorch in ``dtype`` on ``inputs`` (float64 arrays, rounded to ``dtype``
    first) and compare both with PyTorch's float64 result on the rounded inputs.

    ``rng`` draws the output gradient; ``out_keep`` masks don't-care outputs; ``skip`` names
    gradients not compared; ``scales(exact_inputs, dout) -> {name: magnitude}`` gives the natural
    magnitude of a gradient that is a sum with cancellation (see ``errors``).
    """
    from . import oracles

    dtype = np.dtype(dtype)
    inputs = {k: np.asarray(v).astype(dtype) for k, v in inputs.items()}
    exact = {k: v.astype(np.float64) for k, v in inputs.items()}
    out, cache = forward(*inputs.values())
    dout = rng.normal(size=np.shape(out))
    if out_keep is not None:
        dout = dout * out_keep
    dout = dout.astype(dtype)
    grads = backward(dout, cache)
    grads = dict(zip(inputs, grads if isinstance(grads, tuple) else (grads,)))
    wrt = tuple(k for k, g in grads.items() if g is not None and k not in skip)
    ref_out, ref_grads = oracles.vjp(torch_fn, exact, dout.astype(np.float64), wrt)
    t_out, t_grads = oracles.vjp(torch_fn, inputs, dout, wrt)
    keep = 1.0 if out_keep is None else out_keep
    f64 = lambda a: np.asarray(a).astype(np.float64) * keep  # noqa: E731
    scale = {} if scales is None else scales(exact, dout.astype(np.float64))
    compared = [("forward", f64(out), f64(t_out), f64(ref_out), 0.0)]
    compared += [(f"d{k}", grads[k], t_grads[k], ref_grads[k], scale.get(k, 0.0)) for k in wrt]
    rows = [_row(what, ours, theirs, ref, s, dtype, tol)
            for what, ours, theirs, ref, s in compared]
    return ParityReport(str(dtype), rows, out, grads, np.asarray(out).dtype == dtype)


def _row(what: str, ours: Any, theirs: Any, ref: Any, scale: float, dtype: np.dtype,
         tol: Tolerance) -> ParityRow:
    mine = errors(ours, ref, scale)[1]
    torch_err = errors(theirs, ref, scale)[1]
    eps = format_eps(dtype)
    if dtype == np.float64 and tol.rtol64 is not None:
        bound = tol.rtol64
    else:
        bound = max(2.0 * torch_err + tol.ulps * eps, tol.min_ulps * eps)
    return ParityRow(what, mine, torch_err, bound, bool(mine <= bound))


__all__ = ["DEFAULT", "GEMM", "ParityReport", "ParityRow", "Tolerance", "derf_scales",
           "dyt_scales", "torch_parity"]
