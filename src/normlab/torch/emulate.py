"""``emulate(model, policy)``: a normlab ``PrecisionPolicy`` on an unmodified ``torch.nn.Module``.

Inside ``with emulate(model, policy):`` the model's forward and backward are rounded at the same
points as normlab's own modules (``normlab.nn.numerics``), each tied to one of the policy's
roles. Every rounding is ``normlab.torch.apply``: ``Precision.apply`` in torch operations on the
tensor's device (unscaled, per-tensor, delayed and MX scaling), so the values are normlab's bit
for bit given the same inputs.

======================================  =========================================  ==============
point                                   forward / backward                         role
======================================  =========================================  ==============
``F.linear(x, W, b)`` (``nn.Linear``)   W -> compute(params(W)); x -> compute(x);   see left
``x @ W`` with W a parameter (or a      y -> activations(y). Backward: dY ->
view: a tied head), ``addmm(b, x, W)``  gradients(dY); dx = dY Wq -> activations;
                                        dW = dY^T xq -> activations; db unrounded
``F.embedding(ids, W)``                 W -> params(W); its gradient unrounded      params
``F.scaled_dot_product_attention``      the output -> activations (forward)         activations
the residual stream: the outputs of     forward -> activations; the gradient        activations
the ``stream`` modules                  arriving at that output -> activations
the embedding output (``embed``)        forward -> activations                      activations
norms, softmax, activations, the loss   computed in float32 on the rounded inputs  (none)
======================================  =========================================  ==============

Matrix products between two activations (q k^T, p v written as ``@``) compute in float32, as
normlab's attention op does; its result is rounded where a ``scaled_dot_product_attention``
returns it. The ``accumulate`` role must be float32 (the products accumulate in float32).
MX blocks run along each tensor's last axis (the contraction axis of x, W and dY), as in
normlab. Delayed scaling keeps one amax history per tensor, keyed by the innermost module that
made the call, the call's number within it and the tensor's key; ``end_step()`` advances the
histories once per optimizer step.

The emulator rounds its own temporaries in place (the linear outputs, dx, dW) and holds the
rounded x and W for the backward in buffers reused from step to step
(``normlab.torch.quantize.Workspace``), so a large weight's rounding costs passes over memory
rather than fresh pages; an embedding rounds the rows it reads (the same values, where
``params`` is unscaled and deterministic). docs/torch.md gives the measured cost.

``stream`` (module names) defaults to the children of the model's first ``nn.ModuleList`` (the
decoder layers of a transformers model: the stream after each layer, where normlab rounds after
each sublayer); ``embed`` defaults to ``model.get_input_embeddings()`` where the model has it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..precision.roles import PolicyRoles
from .quantize import Workspace, apply, apply_, cast_from, is_transposed


class _Rounder:
    """Applies one policy's roles (``normlab.precision.roles.PolicyRoles``: the roles, their
    checks and the per-tensor scaling states, shared with normlab's own model) to torch tensors,
    with the buffers reused from step to step (``Workspace``)."""

    def __init__(self, roles: PolicyRoles):
        self.rounding = roles
        self.policy, self.roles, self.rng = roles.policy, roles.roles, roles.rng
        self.work = Workspace()

    @property
    def states(self) -> dict[str, Any]:
        """The per-tensor scaling states, by ``"<site>/<tensor>/<role>"``."""
        return self.rounding.states

    def _state(self, role: str, name: str) -> Any:
        return self.rounding.state(role, name)

    def __call__(self, role: str, x: torch.Tensor, name: str) -> torch.Tensor:
        """``role``'s rounding of x, a new tensor (x itself when the role does not round)."""
        p = self.roles[role]
        if not p.rounds:
            return x
        with torch.no_grad():
            return apply(p, x, rng=self.rng, state=self._state(role, name)).to(x.dtype)

    def inplace(self, role: str, x: torch.Tensor, name: str) -> torch.Tensor:
        """``role``'s rounding written into x, a tensor of the caller's that nothing else
        reads; the same values as ``__call__``."""
        p = self.roles[role]
        if not p.rounds:
            return x
        with torch.no_grad():
            state = self._state(role, name)
            if x.dtype == torch.float32 and (x.is_contiguous() or is_transposed(x)):
                return apply_(p, x, rng=self.rng, state=state, work=self.work)
            return x.copy_(apply(p, x, rng=self.rng, state=state))

    def chain(self, roles: tuple[str, ...], x: torch.Tensor,
              name: str) -> tuple[torch.Tensor, bool]:
        """The roles applied in turn to x: (the result, whether it is a ``Workspace`` buffer,
        to be given back once read). A role equal to the one before it and rounding
        deterministically without scaling is skipped: its rounding of grid values is the
        identity."""
        ps = [r for r in roles if self.roles[r].rounds]
        if not ps:
            return x, False
        if x.dtype != torch.float32:
            for role in roles:
                x = self(role, x, name)
            return x, False
        buf = self.work.take(x)
        with torch.no_grad():
            done = cast_from(self.roles[ps[0]], x, buf, self.work)
            if not done:
                buf.copy_(x)
        last = self.roles[ps[0]] if done else None
        for role in ps[1:] if done else ps:
            p = self.roles[role]
            if p != last or p.scaling is not None or p.rounding == "stochastic":
                self.inplace(role, buf, name)
            last = p
        return buf, True

    def give(self, *ts: torch.Tensor) -> None:
        for t in ts:
            self.work.give(t)

    def end_step(self) -> None:
        self.rounding.end_step()


