"""``emulate(model, policy)``: a normlab ``PrecisionPolicy`` on an unmodified ``torch.nn.Module``.

Inside ``with emulate(model, policy) as em:`` the model's forward and backward are rounded at the
same points as normlab's own modules (``normlab.nn.numerics``), each tied to one of the policy's
roles. Every rounding is ``normlab.torch.apply``: ``Precision.apply`` in torch operations on the
tensor's device, so the values are normlab's bit for bit given the same inputs.

======================================  =========================================  ==============
point                                   forward / backward                         role
======================================  =========================================  ==============
a product with a weight operand:        W -> compute(params(W)); x -> compute(x);   see left
``F.linear`` (``nn.Linear``), ``x @     y -> activations(y). Backward: dY ->
W``, ``addmm`` (GPT-2's ``Conv1D``),    gradients(dY); dx, dW -> activations;
``bmm``, ``einsum``, ``tensordot``,     the bias and its gradient unrounded
grouped and batched MoE experts,
convolutions (1-3D, transposed)
``F.embedding(ids, W)``                 W -> params(W); its gradient unrounded      params
``F.scaled_dot_product_attention``      the output -> activations (forward)         activations
``nn.MultiheadAttention``               its projections as above, its attention    see above
                                        as scaled_dot_product_attention
the residual stream: the outputs of     forward -> activations; the gradient        activations
the ``stream`` modules                  arriving at that output -> activations
the embedding output (``embed``)        forward -> activations                      activations
products of two activations, norms,     float32 on the rounded inputs (normlab's   (none)
softmax, activation functions, loss     attention computes q k^T, p v in float32)
======================================  =========================================  ==============

``ops`` lists the products and their operands; ``coverage`` records, per module and op, what
was rounded and what was left and why (``em.coverage``; an op that computes with a weight and
has no rounding here warns, or raises under ``strict=True``). ``rules="autocast"`` rounds where
``torch.autocast`` casts instead (``normlab.torch.autocast``). ``overrides`` gives named modules
another precision (``normlab.torch.overrides``).

**Inside a training loop.** The emulator holds only for modules of ``model`` while it is
entered: module hooks track which module runs and make sure the rounding is active in it,
including when activation checkpointing recomputes a module inside the backward pass (both of
``torch.utils.checkpoint``'s kinds and transformers' ``gradient_checkpointing_enable()``: the
same gradients as without it, bit for bit; stochastic rounding is refused with checkpointing, as
a recomputation would draw again). With checkpointing the backward must run inside the block
(the recomputation runs in it): a backward after the block of a forward that checkpointed is
refused by name (without checkpointing it gives the same gradients). Each tensor's scaling
state is named by the weight it belongs to, or by the module, the op and the call's number
within one call of that module, so the names are the same at every step, in a recomputation
and when a submodule is called directly.
Delayed scaling's histories advance once per optimizer step without a call: when a forward
begins after ``micro_batches`` forward-and-backward passes (``normlab.precision.roles.
StepClock``); ``end_step()`` advances them at once (a second call without a pass in between does
nothing). Entering an emulate that is entered, or a second emulate on a module of a model that
is under one, is refused by name; on exit every hook is removed and the model is as it was.

**torch.compile.** Inside the block a compiled model runs its eager code
(``torch.compiler.set_stance("force_eager")``, restored on exit): the rounding is Python and
NumPy state (scales, histories, generators) that dynamo cannot trace. Entering ``emulate``
inside a compiled function is refused by name.

The emulator rounds its own temporaries in place (the linear outputs, dx, dW) and holds the
rounded x and W of a linear layer for the backward in buffers reused from step to step
(``normlab.torch.quantize.Workspace``); an embedding rounds the rows it reads (the same values,
where ``params`` is unscaled and deterministic). docs/torch.md gives the measured cost.

``stream`` (module names) defaults to the children of the ``nn.ModuleList`` that holds the most
parameters (a transformers model's decoder layers: the stream after each layer, where normlab
rounds after each sublayer); ``embed`` defaults to ``model.get_input_embeddings()`` where the
model has it.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from .. import _checks as ck
from ..precision.roles import PolicyRoles, StepClock
from . import handlers
from .coverage import Coverage
from .overrides import resolve
from .quantize import Workspace, apply, apply_, cast_from, is_transposed
from .recipes import keep_overrides

RULES = ("normlab", "autocast")
OUTSIDE = "(outside the model)"
_IN_COMPILE = ("emulate cannot be entered inside a torch.compile'd function: its rounding is "
               "Python and NumPy state that dynamo cannot trace; enter it around the call of "
               "the compiled model")  # the module of an op called outside every module of the model
_RECOMPUTED_OUTSIDE = (
    "emulate: backward() ran after the with block on a forward that used activation "
    "checkpointing: the checkpointed modules are recomputed there, outside the block, and would "
    "not be emulated (the gradients would be wrong); call backward() inside the block")
_ACTIVE: dict[int, Any] = {}  # id(module) -> the entered emulate whose model holds it
_ENTERED: list[Any] = []  # the entered emulate objects


class _Rounder:
    """Applies one policy's roles (``normlab.precision.roles.PolicyRoles``: the roles, their
    checks and the per-tensor scaling states, shared with normlab's own model) to torch tensors,
    with buffers reused from step to step (``Workspace``, shared by an emulate's regions)."""

    def __init__(self, roles: PolicyRoles, work: Workspace):
        self.rounding = roles
        self.policy, self.roles, self.rng = roles.policy, roles.roles, roles.rng
        self.work = work
        self._blocks = {r: getattr(p.scaling, "axis", None) is not None
                        for r, p in self.roles.items()}

    @property
    def states(self) -> dict[str, Any]:
        """The per-tensor scaling states, by ``"<site>/<tensor>/<role>"``."""
        return self.rounding.states

    def rounds(self, role: str) -> bool:
        return self.roles[role].rounds

    def blocks(self, role: str) -> bool:
        """Whether ``role`` scales blocks along an axis (MX): its operand axis matters."""
        return self._blocks[role]

    def __call__(self, role: str, x: torch.Tensor, name: str) -> torch.Tensor:
        """``role``'s rounding of x, a new tensor (x itself when the role does not round)."""
        p = self.roles[role]
        if not p.rounds or x.numel() == 0:
            return x
        with torch.no_grad():
            return apply(p, x, rng=self.rng, state=self.rounding.state(role, name)).to(x.dtype)

    def inplace(self, role: str, x: torch.Tensor, name: str) -> torch.Tensor:
        """``role``'s rounding written into x, a tensor of the caller's that nothing else
        reads; the same values as ``__call__``."""
        p = self.roles[role]
        if not p.rounds or x.numel() == 0:
            return x
        with torch.no_grad():
            state = self.rounding.state(role, name)
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
        if not ps or x.numel() == 0:
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

    def describe(self, parts: list[tuple[str, tuple[str, ...]]]) -> str:
        """``"x: compute; W: params, compute"`` for the (tensor, roles) pairs, roles that round
        only; ``"nothing (policy NAME rounds none of these roles)"`` when none does."""
        out = [f"{what}: {', '.join(r for r in roles if self.rounds(r))}"
               for what, roles in parts if any(self.rounds(r) for r in roles)]
        return "; ".join(out) if out else f"nothing (policy {self.policy.name} rounds none of " \
                                          f"these roles)"


class _Frame:
    """One call of a module of the model: its name, the rounder of its region, the count of
    each op's calls within it (the names of activation-only products' states), and whether its
    pre-hook made the rounding active (a recomputation inside the backward)."""

    __slots__ = ("counts", "grad", "name", "pushed", "rounder")

    def __init__(self, name: str, rounder: _Rounder, pushed: bool = False):
        self.name, self.rounder, self.pushed = name, rounder, pushed
        self.counts: dict[str, int] = {}
        self.grad = torch.is_grad_enabled()


class _Mode(TorchFunctionMode):
    """Sends every torch function called while the emulator is active to its handler."""

    def __init__(self, owner: emulate):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.owner.handle(func, args, kwargs or {})


class emulate:
    """A context that applies ``policy`` (a ``PrecisionPolicy`` or a preset name) to ``model``'s
    forward and backward; the model is not changed and is as before afterwards.

        with emulate(model, "fp8_hybrid", rng=np.random.default_rng(0)) as em:
            loss = model(idx, labels=idx).loss
            loss.backward()
        print(em.coverage.table())

    Args:
        model: a ``torch.nn.Module`` (a ``torch.compile`` wrapper: its module).
        policy: a ``normlab.precision.PrecisionPolicy`` or a preset name.
        rng: a ``numpy.random.Generator``; required when a role rounds stochastically.
        stream: names of the modules whose outputs are the residual stream (a name, or a list).
        embed: the name of the module whose output is the stream's first value (forward only).
        overrides: per-module precision, an ordered list of (module pattern, policy or roles)
            (``normlab.torch.overrides``).
        rules: ``"normlab"`` (normlab's rounding points, the table above) or ``"autocast"``
            (``torch.autocast``'s, ``normlab.torch.autocast``).
        micro_batches: forward-and-backward passes per optimizer step (gradient accumulation):
            the scaling states advance when the next forward begins.
        strict: an op that computes with a weight and has no rounding is an error
            (``NotEmulatedError``) instead of a warning.

    Attributes:
        coverage: what the run rounded, per module and op (``normlab.torch.coverage``).
    """

    def __init__(self, model: torch.nn.Module, policy: Any, *,
                 rng: np.random.Generator | None = None, stream: Any = None,
                 embed: str | None = None, overrides: Any = (), rules: str = "normlab",
                 micro_batches: int = 1, strict: bool = False):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        self.model = getattr(model, "_orig_mod", model)  # a torch.compile wrapper's module
        self.rules = ck.choice(rules, "rules", RULES)
        self.strict = ck.flag(strict, "strict")
        self._clock = StepClock(micro_batches)
        base = PolicyRoles(policy, rng=rng, who="emulate")
        self.policy = base.policy
        if self.policy.keep_layers and isinstance(overrides, (list, tuple)):  # recipes.py
            overrides = [*overrides, *keep_overrides(self.policy)]
        policies, region = resolve(self.model, overrides, self.policy)
        self._work = Workspace()
        self.rounder = _Rounder(base, self._work)
        self.regions = [_Rounder(PolicyRoles(p, rng=rng, who="emulate"), self._work)
                        for p in policies]
        names = dict(self.model.named_modules())
        self.stream, self.embed = _check_stream(self.model, names, stream, embed)
        self._names = {id(m): n for n, m in names.items()}
        self._region = {n: self.regions[i] for n, i in region.items()}
        self._params = {id(p): n for n, p in self.model.named_parameters()}
        self._derived: dict[int, tuple[Any, str]] = {}  # id -> (weakref, name): copies of weights
        self.coverage = Coverage(self.strict)
        self._stack: list[_Frame] = []
        self._top = _Frame(OUTSIDE, self.rounder)  # ops outside every module of the model
        self._handles: list[Any] = []
        self._mode: _Mode | None = None
        self._stance: Any = None
        self._rules = handlers.rules_for(self)
        self._autocast = None
        if self.rules == "autocast":
            from .autocast import AutocastRules

            self._autocast = AutocastRules(self)
        # a forward ran a module under checkpointing, with gradients, and no backward inside
        # the block has run since
        self._checkpointed = False
        self._check_stochastic_checkpointing = any(
            p.rounding == "stochastic" for r in (self.rounder, *self.regions)
            for p in r.roles.values())

    # --- what the handlers use ---------------------------------------------------------------

    @property
    def frame(self) -> _Frame:
        """The innermost module call of the model (the top-level frame outside them)."""
        return self._stack[-1] if self._stack else self._top

    @property
    def rounders(self) -> list[_Rounder]:
        return [self.rounder, *self.regions]

    def site(self, op: str) -> str:
        """A name for the next call of ``op`` within the innermost module call, the same at
        every step and in a recomputation: ``"module:op#i"``."""
        f = self.frame
        i = f.counts.get(op, 0)
        f.counts[op] = i + 1
        return f"{f.name}:{op}#{i}"

    def weight_name(self, t: Any) -> str | None:
        """The name of the weight ``t`` is (a parameter of the model, or any parameter), a view
        of (``"name@offset"`` for a part of it) or a copy of (made in this forward); None for an
        activation."""
        if not isinstance(t, torch.Tensor):
            return None
        if isinstance(t, torch.nn.Parameter):
            return self._params.get(id(t)) or f"parameter#{id(t)}"
        base = t._base
        if isinstance(base, torch.nn.Parameter):
            name = self._params.get(id(base)) or f"parameter#{id(base)}"
            part = t.storage_offset() != base.storage_offset() or t.numel() != base.numel()
            return f"{name}@{t.storage_offset()}" if part else name
        held = self._derived.get(id(t))
        if held is not None and held[0]() is t:
            return held[1]
        return None

    def derive(self, out: Any, name: str) -> None:
        """Record ``out`` (a tensor, or a list or tuple of them) as a copy of the weight
        ``name``."""
        parts = list(out) if isinstance(out, (list, tuple)) else [out]
        for i, t in enumerate(parts):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self._derived[id(t)] = (weakref.ref(t), name if len(parts) == 1 else
                                        f"{name}[{i}]")

    def refuse_outside(self, grad_outputs: Any) -> None:
        """A reentrant checkpoint's backward (its node's pre-hook): refused after the block,
        where its recomputation would not be emulated."""
        if self._mode is None:
            raise RuntimeError(_RECOMPUTED_OUTSIDE)

    def backward_ran(self) -> None:
        """A backward pass ran through the model (the step clock's input); refused after the
        block when the forward used activation checkpointing (its recomputation would run
        there, not emulated)."""
        if self._mode is None and self._checkpointed:
            raise RuntimeError(_RECOMPUTED_OUTSIDE)
        self._checkpointed = False  # a backward inside the block: the recomputation is emulated
        self._clock.backward()

    def handle(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Every torch function called while active: its handler (``normlab.torch.handlers``,
        or the autocast rules) or itself."""
        if not self._stack and len(_ENTERED) > 1 and any(o._stack for o in _ENTERED
                                                          if o is not self):
            return func(*args, **kwargs)  # an op of another emulated model
        if self._autocast is not None:
            return self._autocast.handle(func, args, kwargs)
        return self._rules.handle(func, args, kwargs)

    # --- steps and state ---------------------------------------------------------------------

    def end_step(self) -> None:
        """Advance the scaling states of every region now (the step ends); nothing when none was
        used since the last advance. Not needed in a loop of one forward and backward per
        optimizer step (``micro_batches``): the next forward advances them."""
        for r in self.rounders:
            r.rounding.end_step()
        self._clock.ended()

    def _begin_pass(self) -> None:
        """A forward of the model begins (not a recomputation): end the step first when the
        clock says so; the top-level call counts start again."""
        if self._clock.forward(torch.is_grad_enabled()):
            for r in self.rounders:
                r.rounding.end_step()
        self._top.counts.clear()
        self._derived = {k: v for k, v in self._derived.items() if v[0]() is not None}

    def state_dict(self) -> dict[str, Any]:
        """The scaling states of the policy and of every override region, JSON-able."""
        return {"policy": self.rounder.rounding.state_dict(),
                "overrides": [r.rounding.state_dict() for r in self.regions]}

    def load_state_dict(self, state: Any) -> None:
        """Restore what :meth:`state_dict` returned (each state checked as it loads)."""
        if not isinstance(state, dict) or set(state) != {"policy", "overrides"} or \
                not isinstance(state["overrides"], list) or \
                len(state["overrides"]) != len(self.regions):
            raise ValueError(f"state must be emulate.state_dict()'s: policy and "
                             f"{len(self.regions)} override states")
        self.rounder.rounding.load_state(state["policy"])
        for r, s in zip(self.regions, state["overrides"]):
            r.rounding.load_state(s)

    # --- entering and leaving ----------------------------------------------------------------

    def __enter__(self) -> emulate:
        if self._mode is not None:
            raise RuntimeError("emulate: this emulate object is already entered; enter it once "
                               "(nesting it would install its hooks twice)")
        if torch.compiler.is_compiling():
            raise RuntimeError(_IN_COMPILE)
        mine = {id(m) for m in self.model.modules()}
        for key, other in _ACTIVE.items():
            if key in mine:
                name = self._names.get(key, "?")
                raise RuntimeError(f"emulate: module {name or 'the model'!r} is already under "
                                   f"emulate(policy {other.policy.name!r}); nested emulate "
                                   f"blocks would mix two policies: use one, with overrides= "
                                   f"for per-module precision")
        try:
            stance = torch.compiler.set_stance("force_eager")
            stance.__enter__()
        except RuntimeError as exc:  # set_stance refuses inside a compiled region
            raise RuntimeError(_IN_COMPILE) from exc
        self._stance = stance
        self._handles = _install_hooks(self)
        for key in mine:
            _ACTIVE[key] = self
        _ENTERED.append(self)
        if self._autocast is not None:
            self._autocast.enter()
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        mode, self._mode = self._mode, None
        try:
            if mode is not None:
                mode.__exit__(*exc)
        finally:
            for h in self._handles:
                h.remove()
            self._handles = []
            for key in [k for k, v in _ACTIVE.items() if v is self]:
                del _ACTIVE[key]
            if self in _ENTERED:
                _ENTERED.remove(self)
            self._stack.clear()
            if self._stance is not None:
                self._stance.__exit__(*exc)
                self._stance = None
            if self._autocast is not None:
                self._autocast.exit()

    def mode_active(self) -> bool:
        return self._mode is not None and self._mode in _get_current_function_mode_stack()

    def push_frame(self, m: torch.nn.Module) -> None:
        """A module's pre-hook: a new frame; a forward of the model begins when no module of it
        runs (outside a backward pass); the rounding made active where it is not (a module
        recomputed by activation checkpointing inside the backward)."""
        name = self._names.get(id(m), "?")
        in_backward = torch._C._current_graph_task_id() != -1
        if not self._stack and not in_backward:
            self._begin_pass()
        if not in_backward and not self._checkpointed:
            self._checkpointed = _checkpointing(self, self._stack[-1] if self._stack else None)
        pushed = False
        if self._mode is not None and not self.mode_active():
            if self._check_stochastic_checkpointing:
                raise RuntimeError("emulate: a module is recomputed in the backward (activation "
                                   "checkpointing) under a policy that rounds stochastically: "
                                   "the recomputation would draw other random bits; use a "
                                   "deterministic rounding or no checkpointing")
            self._mode.__enter__()
            pushed = True
        frame = self._stack[-1] if self._stack else None
        rounder = self._region.get(name) or (frame.rounder if frame else self.rounder)
        self._stack.append(_Frame(name, rounder, pushed))

    def pop_frame(self) -> _Frame | None:
        if not self._stack:
            return None
        frame = self._stack.pop()
        if frame.pushed and self._mode is not None:
            self._mode.__exit__(None, None, None)
        return frame


def _checkpointing(em: emulate, parent: _Frame | None) -> bool:
    """Whether a module's forward runs under the non-reentrant kind of
    ``torch.utils.checkpoint`` (its saved-tensors hook packs what autograd saves): the
    emulator's nodes made there refuse a backward after the block (``backward_ran``). Under the
    reentrant kind (its forward found on the call stack where gradients turn off inside the
    model, or at its top) its own node gets ``refuse_outside`` as a pre-hook instead: it runs
    only if that node's backward does (not after a forward without gradients)."""
    if torch.is_grad_enabled():
        hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
        return hooks is not None and getattr(hooks[0], "__qualname__", "").startswith(
            "_checkpoint_hook")
    if parent is not None and not parent.grad:
        return False
    code = torch.utils.checkpoint.CheckpointFunction.forward.__code__
    f: Any = sys._getframe(1)
    for _ in range(64):  # the module's hooks, its call and checkpoint's own frames
        if f is None:
            break
        if f.f_code is code:
            node = f.f_locals.get("ctx")  # CheckpointFunctionBackward: the graph's node
            if node is not None:
                node.register_prehook(em.refuse_outside)
            break
        f = f.f_back
    return False


def _check_stream(model: torch.nn.Module, names: dict, stream: Any,
                  embed: Any) -> tuple[tuple[str, ...], str | None]:
    """``stream`` (a name or a list of names; default: the children of the ModuleList holding
    the most parameters) and ``embed`` (default: ``get_input_embeddings()``), each a module of
    the model."""
    if stream is None:
        stream = default_stream(model)
    elif isinstance(stream, str):
        stream = (stream,)
    elif not isinstance(stream, (list, tuple)) or not all(isinstance(s, str) for s in stream):
        raise TypeError(f"stream must be a module name or a list of module names; got "
                        f"{stream!r}")
    stream = tuple(stream)
    embed = _default_embed(model) if embed is None else embed
    if embed is not None and not isinstance(embed, str):
        raise TypeError(f"embed must be a module name; got {type(embed).__name__}")
    for n in stream + ((embed,) if embed else ()):
        if n not in names:
            raise ValueError(f"stream/embed: no module named {n!r} in the model")
    return stream, embed


def default_stream(model: torch.nn.Module) -> tuple[str, ...]:
    """The children of the model's ``nn.ModuleList`` holding the most parameters (the first
    of equals): a transformers model's decoder layers, not a list of heads or norms."""
    best, size = None, -1
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m):
            n = sum(p.numel() for p in m.parameters())
            if n > size:
                best, size = (name, m), n
    if best is None:
        return ()
    name, m = best
    return tuple(f"{name}.{i}" if name else str(i) for i in range(len(m)))


def _default_embed(model: torch.nn.Module) -> str | None:
    get = getattr(model, "get_input_embeddings", None)
    try:
        emb = get() if callable(get) else None
    except (NotImplementedError, AttributeError):
        emb = None
    if emb is None:
        return None
    return next((n for n, m in model.named_modules() if m is emb), None)


def _install_hooks(em: emulate) -> list[Any]:
    """Module-name tracking for the sites and regions, and the residual-stream roundings."""
    handles = []

    def pre(m: torch.nn.Module, args: Any) -> None:
        em.push_frame(m)

    def post(m: torch.nn.Module, args: Any, out: Any) -> Any:
        frame = em.pop_frame()
        if frame is None:
            return None
        return handlers.stream_output(em, frame, out)

    for m in em.model.modules():
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post, always_call=True))
    return handles


__all__ = ["RULES", "default_stream", "emulate"]
