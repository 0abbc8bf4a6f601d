"""The operations ``normlab.torch.emulate`` rounds: which torch functions are products, which of
their arguments are the product's operands and along which axis each one contracts, and the
autograd functions that round them.

A product ``y = f(a, b)`` (a linear layer, a matrix product, a convolution, a grouped or
batched matrix product, an einsum) is rounded at normlab's points when one of its operands is a
weight (a parameter, a view of one, or a copy made of one in the forward: a gathered expert, a
concatenated projection):

    forward    a weight W -> compute(params(W)); an activation operand x -> compute(x);
               y = f(xq, Wq) (+ bias, not rounded) -> activations(y)
    backward   dY -> gradients(dY); dx = df/dx(dYq) -> activations; dW -> activations;
               the bias gradient not rounded

(``normlab.nn.numerics``' Linear). A product of two activations (``q k^T`` and ``p v`` of an
eager attention, RoPE's ``inv_freq @ positions``) computes in float32, as normlab's attention
op does; its rows in the coverage say so. Scaled formats with blocks (MX) run along each
operand's contraction axis (``OPERAND_AXES``: the last axis of x and of a linear weight, axis -2
of the right operand of a matrix product, the channel axis of a convolution's input and weight)
and along the output's last axis (a convolution's channel axis) for dY.

``F.linear`` and the products that are one (``x @ W`` with a 2-D weight, ``addmm(b, x, W)``:
transformers' ``Conv1D``) run through :class:`_Linear`, with normlab's Linear backward in
closed form and the rounded operands held in reused buffers (``normlab.torch.quantize.
Workspace``); every other product runs through :class:`_Product`, whose backward is autograd's
own of ``f`` on the rounded operands (one more forward of ``f`` in the backward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

#: (label, positions of the operands, the operands' contraction axes, the position of an added
#: bias or None, the output's contraction axis for dY); a position is an argument index, or a
#: keyword name when the argument is keyword-only.
Layout = tuple[str, tuple[Any, ...], tuple[int, ...], Any, int]


def _conv(label: str, transposed: bool) -> Layout:
    return (label, (0, 1), (1, 0 if transposed else 1), 2, 1)


#: The products emulate rounds, by torch function. ``Tensor.addmm(self, a, b)`` has its bias in
#: ``self`` (position 0) as ``torch.addmm(input, a, b)``.
PRODUCTS: dict[Callable, Layout] = {
    F.linear: ("linear", (0, 1), (-1, -1), 2, -1),
    torch.matmul: ("matmul", (0, 1), (-1, -2), None, -1),
    torch.Tensor.matmul: ("matmul", (0, 1), (-1, -2), None, -1),
    torch.Tensor.__matmul__: ("matmul", (0, 1), (-1, -2), None, -1),
    torch.Tensor.__rmatmul__: ("matmul", (1, 0), (-1, -2), None, -1),
    torch.mm: ("mm", (0, 1), (-1, -2), None, -1),
    torch.Tensor.mm: ("mm", (0, 1), (-1, -2), None, -1),
    torch.bmm: ("bmm", (0, 1), (-1, -2), None, -1),
    torch.Tensor.bmm: ("bmm", (0, 1), (-1, -2), None, -1),
    torch.addmm: ("addmm", (1, 2), (-1, -2), 0, -1),
    torch.Tensor.addmm: ("addmm", (1, 2), (-1, -2), 0, -1),
    torch.baddbmm: ("baddbmm", (1, 2), (-1, -2), 0, -1),
    torch.Tensor.baddbmm: ("baddbmm", (1, 2), (-1, -2), 0, -1),
    torch.addbmm: ("addbmm", (1, 2), (-1, -2), 0, -1),
    torch.mv: ("mv", (0, 1), (-1, -1), None, -1),
    torch.Tensor.mv: ("mv", (0, 1), (-1, -1), None, -1),
    torch.addmv: ("addmv", (1, 2), (-1, -1), 0, -1),
    torch.dot: ("dot", (0, 1), (-1, -1), None, -1),
    torch.vdot: ("vdot", (0, 1), (-1, -1), None, -1),
    torch.inner: ("inner", (0, 1), (-1, -1), None, -1),
    torch.linalg.vecdot: ("vecdot", (0, 1), (-1, -1), None, -1),
    torch._grouped_mm: ("grouped_mm", (0, 1), (-1, -2), None, -1),
    F.conv1d: _conv("conv1d", False), F.conv2d: _conv("conv2d", False),
    F.conv3d: _conv("conv3d", False), F.conv_transpose1d: _conv("conv_transpose1d", True),
    F.conv_transpose2d: _conv("conv_transpose2d", True),
    F.conv_transpose3d: _conv("conv_transpose3d", True),
}
if hasattr(F, "grouped_mm"):  # torch >= 2.10: transformers' MoE experts call it
    PRODUCTS[F.grouped_mm] = ("grouped_mm", (0, 1), (-1, -2), None, -1)

#: Functions that read a weight but whose result is the weight's values, moved or copied (a
#: product of their result is still a product with a weight: ``params`` applies).
MOVES = frozenset({
    torch.Tensor.__getitem__, torch.Tensor.index_select, torch.index_select, torch.cat,
    torch.stack, torch.Tensor.contiguous, torch.Tensor.clone, torch.clone, torch.Tensor.to,
    torch.Tensor.float, torch.Tensor.type_as, torch.Tensor.repeat, torch.Tensor.expand,
    torch.Tensor.chunk, torch.chunk, torch.Tensor.split, torch.split, torch.Tensor.unbind,
    torch.unbind, torch.Tensor.repeat_interleave, torch.repeat_interleave,
})


class Operands(NamedTuple):
    """One call of a product, taken apart: its operands and bias as tensors, and how to make
    the call again with others."""

    label: str  # the product's name in the coverage ("linear", "conv2d", ...)
    tensors: list[Any]  # [a, b, bias]: the operands (tensors) and the bias (a tensor or None)
    axes: tuple[int, ...]  # a's and b's contraction axes
    grad_axis: int  # the output's axis along which dY's blocks run
    call: Callable[[list[Any]], torch.Tensor]  # f of [a, b, bias] with the call's other args


def _get(args: tuple, kwargs: dict, where: Any) -> Any:
    if isinstance(where, int):
        return args[where] if where < len(args) else None
    return kwargs.get(where)


def split(func: Callable, args: tuple, kwargs: dict) -> Operands | None:
    """The product ``func(*args, **kwargs)`` taken apart (None when ``func`` is not one of
    :data:`PRODUCTS` or an ``einsum`` / ``tensordot`` of two tensors, or an argument is not a
    tensor where an operand should be)."""
    if func in (torch.einsum, torch.tensordot):
        return _split_einsum(args, kwargs) if func is torch.einsum else \
            _split_tensordot(args, kwargs)
    layout = PRODUCTS.get(func)
    if layout is None:
        return None
    label, (ia, ib), axes, ibias, grad_axis = layout
    if isinstance(ibias, int) and ibias >= len(args):
        ibias = "bias"  # F.linear's and the convolutions' bias by keyword (or absent)
    a, b = _get(args, kwargs, ia), _get(args, kwargs, ib)
    bias = None if ibias is None else _get(args, kwargs, ibias)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if b.dim() < 2:
        axes = (axes[0], -1)

    def call(t: list[Any]) -> torch.Tensor:
        new, kw = list(args), dict(kwargs)
        for where, v in ((ia, t[0]), (ib, t[1]), (ibias, t[2])):
            if isinstance(where, int):
                new[where] = v
            elif where is not None and (v is not None or where in kw):
                kw[where] = v
        return func(*new, **kw)
    return Operands(label, [a, b, bias], axes, grad_axis, call)


def _split_einsum(args: tuple, kwargs: dict) -> Operands | None:
    """``einsum(eq, a, b)`` (or ``einsum(eq, [a, b])``): each operand's axis of the first index
    it contracts (an index of both operands that the output lacks; the last axis without one)."""
    ops = list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    eq = args[0] if args else None
    if len(ops) != 2 or not isinstance(eq, str) or "->" not in eq or "..." in eq or \
            not all(isinstance(t, torch.Tensor) for t in ops):
        return None
    lhs, out = eq.replace(" ", "").split("->")
    terms = lhs.split(",")
    if len(terms) != 2:
        return None
    shared = [c for c in terms[0] if c in terms[1] and c not in out]
    axes = tuple(term.index(shared[0]) if shared else -1 for term in terms)
    gaxis = -1

    def call(t: list[Any]) -> torch.Tensor:
        return torch.einsum(eq, t[0], t[1], **kwargs)
    return Operands("einsum", [ops[0], ops[1], None], axes, gaxis, call)


def _split_tensordot(args: tuple, kwargs: dict) -> Operands | None:
    """``tensordot(a, b, dims)``: the first contracted axis of each."""
    a, b = (args + (None, None))[:2]
    dims = args[2] if len(args) > 2 else kwargs.get("dims", 2)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if isinstance(dims, int):
        axes = (-dims if dims else -1, 0)
    else:
        try:
            da, db = dims
            axes = (int(next(iter(da))), int(next(iter(db))))
        except (TypeError, ValueError, StopIteration):
            return None

    def call(t: list[Any]) -> torch.Tensor:
        return torch.tensordot(t[0], t[1], dims)
    return Operands("tensordot", [a, b, None], axes, -1, call)


class Job(NamedTuple):
    """What one emulated product call rounds: per tensor of ``Operands.tensors`` its key, the
    roles of its forward rounding, its axis, and the role of its gradient (None: not rounded);
    the output's roles and dY's."""

    emulator: Any  # the emulate object (told when a backward runs)
    rounder: Any  # the region's _Rounder
    site: str  # the state name of this product (a weight's name, or module:op#i)
    keys: tuple[str, str, str]  # the three tensors' keys ("input", "weight", "bias")
    roles: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # forward roles per tensor
    axes: tuple[int, int, int]
    grad_roles: tuple[str | None, str | None, str | None]  # each tensor's gradient role
    out_roles: tuple[str, ...]  # the output's roles ("activations",)
    grad_axis: int  # dY's block axis
    call: Callable[[list[Any]], torch.Tensor]
    pool: bool  # the rounded operands may be reused buffers (held for the backward)
    #: the torch dtype the product runs in (torch's own low-precision kernel, rules="autocast"
    #: where compute and activations are that dtype's rounding), or None: float32
    kernel: torch.dtype | None = None


def _low(t: torch.Tensor | None, kernel: torch.dtype | None) -> Any:
    """t in the product's kernel dtype (a cast of values already on its grid), or t."""
    return t if t is None or kernel is None else t.to(kernel)