class _Straight(torch.autograd.Function):
    """Round in the forward with ``fwd``, the gradient with ``bwd`` (None: unrounded)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fwd: Callable, bwd: Callable | None) -> torch.Tensor:
        ctx.bwd = bwd
        return fwd(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        return (g if ctx.bwd is None else ctx.bwd(g)), None, None


class _Linear(torch.autograd.Function):
    """y = activations(compute(x) compute(params(W))^T + b) and normlab's Linear backward. The
    rounded x and W are held for the backward in the rounder's buffers, given back after it
    (a second backward through the same graph after another forward is refused by autograd's
    check of the saved tensors' versions)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
                r: _Rounder, site: str) -> torch.Tensor:
        xq, own_x = r.chain(("compute",), x, f"{site}/input")
        wq, own_w = r.chain(("params", "compute"), w, f"{site}/weight")
        with torch._C.DisableTorchFunction():
            y = F.linear(xq, wq, b)
        ctx.save_for_backward(xq, wq)
        ctx.r, ctx.site, ctx.has_bias = r, site, b is not None
        ctx.pooled = [t for t, own in ((xq, own_x), (wq, own_w)) if own]
        return r.inplace("activations", y, f"{site}/output")

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        xq, wq = ctx.saved_tensors
        r, site = ctx.r, ctx.site
        with torch._C.DisableTorchFunction():
            g = r("gradients", dy, f"{site}/dout")
            dx = r.inplace("activations", g @ wq, f"{site}/dx")
            g2, x2 = g.reshape(-1, g.shape[-1]), xq.reshape(-1, xq.shape[-1])
            dw = r.inplace("activations", g2.transpose(0, 1) @ x2, f"{site}/dweight")
            db = g2.sum(0) if ctx.has_bias else None
        del xq, wq
        r.give(*ctx.pooled)
        ctx.pooled = []
        return dx, dw, db, None, None


def _is_weight(t: Any) -> bool:
    return isinstance(t, torch.nn.Parameter) or isinstance(getattr(t, "_base", None),
                                                            torch.nn.Parameter)


class _Mode(TorchFunctionMode):
    """Sends the rounded operations of the module docstring through the policy."""

    def __init__(self, owner: emulate):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        o = self.owner
        if func is F.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            return _Linear.apply(x, w, b, o.rounder, o.site("linear"))
        if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__) and \
                len(args) == 2 and args[1].dim() == 2 and _is_weight(args[1]):
            return _Linear.apply(args[0], args[1].transpose(0, 1), None, o.rounder,
                                 o.site("matmul"))
        if func in (torch.addmm, torch.Tensor.addmm) and len(args) == 3 and not kwargs \
                and args[2].dim() == 2 and _is_weight(args[2]):  # GPT-2's Conv1D: b + x W
            return _Linear.apply(args[1], args[2].transpose(0, 1), args[0], o.rounder,
                                 o.site("linear"))
        if func is F.embedding:
            return _embedding(o, func, args, kwargs)
        out = func(*args, **kwargs)
        if func is F.scaled_dot_product_attention:
            site = o.site("attention")
            return _Straight.apply(out, lambda t: o.rounder("activations", t, f"{site}/out"),
                                   None)
        return out


