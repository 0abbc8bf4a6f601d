"""normlab's rounding rules, op by op: what ``normlab.torch.emulate`` does with each torch
function called inside it (the table of ``normlab.torch.emulate``'s docstring).

``NormlabRules.handle`` sends a product with a weight operand (``normlab.torch.ops``) through
``ops.Linear`` or ``ops.Product``, an embedding through ``params``, a
``scaled_dot_product_attention`` output through ``activations``, ``nn.MultiheadAttention``'s
function through its own body with the rounding active inside (its projections and attention
are then the calls above), and records every call in the coverage. Any other function that
computes with a weight is a norm or an element-wise op (float32, as normlab's modules) or is
named as not emulated. ``stream_output`` rounds the residual stream at the ``stream`` modules'
outputs.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .coverage import ELEMENTWISE, NORMS, PASSIVE, op_name, scan
from .ops import MOVES, PRODUCTS, Job, Linear, Operands, Product, Straight, split
from .recipes import linear_class

_LINEAR_LIKE = frozenset({"linear", "matmul", "mm", "addmm"})
_DESCRIPTORS = ("__get__", "__set__", "__delete__")  # a tensor's attributes read or written
_WHY_BIAS = "float32, as normlab's Linear"
_WHY_ACTIVATIONS = "two activations: float32, as normlab's attention computes q k^T and p v"


def rules_for(em: Any) -> NormlabRules:
    return NormlabRules(em)


def saving_hooks_active() -> bool:
    """Whether a saved-tensors hook (activation checkpointing, CPU offload) packs what autograd
    saves: the rounded operands are then not held in reused buffers."""
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


class NormlabRules:
    """The handlers of normlab's rules for one emulate object (module docstring)."""

    def __init__(self, em: Any):
        self.em = em
        self.table: dict[Callable, Callable] = {f: self.product for f in PRODUCTS}
        self.table.update({torch.einsum: self.product, torch.tensordot: self.product,
                           F.embedding: self.embedding,
                           F.scaled_dot_product_attention: self.attention,
                           F.multi_head_attention_forward: self.multi_head_attention})

    def handle(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        h = self.table.get(func)
        if h is not None:
            return h(func, args, kwargs)
        if func in MOVES:
            return self.move(func, args, kwargs)
        if func in PASSIVE or getattr(func, "__name__", "") in _DESCRIPTORS:
            return func(*args, **kwargs)
        return self.other(func, args, kwargs)

    def move(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """A copy or view of a weight stays a weight (a gathered expert, a fused projection):
        recorded as one when every tensor it reads is a weight."""
        out = func(*args, **kwargs)
        first = args[0] if args else None
        parts = first if isinstance(first, (list, tuple)) else [first]
        names = [self.em.weight_name(t) for t in parts if isinstance(t, torch.Tensor)]
        if names and all(names):
            self.em.derive(out, names[0] if len(names) == 1 else "+".join(names))
        return out

    def other(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Any other function: if it reads a weight, a norm or an element-wise op is float32 by
        the rules, anything else is not emulated (the coverage's row)."""
        em = self.em
        weight = scan(args, kwargs, em.weight_name)
        if weight is not None:
            _cover_other(em, func, weight)
        return func(*args, **kwargs)

    def product(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """A product: rounded when an operand is a weight, float32 between activations."""
        em = self.em
        ops = split(func, args, kwargs)
        if ops is None or not all(isinstance(t, torch.Tensor) and t.is_floating_point()
                                  for t in ops.tensors[:2]):
            return self.other(func, args, kwargs)
        a, b, bias = ops.tensors
        wa, wb = em.weight_name(a), em.weight_name(b)
        if wa is None and wb is None:
            em.coverage.add(em.frame.name, ops.label, "float32", left="the product",
                            why=_WHY_ACTIVATIONS)
            return func(*args, **kwargs)
        job = _job(em, ops, wa, wb, bias)
        if ops.label in _LINEAR_LIKE and wb is not None and wa is None and b.dim() == 2 and \
                not (ops.label == "addmm" and (kwargs or bias is None or bias.dim() != 1)):
            w = b if ops.label == "linear" else b.transpose(0, 1)
            recipe = linear_class(job)
            if recipe is None:
                _cover_product(em, ops.label, job, wa, wb, bias)
            else:
                _cover_gemms(em, ops.label, job, bias, torch.is_grad_enabled() and (
                    a.requires_grad or w.requires_grad))
            return (recipe or Linear).apply(job, a, w, bias)
        _cover_product(em, ops.label, job, wa, wb, bias)
        return Product.apply(job, a, b, bias)

    def embedding(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``F.embedding`` with params(W): the rows read, rounded, where the rounding is one
        value's alone (unscaled, deterministic: the rows of the rounded table); else the whole
        table. ``max_norm`` renormalizes the model's own table first, as torch does."""
        em = self.em
        r = em.frame.rounder
        ids, w = args[0], (args[1] if len(args) > 1 else kwargs.get("weight"))
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            return func(*args, **kwargs)
        site = em.weight_name(w) or em.site("embedding")
        em.coverage.add(em.frame.name, "embedding", "rounded",
                        rounded=r.describe([("W", ("params",))]), left="its gradient",
                        why="float32, as normlab's embedding")
        call = _arguments(F.embedding, args, kwargs)
        max_norm = call.pop("max_norm", None)
        norm_type = call.pop("norm_type", 2.0)
        if max_norm is not None:
            with torch.no_grad():
                torch.embedding_renorm_(w.detach(), ids.contiguous(), max_norm, norm_type)
        call.pop("input")
        call.pop("weight")
        p = r.roles["params"]

        def fwd(t: torch.Tensor) -> torch.Tensor:
            return r("params", t, f"{site}/param")
        if p.scaling is None and p.rounding != "stochastic":
            return Straight.apply(F.embedding(ids, w, **call), fwd, None, em)
        return F.embedding(ids, Straight.apply(w, fwd, None, em), **call)

    def attention(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``scaled_dot_product_attention``: its output rounded to activations (forward)."""
        em = self.em
        out = func(*args, **kwargs)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        r, site = em.frame.rounder, em.site("attention")
        em.coverage.add(em.frame.name, "scaled_dot_product_attention", "rounded",
                        rounded=r.describe([("output", ("activations",))]),
                        left="q k^T, softmax, p v inside; its gradient",
                        why="float32 inside, as normlab's attention op; the gradient is "
                            "rounded by the projections' backward")
        return Straight.apply(out, lambda t: r("activations", t, f"{site}/out"), None, em)

    def multi_head_attention(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``nn.MultiheadAttention``: torch's own function body, run with the rounding active
        inside it (its in- and out-projections are linear products, its attention a
        scaled_dot_product_attention, or products of activations with need_weights)."""
        mode = self.em._mode
        if mode is None:
            return func(*args, **kwargs)
        mode.__enter__()
        try:
            return _mha_body()(*args, **kwargs)
        finally:
            mode.__exit__(None, None, None)


@functools.cache
def _mha_body() -> Callable:
    """``F.multi_head_attention_forward`` without its first line's hand-off to the torch-function
    modes (which would run the whole body with the emulator set aside): the same code and
    defaults, read with ``has_torch_function`` false."""
    f = F.multi_head_attention_forward
    scope = dict(vars(F))
    scope["has_torch_function"] = lambda *a, **k: False
    body = types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__, f.__closure__)
    body.__kwdefaults__ = f.__kwdefaults__
    return body


def _arguments(func: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by name (``F.embedding``'s)."""
    names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq",
             "sparse")
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


def _job(em: Any, ops: Operands, wa: str | None, wb: str | None, bias: Any) -> Job:
    """The rounding of one product call (``ops.Job``): a weight is params then compute, an
    activation compute; the output activations; the operands' gradients activations."""
    ka, kb = ("weight" if wa else "input"), ("weight" if wb else "input")
    if ka == kb:
        ka, kb = ka + "0", kb + "1"
    roles_a = ("params", "compute") if wa else ("compute",)
    roles_b = ("params", "compute") if wb else ("compute",)
    site = wb if wa is None else wa if wb is None else f"{wa}*{wb}"
    pool = torch.is_grad_enabled() and not saving_hooks_active() and any(
        t.requires_grad for t in ops.tensors if isinstance(t, torch.Tensor))
    return Job(em, em.frame.rounder, site or em.site(ops.label), (ka, kb, "bias"),
               (roles_a, roles_b, ()), (ops.axes[0], ops.axes[1], -1),
               ("activations", "activations", None), ("activations",), ops.grad_axis,
               ops.call, pool)


def _cover_product(em: Any, label: str, job: Job, wa: str | None, wb: str | None,
                   bias: Any) -> None:
    r = job.rounder
    xa, xb = ("W" if wa else "x"), ("W" if wb else "x")
    text = r.describe([(xa, job.roles[0]), (xb, job.roles[1]), ("y", ("activations",)),
                       ("dY", ("gradients",)), ("dx, dW", ("activations",))])
    if bias is not None:
        em.coverage.add(em.frame.name, label, "rounded", rounded=text,
                        left="the bias and its gradient", why=_WHY_BIAS)
    else:
        em.coverage.add(em.frame.name, label, "rounded", rounded=text)


#: A recipe linear's GEMMs: (GEMM, its output, its two operands as (tensor, GEMM operand)).
_GEMMS = (("fprop", "y", (("x", "fprop.input"), ("W", "fprop.weight"))),
          ("dgrad", "dx", (("dY", "dgrad.grad_output"), ("W", "dgrad.weight"))),
          ("wgrad", "dW", (("dY", "wgrad.grad_output"), ("x", "wgrad.input"))))


def _cover_gemms(em: Any, label: str, job: Job, bias: Any, backward: bool) -> None:
    """A recipe linear's rows, one per GEMM (``op`` "linear fprop", ...; the backward's two only
    where a gradient is recorded): each operand's precision (``PrecisionPolicy.operand``), the
    weight's ``params`` rounding first, and the output's role."""
    r = job.rounder
    pol = r.policy
    params = pol.params.format if r.rounds("params") else None
    for gemm, out, operands in _GEMMS[:3 if backward else 1]:
        parts = []
        for tensor, name in operands:
            p = pol.operand(name)
            first = f"params ({params}), then " if tensor == "W" and params else ""
            parts.append(f"{tensor}: {first}{name} = {p if p.rounds else 'float32'}")
        parts.append(f"{out}: activations" if r.rounds("activations") else f"{out}: float32")
        if bias is not None:
            em.coverage.add(em.frame.name, f"{label} {gemm}", "rounded", rounded="; ".join(parts),
                            left="the bias and its gradient", why=_WHY_BIAS)
        else:
            em.coverage.add(em.frame.name, f"{label} {gemm}", "rounded", rounded="; ".join(parts))


def _cover_other(em: Any, func: Callable, weight: str) -> None:
    name = op_name(func)
    if func in NORMS:
        em.coverage.add(em.frame.name, name, "float32", left="the norm, its gain and bias",
                        why="float32 on the rounded inputs, as normlab's norms")
    elif func in ELEMENTWISE:
        em.coverage.add(em.frame.name, name, "float32", left="the parameter",
                        why="an element-wise gain, scale or bias: float32")
    else:
        em.coverage.add(em.frame.name, name, "not emulated", left="the whole op",
                        why=f"computes with the weight {weight} and has no rounding in emulate")


def stream_output(em: Any, frame: Any, out: Any) -> Any:
    """A stream module's output rounded to activations (and its gradient), the embedding
    module's forward only; any other module's output as it is."""
    name = frame.name
    both = name in em.stream
    if em.rules != "normlab" or (not both and name != em.embed):
        return None
    t = out if isinstance(out, torch.Tensor) else (
        out[0] if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor) else None)
    if t is None or not t.is_floating_point():
        return None
    r = frame.rounder
    em.coverage.add(name, "stream" if both else "embedding output", "rounded",
                    rounded=r.describe([("output", ("activations",))] +
                                       ([("its gradient", ("activations",))] if both else [])))

    def fwd(x: torch.Tensor) -> torch.Tensor:
        return r("activations", x, f"{name}/stream.x")

    def bwd(g: torch.Tensor) -> torch.Tensor:
        return r("activations", g, f"{name}/stream.dx")

    y = Straight.apply(t, fwd, bwd if both else None, em)
    return y if isinstance(out, torch.Tensor) else (y, *out[1:])


__all__ = ["NormlabRules", "rules_for", "saving_hooks_active", "stream_output"]
