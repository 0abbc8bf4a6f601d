"""Optimizers as update rules over a dict of parameter arrays (updated in place), with PyTorch's
semantics step for step.

AdamW (Loshchilov & Hutter 2019; ``torch.optim.AdamW``), at step t with gradient g:

    p <- p - lr * wd * p                                   decoupled weight decay
    m <- b1 m + (1 - b1) g          v <- b2 v + (1 - b2) g^2
    p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

SGD with momentum (``torch.optim.SGD``, dampening 0): g <- g + wd * p; buf <- mu buf + g (buf = g
at the first step); p <- p - lr * buf.

Weight decay applies to the parameters named in ``decay`` (by default those with two or more
axes: matrices and embedding tables, not gains, biases or scalars).

The moments are kept in float32 by default (float64 for float64 parameters); ``state_round`` is a
hook that rounds them after every update (a precision policy's optimizer format), and
``param_round`` rounds the parameters after every update (storage without master weights).
``step`` returns the squared norm of each parameter's update, for the trainer's update RMS.

Without rounding hooks, and with parameters, gradients and moments of one dtype (float32 or
float64), ``AdamW.step`` runs the fused kernel ``normlab.kernels.optim.adamw_update`` (the same
arithmetic bit for bit, one pass instead of about twelve): one call over the flat buffers when the
parameters and the gradients are views into one buffer each, in order (a model after
``Module.flatten()``), else one call per parameter. The moments always live in two flat buffers,
``state[name]["m"]`` and ``["v"]`` being views into them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import compute_dtype

Round = Callable[[np.ndarray], np.ndarray] | None


def clip_grad_norm(grads: dict[str, np.ndarray], max_norm: float, total_norm: float) -> float:
    """Scale every gradient in place so that their global norm is at most ``max_norm``, as
    ``torch.nn.utils.clip_grad_norm_``: by max_norm / (total_norm + 1e-6) when that is below 1.
    ``total_norm`` is the global norm sqrt(sum of squares) already measured; returns the factor."""
    coef = max_norm / (total_norm + 1e-6)
    if coef < 1.0:
        for g in grads.values():
            g *= g.dtype.type(coef)
        return coef
    return 1.0


def _default_decay(params: dict[str, np.ndarray]) -> set[str]:
    return {k for k, p in params.items() if p.ndim >= 2}


def _state_views(
    params: dict[str, np.ndarray], names: tuple[str, ...]
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Zeroed optimizer state per parameter: ``{param: {state name: array}}``, and, when every
    parameter has one compute dtype, ``{state name: flat buffer}`` of which those arrays are
    views (else an empty dict and separate arrays)."""
    dtypes = {compute_dtype(p.dtype) for p in params.values()}
    if len(dtypes) != 1:
        return {name: {s: np.zeros(p.shape, compute_dtype(p.dtype)) for s in names}
                for name, p in params.items()}, {}
    total = sum(p.size for p in params.values())
    dtype = dtypes.pop()
    flat = {s: np.zeros(total, dtype) for s in names}
    state, lo = {}, 0
    for name, p in params.items():
        state[name] = {s: flat[s][lo : lo + p.size].reshape(p.shape) for s in names}
        lo += p.size
    return state, flat