def _native(kernel: torch.dtype | None) -> Any:
    """Autocast off around a product in its kernel dtype: emulate's autocast rules keep torch's
    autocast on, to float32, which would cast the operands back."""
    return contextlib.nullcontext() if kernel is None else torch.autocast("cpu", enabled=False)


def along(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, axis: int,
          blocks: bool) -> torch.Tensor:
    """``fn`` of x with ``axis`` as the last axis when the rounding has blocks (``blocks``):
    MX's blocks run along an operand's contraction axis; elsewhere the axis is irrelevant."""
    if not blocks or x.dim() == 0 or axis % x.dim() == x.dim() - 1:
        return fn(x)
    return fn(x.movedim(axis, -1).contiguous()).movedim(-1, axis)


def _round(job: Job, roles: tuple[str, ...], x: torch.Tensor, key: str,
           axis: int) -> torch.Tensor:
    r = job.rounder
    name = f"{job.site}/{key}"
    out = x
    for role in roles:
        def one(t: torch.Tensor, role: str = role) -> torch.Tensor:
            return r(role, t, name)
        out = along(one, out, axis, r.blocks(role))
    return out


class Straight(torch.autograd.Function):
    """Round in the forward with ``fwd``, the gradient with ``bwd`` (None: unrounded);
    ``owner`` (an emulate, or None) is told when the backward runs."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fwd: Callable, bwd: Callable | None,
                owner: Any = None) -> torch.Tensor:
        ctx.bwd, ctx.owner = bwd, owner
        return fwd(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        if ctx.owner is not None:
            ctx.owner.backward_ran()
        return (g if ctx.bwd is None else ctx.bwd(g)), None, None, None


class Linear(torch.autograd.Function):
    """y = out(in(x) in(W)^T + in(b)) and normlab's Linear backward in closed form (module
    docstring), x (..., C_in), W (C_out, C_in), b (C_out,). The rounded x and W are held for
    the backward in the rounder's buffers when ``job.pool`` (a plain forward with gradients),
    given back after it."""

    @staticmethod
    def forward(ctx: Any, job: Job, x: torch.Tensor, w: torch.Tensor,
                b: torch.Tensor | None) -> torch.Tensor:
        r = job.rounder
        if job.pool and not r.blocks("compute") and not r.blocks("params"):
            xq, own_x = r.chain(job.roles[0], x, f"{job.site}/{job.keys[0]}")
            wq, own_w = r.chain(job.roles[1], w, f"{job.site}/{job.keys[1]}")
        else:
            xq, own_x = _round(job, job.roles[0], x, job.keys[0], -1), False
            wq, own_w = _round(job, job.roles[1], w, job.keys[1], -1), False
        bq = b if b is None or not job.roles[2] else _round(job, job.roles[2], b, "bias", -1)
        k = job.kernel
        with torch._C.DisableTorchFunction(), _native(k):
            y = F.linear(_low(xq, k), _low(wq, k), _low(bq, k)).float() if k else \
                F.linear(xq, wq, bq)
        ctx.save_for_backward(xq, wq)
        ctx.job, ctx.has_bias = job, b is not None
        ctx.pooled = [t for t, own in ((xq, own_x), (wq, own_w)) if own]
        return r.inplace(job.out_roles[0], y, f"{job.site}/output") if job.out_roles else y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        job = ctx.job
        job.emulator.backward_ran()
        xq, wq = ctx.saved_tensors
        r, site = job.rounder, job.site
        k = job.kernel
        with torch._C.DisableTorchFunction(), _native(k):
            g = _low(_round(job, ("gradients",), dy, "dout", -1), k)
            wk, xk = _low(wq, k), _low(xq, k)
            dx = r.inplace("activations", (g @ wk).float(), f"{site}/dx")
            g2, x2 = g.flatten(0, -2) if g.dim() > 1 else g[None], \
                xk.flatten(0, -2) if xk.dim() > 1 else xk[None]
            dw = r.inplace("activations", (g2.transpose(0, 1) @ x2).float(), f"{site}/dweight")
            db = None
            if ctx.has_bias:
                db = g2.sum(0).float()
                if job.grad_roles[2] is not None:
                    db = r.inplace(job.grad_roles[2], db, f"{site}/dbias")
        del xq, wq
        r.give(*ctx.pooled)
        ctx.pooled = []
        return None, dx, dw, db


class Product(torch.autograd.Function):
    """Any product of :data:`PRODUCTS` (and einsum, tensordot) on rounded operands; its
    backward is autograd's of ``f`` on the rounded operands, dY rounded first and the operands'
    gradients after (module docstring)."""

    @staticmethod
    def forward(ctx: Any, job: Job, a: torch.Tensor, b: torch.Tensor,
                bias: torch.Tensor | None) -> torch.Tensor:
        q = [None if t is None or not roles else _round(job, roles, t, key, axis)
             for t, roles, key, axis in zip((a, b, bias), job.roles, job.keys, job.axes)]
        q = [t if qt is None else qt for t, qt in zip((a, b, bias), q)]
        with torch._C.DisableTorchFunction(), _native(job.kernel):
            y = job.call([_low(t, job.kernel) for t in q])
            y = y if job.kernel is None else y.float()
        ctx.save_for_backward(*[t if t is not None else torch.empty(0) for t in q])
        ctx.job, ctx.absent = job, tuple(t is None for t in q)
        if not job.out_roles:
            return y
        return _round(job, job.out_roles, y, "output", job.grad_axis)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        job = ctx.job
        job.emulator.backward_ran()
        saved = [None if gone else t for t, gone in zip(ctx.saved_tensors, ctx.absent)]
        wants = ctx.needs_input_grad[1:]
        with torch._C.DisableTorchFunction(), _native(job.kernel):
            g = _low(_round(job, ("gradients",), dy, "dout", job.grad_axis), job.kernel)
            leaves = [None if t is None else t.detach().requires_grad_(bool(w))
                      for t, w in zip(saved, wants)]
            with torch.enable_grad():
                y = job.call([_low(t, job.kernel) for t in leaves])
            asked = [t for t, w in zip(leaves, wants) if t is not None and w]
            got = iter(torch.autograd.grad(y, asked, g, allow_unused=True) if asked else ())
        out: list[Any] = []
        for t, w, role, key, axis in zip(leaves, wants, job.grad_roles, job.keys, job.axes):
            d = next(got) if t is not None and w else None
            if d is not None and role is not None:
                d = _round(job, (role,), d, f"d{key}", axis)
            out.append(d)
        return (None, *out)


__all__ = ["MOVES", "PRODUCTS", "Job", "Linear", "Operands", "Product", "Straight", "along",
           "split"]