def _embedding(o: emulate, func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    """F.embedding with params(W): the rows read, rounded, where the rounding is one value's
    alone (unscaled, deterministic: the rows of the rounded table); else the whole table."""
    site = o.site("embedding")
    p = o.rounder.roles["params"]
    fwd = lambda t: o.rounder("params", t, f"{site}/param")  # noqa: E731
    max_norm = args[3] if len(args) > 3 else kwargs.get("max_norm")
    if p.scaling is None and p.rounding != "stochastic" and max_norm is None:
        return _Straight.apply(func(*args, **kwargs), fwd, None)
    return func(args[0], _Straight.apply(args[1], fwd, None), *args[2:], **kwargs)


class emulate:
    """A context that applies ``policy`` (a ``PrecisionPolicy`` or a preset name) to ``model``'s
    forward and backward; the model is not changed and is as before afterwards.

        with emulate(model, "fp8_hybrid", rng=np.random.default_rng(0)) as em:
            loss = model(idx, labels=idx).loss
            loss.backward()
            em.end_step()

    Args:
        model: a ``torch.nn.Module``.
        policy: a ``normlab.precision.PrecisionPolicy`` or a preset name.
        rng: a ``numpy.random.Generator``; required when a role rounds stochastically.
        stream: names of the modules whose outputs are the residual stream (module docstring).
        embed: the name of the module whose output is the stream's first value (forward only).
    """

    def __init__(self, model: torch.nn.Module, policy: Any, *,
                 rng: np.random.Generator | None = None, stream: Any = None,
                 embed: str | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        roles = PolicyRoles(policy, rng=rng, who="emulate")
        self.model, self.policy = model, roles.policy
        self.rounder = _Rounder(roles)
        names = dict(model.named_modules())
        self.stream = _default_stream(model) if stream is None else tuple(stream)
        self.embed = _default_embed(model) if embed is None else embed
        for n in self.stream + ((self.embed,) if self.embed else ()):
            if n not in names:
                raise ValueError(f"stream/embed: no module named {n!r} in the model")
        self._names = {id(m): n for n, m in names.items()}
        self._stack: list[str] = []
        self._calls: dict[str, int] = {}
        self._handles: list[Any] = []
        self._mode: _Mode | None = None

    def site(self, op: str) -> str:
        """A stable name for the next call of ``op`` (innermost module, call number)."""
        where = self._stack[-1] if self._stack else ""
        key = f"{where}:{op}"
        i = self._calls.get(key, 0)
        self._calls[key] = i + 1
        return f"{key}#{i}"

    def end_step(self) -> None:
        """Advance the delayed-scaling amax histories (once per optimizer step)."""
        self.rounder.end_step()

    def __enter__(self) -> emulate:
        self._handles = _install_hooks(self)
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._mode is not None
        self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles = []


def _default_stream(model: torch.nn.Module) -> tuple[str, ...]:
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList):
            return tuple(f"{name}.{i}" if name else str(i) for i in range(len(m)))
    return ()


def _default_embed(model: torch.nn.Module) -> str | None:
    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    if emb is None:
        return None
    return next((n for n, m in model.named_modules() if m is emb), None)


def _install_hooks(em: emulate) -> list[Any]:
    """Module-name tracking for the sites, and the residual-stream roundings."""
    handles = []
    root = em.model

    def pre(m: torch.nn.Module, args: Any) -> None:
        if m is root:
            em._calls.clear()
            em._stack.clear()
        em._stack.append(em._names.get(id(m), "?"))

    def post(m: torch.nn.Module, args: Any, out: Any) -> Any:
        name = em._stack.pop() if em._stack else "?"
        both = name in em.stream
        if not both and name != em.embed:
            return None
        r = em.rounder
        fwd = lambda t: r("activations", t, f"{name}/stream.x")  # noqa: E731
        bwd = (lambda t: r("activations", t, f"{name}/stream.dx")) if both else None
        if isinstance(out, torch.Tensor):
            return _Straight.apply(out, fwd, bwd)
        if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
            return (_Straight.apply(out[0], fwd, bwd),) + out[1:]
        return None

    for m in root.modules():
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    return handles
