"""``emulate(model, policy, rules="autocast")``: round where ``torch.autocast`` casts, so that a
run under a policy's 16-bit format reproduces the CPU autocast run bit for bit where autocast's
rules decide the values. CUDA's autocast has other lists (its float32 list holds softmax,
layer_norm, exp and more; ``mv`` and ``addmv`` are on its lower one): a model with parameters
on another device than the CPU is refused by name, not emulated by CPU's rules.

``torch.autocast(device, dtype)`` works on aten ops with three lists (torch 2.13, CPU, bfloat16,
each entry checked by running it under autocast in ``tests/torch/test_torch_autocast.py``):

* :data:`LOWER`: every floating input cast to the low format, the op computed there, the output
  in the low format: linear and matrix products (``matmul``, ``mm``, ``bmm``, ``baddbmm``,
  ``addmm``, ``addbmm``; ``einsum``, ``tensordot``, ``inner`` and ``linalg.vecdot``, which run
  as them), convolutions (1-3D, transposed), ``prelu``, ``scaled_dot_product_attention``
  (``nn.MultiheadAttention``'s projections and attention are these);
* :data:`FLOAT32`: inputs cast to float32, the output float32 (the losses, ``prod``,
  ``cdist``, ...);
* every other op runs in its inputs' type with torch's promotion: an op whose floating inputs
  (dimensioned tensors first; scalars never promote) are all low gives a low output, any
  float32 input gives float32 (the residual stream ``x + f(x)`` of a float32 ``x`` stays
  float32).

Here every tensor is float32 and a "low" tensor is one whose values are on the low grid, tracked
by the emulator: a :data:`LOWER` op rounds its operands and bias to ``compute`` (a weight to
``params`` first) and its output to ``activations``; any other op whose inputs are all low
rounds its output to ``activations`` (a view or a copy keeps the values: not rounded again); a
low tensor reports the low dtype as its ``dtype`` (so ``t.to(x.dtype)`` casts as under
autocast), and an explicit ``.float()`` ends its lowness. In the backward the operands'
gradients of a :data:`LOWER` op are rounded as its bf16 kernels give them, dY first, and each
low tensor's gradient is rounded once, after its consumers' contributions are summed in float32
(autocast sums them in the low format, one rounding per addition: the one difference in the
backward). Where ``compute`` and ``activations`` are both a torch dtype's plain rounding
(bfloat16, float16: nearest even, unscaled), a :data:`LOWER` op runs in torch's own kernel for
that dtype on the rounded operands (``Job.kernel``), forward and backward, as autocast runs it: a
float32 product rounded once differs from the low-precision kernel in its float32 sum's order,
and where the two sums straddle a rounding boundary of the format they round apart (on about one
Llama input in four for bfloat16, more often for float16). Any other format at autocast's points
computes the op in float32 on the rounded operands. Bit for bit against autocast needs the other
ops' low-precision kernels to equal the float32 op on the same values rounded once: true of most
element-wise ops and reductions (``tests/torch/test_torch_autocast.py``), not of ``log_softmax``,
``rsqrt`` and ``layer_norm`` on bfloat16 inputs (their bfloat16 kernels approximate
differently): a run that reaches them agrees to the format's rounding there, not bit for bit.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..precision.formats import FORMATS
from ..precision.policy import Precision
from .coverage import NORMS, PASSIVE, op_name
from .ops import PRODUCTS, Job, Linear, Product, Straight, split

_LOWER_PRODUCTS = frozenset({"linear", "matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm",
                             "einsum", "tensordot", "inner", "vecdot", "conv1d", "conv2d",
                             "conv3d", "conv_transpose1d", "conv_transpose2d",
                             "conv_transpose3d"})
#: torch.autocast's lower-precision list on CPU, as torch functions (products by label).
LOWER: tuple[str, ...] = (*sorted(_LOWER_PRODUCTS), "prelu", "scaled_dot_product_attention")
#: Ops autocast computes in float32 on CPU (their outputs float32), by torch function.
FLOAT32_FUNCS: dict[Callable, str] = {
    F.cross_entropy: "cross_entropy", F.nll_loss: "nll_loss", F.mse_loss: "mse_loss",
    F.l1_loss: "l1_loss", F.smooth_l1_loss: "smooth_l1_loss", F.huber_loss: "huber_loss",
    F.kl_div: "kl_div", F.binary_cross_entropy: "binary_cross_entropy",
    F.binary_cross_entropy_with_logits: "binary_cross_entropy_with_logits",
    F.poisson_nll_loss: "poisson_nll_loss", F.soft_margin_loss: "soft_margin_loss",
    F.margin_ranking_loss: "margin_ranking_loss", F.hinge_embedding_loss: "hinge_embedding_loss",
    F.multilabel_margin_loss: "multilabel_margin_loss", F.multi_margin_loss: "multi_margin_loss",
    torch.prod: "prod", torch.Tensor.prod: "prod", torch.cdist: "cdist",
    torch.quantile: "quantile", torch.trace: "trace",
}
FLOAT32: tuple[str, ...] = tuple(sorted(set(FLOAT32_FUNCS.values())))
_CASTS_UP = frozenset({torch.Tensor.float, torch.Tensor.double})
_DTYPE = torch._C.TensorBase.__dict__["dtype"]
_LOW_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
_VIEWS = PASSIVE - {torch.Tensor.to, torch.Tensor.float, torch.Tensor.type_as,
                    torch.Tensor.type, torch.zeros_like, torch.ones_like, torch.empty_like,
                    torch.full_like, torch.Tensor.new_empty, torch.Tensor.new_zeros,
                    torch.Tensor.new_ones, torch.Tensor.new_full, torch.Tensor.new_tensor,
                    torch.Tensor.copy_, torch.Tensor.zero_, torch.Tensor.fill_,
                    torch.Tensor.normal_, torch.Tensor.uniform_}


class AutocastRules:
    """The handlers of ``rules="autocast"`` for one emulate object (module docstring)."""

    def __init__(self, em: Any):
        self.em = em
        fmt = em.policy.compute.format.name
        self.low_dtype = _LOW_DTYPES.get(fmt or "")
        self._low: dict[int, Any] = {}  # id -> weakref of a float32 tensor with low values
        self._saved: list[tuple[str, bool, torch.dtype]] = []
        other = sorted({p.device.type for p in em.model.parameters()} - {"cpu"})
        if other:
            raise ValueError(f"rules='autocast' follows CPU autocast's op lists (LOWER, FLOAT32 "
                             f"of normlab.torch.autocast) and the model has parameters on "
                             f"{other[0]!r}: another device's autocast casts other ops (CUDA's "
                             f"computes softmax, layer_norm and exp in float32, mv in the low "
                             f"type); use rules='normlab' there, or run the model on the CPU")
        self.devices = ["cpu"]
        # per module: the autocast state and which inputs were low at its last forward call
        self._seen: dict[str, tuple[list, list[bool]]] = {}
        self._replays: list[tuple[int, list | None]] = []  # per module call: the state to restore
        self._handles: list[Any] = []

    def enter(self) -> None:
        """While emulating, torch's autocast state says enabled, to float32 (which casts
        nothing), so that a region the model runs under ``torch.autocast(enabled=False)`` (or
        transformers' ``maybe_autocast``, which enters one only where autocast is on: RoPE's
        frequencies) is seen and computed in float32, as under autocast."""
        self._saved = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                       for d in self.devices]
        for d in self.devices:
            torch.set_autocast_dtype(d, torch.float32)
            torch.set_autocast_enabled(d, True)
        self._handles = self._install()

    def exit(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles, self._replays = [], []
        self._seen.clear()
        for d, enabled, dtype in self._saved:
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, dtype)
        self._saved = []
        self._low.clear()

    def _state(self) -> list:
        return [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                for d in self.devices]

    @staticmethod
    def _set(state: list) -> None:
        for d, enabled, dtype in state:
            torch.set_autocast_dtype(d, dtype)
            torch.set_autocast_enabled(d, enabled)

    def _install(self) -> list[Any]:
        """Activation checkpointing's recomputation enters the autocast state it saved in the
        forward, enabled to float32, which torch turns into disabled (CPU autocast has no
        float32): a module recomputed inside the backward (the frame emulate's own pre-hook,
        registered first, marks ``pushed``) runs under the state its forward call saw, its
        inputs low where they were (the reentrant kind detaches them)."""
        names = self.em._names

        def pre(m: torch.nn.Module, args: Any) -> None:
            name, frame = names.get(id(m), "?"), self.em.frame
            if torch._C._current_graph_task_id() == -1:
                self._seen[name] = (self._state(), [self.is_low(a) for a in args])
            elif frame.pushed and frame.name == name and name in self._seen:
                state, low = self._seen[name]
                self._replays.append((id(m), self._state()))
                self._set(state)
                for a, was in zip(args, low):
                    if was and isinstance(a, torch.Tensor) and a.dtype == torch.float32:
                        self.mark(a)
                return
            self._replays.append((id(m), None))

        def post(m: torch.nn.Module, args: Any, out: Any) -> None:
            if self._replays and self._replays[-1][0] == id(m):
                state = self._replays.pop()[1]
                if state is not None:
                    self._set(state)

        return [h for m in self.em.model.modules() for h in (
            m.register_forward_pre_hook(pre), m.register_forward_hook(post, always_call=True))]

    def active(self) -> bool:
        """False inside a region the model runs with autocast disabled."""
        return all(torch.is_autocast_enabled(d) for d in self.devices)

    def is_low(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        if t.dtype in (torch.bfloat16, torch.float16):
            return True
        held = self._low.get(id(t))
        return held is not None and held() is t

    def mark(self, out: Any) -> Any:
        for t in out if isinstance(out, (list, tuple)) else [out]:
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                self._low[id(t)] = weakref.ref(t)
        return out

    def handle(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        if not self.active():  # autocast(enabled=False) inside the model: float32, as there
            return func(*args, **kwargs)
        if getattr(func, "__self__", None) is _DTYPE:  # t.dtype
            t = args[0]
            return self.low_dtype if self.low_dtype is not None and self.is_low(t) and \
                t.dtype == torch.float32 else func(*args, **kwargs)
        if func in PRODUCTS or func in (torch.einsum, torch.tensordot):
            return self.product(func, args, kwargs)
        if func is F.scaled_dot_product_attention or func is F.prelu:
            return self.lower(func, args, kwargs)
        if func is F.multi_head_attention_forward:
            return self.em._rules.multi_head_attention(func, args, kwargs)
        if func in FLOAT32_FUNCS:
            return func(*_up(args), **_up(kwargs))
        if func in _CASTS_UP or (func is torch.Tensor.to and _casts_to_float32(args, kwargs)):
            t = args[0]
            return t.view_as(t) if t.dtype == torch.float32 and self.is_low(t) else \
                func(*args, **kwargs)
        return self.promote(func, args, kwargs)

    def _inputs(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """The floating tensors that take part in torch's type promotion: the dimensioned ones
        (0-dim tensors do not promote within a category), all of them when none is."""
        ts = [t for a in (*args, *kwargs.values())
              for t in (a if isinstance(a, (list, tuple)) else [a])
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
        dims = [t for t in ts if t.dim() > 0]
        return dims or ts

    def promote(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Any other op: low when all its floating inputs are (module docstring); a norm's
        output has its input's type whatever its statistics' and gain's."""
        out = func(*args, **kwargs)
        ts = self._inputs(args[:1], {}) if func in NORMS else self._inputs(args, kwargs)
        if not ts or "dtype" in kwargs or not all(self.is_low(t) for t in ts):
            return out
        if func in _VIEWS or getattr(func, "__name__", "") in ("__get__", "__set__"):
            return self.mark(out)
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.endswith("__") and isinstance(out, torch.Tensor):
            if out.dtype == torch.float32:  # in place on a low tensor: it stays low
                with torch.no_grad():
                    out.copy_(self.em.frame.rounder("activations", out, "autocast"))
            return out
        return self._rounded(out)

    def _rounded(self, out: Any) -> Any:
        """Each float32 output rounded to activations, its gradient too, marked low."""
        r = self.em.frame.rounder

        def rnd(t: torch.Tensor) -> torch.Tensor:
            return r("activations", t, "autocast")
        res = []
        for t in out if isinstance(out, (list, tuple)) else [out]:
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                t = Straight.apply(t, rnd, rnd, self.em) if t.requires_grad else rnd(t)
                self.mark(t)
            res.append(t)
        if isinstance(out, (list, tuple)):
            return type(out)(res) if isinstance(out, tuple) else res
        return res[0]

    def product(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """A product: on autocast's lower list, every operand and the bias rounded (a weight to
        params then compute), the output to activations; any other product (``mv``, ``dot``,
        a grouped matrix product) is an ordinary op."""
        em = self.em
        ops = split(func, args, kwargs)
        if ops is None or ops.label not in _LOWER_PRODUCTS or not all(
                isinstance(t, torch.Tensor) and t.is_floating_point() for t in ops.tensors[:2]):
            return self.promote(func, args, kwargs)
        a, b, bias = (None if t is None else t.float() if isinstance(t, torch.Tensor) else t
                      for t in ops.tensors)
        wa, wb = em.weight_name(a), em.weight_name(b)
        r = em.frame.rounder
        site = wb or wa or em.site(ops.label)
        ka, kb = ("weight" if wa else "input"), ("weight" if wb else "input")
        if ka == kb:
            ka, kb = ka + "0", kb + "1"
        roles = (("params", "compute") if wa else ("compute",),
                 ("params", "compute") if wb else ("compute",), ("compute",))
        job = Job(em, r, site, (ka, kb, "bias"), roles, (ops.axes[0], ops.axes[1], -1),
                  ("activations", "activations", "activations"), ("activations",),
                  ops.grad_axis, ops.call, False, _kernel(r))
        em.coverage.add(em.frame.name, ops.label, "rounded", rounded=r.describe(
            [("operands and bias", ("compute",)), ("y", ("activations",)),
             ("dY", ("gradients",)), ("their gradients", ("activations",))]),
            why="torch.autocast's lower-precision list")
        assert a is not None and b is not None  # split: both operands are tensors
        if ops.label in ("linear", "matmul", "mm", "addmm") and wb is not None and \
                wa is None and b.dim() == 2 and not (ops.label == "addmm" and (
                    kwargs or bias is None or bias.dim() != 1)):
            out = Linear.apply(job, a, b if ops.label == "linear" else b.transpose(0, 1), bias)
        else:
            out = Product.apply(job, a, b, bias)
        return self.mark(out)

    def lower(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``scaled_dot_product_attention`` and ``prelu``: their floating inputs rounded to
        compute, computed in float32, the output to activations (gradients as a product's)."""
        em = self.em
        r = em.frame.rounder
        site = em.site(op_name(func))
        em.coverage.add(em.frame.name, op_name(func), "rounded",
                        rounded=r.describe([("inputs", ("compute",)),
                                            ("output", ("activations",))]),
                        why="torch.autocast's lower-precision list")
        ts = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and
              a.is_floating_point()][:3]

        def call(t: list[Any]) -> torch.Tensor:
            new = list(args)
            for i, v in zip(ts, t):
                new[i] = v
            return func(*new, **kwargs)
        tensors = [args[i].float() for i in ts] + [None] * (3 - len(ts))
        job = Job(em, r, site, ("q", "k", "v"), tuple(("compute",) if t is not None else ()
                                                      for t in tensors),  # type: ignore[arg-type]
                  (-1, -1, -1), ("activations",) * 3, ("activations",), -1,
                  lambda t: call(t[:len(ts)]), False, _kernel(r))
        return self.mark(Product.apply(job, *tensors))


#: The formats whose torch kernels run autocast's lower ops.
_KERNELS = (("bfloat16", torch.bfloat16), ("float16", torch.float16))


def _kernel(r: Any) -> torch.dtype | None:
    """The torch dtype a lower op runs in, as autocast runs it (its own low-precision kernel,
    so its sums are autocast's bit for bit): where ``compute`` and ``activations`` are both that
    dtype's plain rounding (nearest even, unscaled); else None (float32 on rounded operands)."""
    c, a = r.roles["compute"], r.roles["activations"]
    return next((dt for name, dt in _KERNELS if c == a == Precision(FORMATS[name])), None)


def _up(value: Any) -> Any:
    """Low-precision floating tensors as float32 (autocast's float32 list casts them)."""
    if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
        return value.float()
    if isinstance(value, tuple):
        return tuple(_up(v) for v in value)
    if isinstance(value, dict):
        return {k: _up(v) for k, v in value.items()}
    return value


def _casts_to_float32(args: tuple, kwargs: dict) -> bool:
    dtype = kwargs.get("dtype", next((a for a in args[1:] if isinstance(a, torch.dtype)), None))
    return dtype == torch.float32


__all__ = ["FLOAT32", "FLOAT32_FUNCS", "LOWER", "AutocastRules"]