def flat_buffer(arrays: list[np.ndarray]) -> np.ndarray | None:
    """The 1-D span of one C-contiguous buffer of which ``arrays`` are consecutive contiguous
    views, in order (as ``Module.flatten`` lays out parameters and gradients; the whole buffer,
    or one member's row of an ensemble's (members, n) buffer), else None."""
    base = arrays[0].base if arrays else None
    if not isinstance(base, np.ndarray) or not base.flags.c_contiguous:
        return None
    start = addr = arrays[0].ctypes.data
    for a in arrays:
        if (a.base is not base or a.dtype != base.dtype or not a.flags.c_contiguous
                or a.ctypes.data != addr):
            return None
        addr += a.nbytes
    lo = (start - base.ctypes.data) // base.itemsize
    flat = base.reshape(-1)
    return flat if lo == 0 and addr - start == base.nbytes else flat[lo:lo + (addr - start)
                                                                       // base.itemsize]


def _memory_order(p: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p`` as a 1-D view in its memory order (a transposed view, such as a GPT-2 weight mapped
    by ``load_hf``, through its transpose) and ``g`` in the same element order, so that an update
    written into the view lands in ``p``."""
    if not p.flags.c_contiguous and p.T.flags.c_contiguous:
        p, g = p.T, g.T
    if not p.flags.c_contiguous:
        raise ValueError(f"a parameter must be contiguous (or a transposed view of a contiguous "
                         f"array) to be updated in place; got strides {p.strides}")
    return p.reshape(-1), np.ascontiguousarray(g).reshape(-1)


class Optimizer:
    """Shared plumbing: the parameters, the decay set, the step count and the rounding hooks."""

    state_names: tuple[str, ...] = ()

    def __init__(self, params: dict[str, np.ndarray], *, weight_decay: float,
                 decay: Iterable[str] | None, state_round: Round, param_round: Round):
        if not params:
            raise ValueError("the optimizer needs at least one parameter")
        self.params = params
        self.weight_decay = ck.real(weight_decay, "weight_decay", lo=0)
        self.decay = _default_decay(params) if decay is None else set(decay)
        unknown = self.decay - set(params)
        if unknown:
            raise ValueError(f"decay names unknown parameters: {sorted(unknown)}")
        self.state_round, self.param_round = state_round, param_round
        self.t = 0
        self.state, self.flat_state = _state_views(params, self.state_names)

    def _finish(self, name: str, p: np.ndarray, update: np.ndarray) -> float:
        """Apply ``p -= update`` (rounded if asked) and return the squared norm of the change."""
        if self.param_round is None:
            p -= update.astype(p.dtype, copy=False)
            return float(np.vdot(update, update))
        old = p.copy()
        p[...] = self.param_round(p - update)
        change = (p - old).astype(np.float64)
        return float(np.vdot(change, change))

    def _round_state(self, name: str) -> None:
        if self.state_round is not None:
            for _key, buf in self.state[name].items():
                buf[...] = self.state_round(buf)

    def _check(self, grads: dict[str, np.ndarray], lr: float) -> float:
        missing = set(self.params) - set(grads)
        if missing:
            raise ValueError(f"gradients missing for {sorted(missing)}")
        return ck.real(lr, "lr", lo=0)

    def rebind(self, params: dict[str, np.ndarray]) -> None:
        """Update ``params`` from now on: arrays with the names (in order), shapes and dtypes of
        the present ones (the same values moved to other memory, as an ensemble stacked again
        moves them); the state (step count, moments, laid out in that order) is kept."""
        if list(params) != list(self.params):
            raise ValueError(f"rebind: params must name {list(self.params)} in this order; got "
                             f"{list(params)}")
        for name, p in self.params.items():
            q = params[name]
            if q.shape != p.shape or q.dtype != p.dtype:
                raise ValueError(f"rebind: parameter {name!r} must keep its shape {p.shape} and "
                                 f"dtype {p.dtype}; got {q.shape} {q.dtype}")
        self.params = params

    def state_dict(self) -> dict[str, np.ndarray]:
        """Flat arrays for a checkpoint: ``t`` and ``<param>/<moment>``."""
        out = {"t": np.asarray(self.t, np.int64)}
        for name, bufs in self.state.items():
            for key, buf in bufs.items():
                out[f"{name}/{key}"] = buf
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        expected = {"t"} | {f"{n}/{k}" for n in self.state for k in self.state_names}
        if set(state) != expected:
            raise ValueError(
                f"optimizer state does not match: missing {sorted(expected - set(state))}, "
                f"unexpected {sorted(set(state) - expected)}"
            )
        self.t = int(state["t"])
        for name, bufs in self.state.items():
            for key, buf in bufs.items():
                value = np.asarray(state[f"{name}/{key}"])
                if value.shape != buf.shape or value.dtype != buf.dtype:
                    raise ValueError(
                        f"optimizer state {name}/{key} is {value.dtype} {value.shape}; "
                        f"expected {buf.dtype} {buf.shape}"
                    )
                buf[...] = value


class AdamW(Optimizer):
    """AdamW with decoupled weight decay (PyTorch's algorithm and defaults, except that decay
    applies only to ``decay``). ``fused=False`` always runs the NumPy lines of ``step`` (the
    fused kernel gives the same bits)."""

    state_names = ("m", "v")

    def __init__(self, params: dict[str, np.ndarray], *, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, decay: Iterable[str] | None = None,
                 state_round: Round = None, param_round: Round = None, fused: bool = True):
        super().__init__(params, weight_decay=weight_decay, decay=decay, state_round=state_round,
                         param_round=param_round)
        self.fused = ck.flag(fused, "fused")  # False: always the NumPy lines below (the reference)
        self.b1 = ck.real(betas[0], "beta1", lo=0, hi=1, hi_open=True)
        self.b2 = ck.real(betas[1], "beta2", lo=0, hi=1, hi_open=True)
        self.eps = ck.real(eps, "eps", lo=0)

    def _fused(self, grads: dict[str, np.ndarray]) -> bool:
        """Whether this step runs the fused kernel (see the module's docstring)."""
        if (not self.fused or self.state_round is not None or self.param_round is not None
                or not self.flat_state):
            return False
        dt = self.flat_state["m"].dtype
        return all(p.dtype == dt and grads[n].dtype == dt for n, p in self.params.items())

    def _fused_step(self, grads: dict[str, np.ndarray], lr: float) -> dict[str, float]:
        from ..kernels.optim import adamw_update, update

        names = list(self.params)
        hyper: dict[str, Any] = dict(lr=lr, b1=self.b1, b2=self.b2, eps=self.eps,
                                     weight_decay=self.weight_decay, t=self.t)
        m, v = self.flat_state["m"], self.flat_state["v"]
        plan = self._plan(names, [self.params[n] for n in names], [grads[n] for n in names])
        if plan is not None:  # the flat buffers of the last step, checked when first seen
            p, g, starts, decay = plan
            return dict(zip(names, update(p, g, m, v, starts, decay, **hyper).tolist()))
        sizes = [self.params[n].size for n in names]
        decay = self._decay_flags(names)
        out, lo = {}, 0
        for i, n in enumerate(names):
            hi = lo + sizes[i]
            pi, gi = _memory_order(self.params[n], grads[n])
            sq = adamw_update(pi, gi, m[lo:hi], v[lo:hi], np.array([0, sizes[i]]),
                              decay[i : i + 1], **hyper)
            out[n], lo = float(sq[0]), hi
        return out

    def _decay_flags(self, names: list[str]) -> np.ndarray:
        return np.array([n in self.decay and self.weight_decay > 0 for n in names])

    def _plan(self, names: list[str], ps: list[np.ndarray], gs: list[np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The fused step's buffers and layout, (flat params, flat grads, starts, decay flags),
        or None where the arrays are not one buffer each; found (``flat_buffer``) and checked
        (``kernels.optim.check_buffers``) again only when an array, the decay or the moments'
        buffers are not those of the last step."""
        from ..kernels.optim import check_buffers

        m, v = self.flat_state["m"], self.flat_state["v"]
        saved = self._flat_cache
        decays = (self.weight_decay, frozenset(self.decay))
        if (saved is not None and len(saved[0]) == len(ps) and saved[1] == decays
                and saved[2] is m and saved[3] is v
                and all(a is b for a, b in zip(saved[0], ps))
                and all(a is b for a, b in zip(saved[4], gs))):
            return saved[5]
        p, g = flat_buffer(ps), flat_buffer(gs)
        plan = None
        if p is not None and g is not None:
            starts = np.concatenate([[0], np.cumsum([a.size for a in ps])]).astype(np.int64)
            decay = self._decay_flags(names)
            check_buffers(p, g, m, v, starts, decay)
            plan = (p, g, starts, decay)
        self._flat_cache = (ps, decays, m, v, gs, plan)
        return plan

    # (params, (weight decay, decayed names), m, v, grads, the plan) of the last step
    _flat_cache: tuple | None = None

    def step(self, grads: dict[str, np.ndarray], lr: float) -> dict[str, float]:
        """One update with learning rate ``lr``; returns ||update||^2 per parameter."""
        lr = self._check(grads, lr)
        self.t += 1
        if self._fused(grads):
            return self._fused_step(grads, lr)
        bc1 = 1.0 - self.b1**self.t
        bc2_sqrt = math.sqrt(1.0 - self.b2**self.t)
        sq = {}
        for name, p in self.params.items():
            m, v = self.state[name]["m"], self.state[name]["v"]
            g = grads[name].astype(m.dtype, copy=False)
            m *= self.b1
            m += (1.0 - self.b1) * g
            v *= self.b2
            v += (1.0 - self.b2) * (g * g)
            self._round_state(name)
            denom = np.sqrt(v)
            denom /= bc2_sqrt
            denom += self.eps
            update = m / denom
            update *= lr / bc1
            if name in self.decay and self.weight_decay:
                update += (lr * self.weight_decay) * p.astype(m.dtype, copy=False)
            sq[name] = self._finish(name, p, update)
        return sq


class SGD(Optimizer):
    """SGD with (heavy-ball) momentum and coupled weight decay, as ``torch.optim.SGD``."""

    state_names = ("buf",)

    def __init__(self, params: dict[str, np.ndarray], *, momentum: float = 0.9,
                 weight_decay: float = 0.0, decay: Iterable[str] | None = None,
                 state_round: Round = None, param_round: Round = None):
        super().__init__(params, weight_decay=weight_decay, decay=decay, state_round=state_round,
                         param_round=param_round)
        self.momentum = ck.real(momentum, "momentum", lo=0, hi=1, hi_open=True)

    def step(self, grads: dict[str, np.ndarray], lr: float) -> dict[str, float]:
        """One update with learning rate ``lr``; returns ||update||^2 per parameter."""
        lr = self._check(grads, lr)
        self.t += 1
        sq = {}
        for name, p in self.params.items():
            buf = self.state[name]["buf"]
            g = grads[name].astype(buf.dtype, copy=True)
            if name in self.decay and self.weight_decay:
                g += self.weight_decay * p
            if self.momentum == 0.0 or self.t == 1:
                buf[...] = g
            else:
                buf *= self.momentum
                buf += g
            self._round_state(name)
            sq[name] = self._finish(name, p, lr * buf)
        return sq
