"""``FirstNonFinite(model)``: the first module, op and step where an inf or a NaN appears in a
forward or a backward pass, as transformers' ``DebugUnderflowOverflow`` finds it, with an option
to stop there and the headroom of the values that went in.

    debug = FirstNonFinite(model, stop=True, path="nonfinite.json")
    for batch in loader:
        with debug.watch():                 # one training step
            loss = model(**batch).loss
            loss.backward()
        optimizer.step()

Inside ``watch()`` the model's module outputs are checked in the forward, and in the backward
the gradients arriving at them and, at the end, every parameter's gradient (the first one holding
an inf or a NaN is the finding: ``DebugUnderflowOverflow``'s rule, so an attention mask's
deliberate ``-inf`` inside a module whose output is finite is not one). Every aten op of the step
is watched too (a ``TorchDispatchMode``, which sees the backward's ops), so the finding names the
op: the first op inside that module's call (in the backward, since the gradient before) that
made a non-finite value from finite inputs, or ``None`` when the module received it (a NaN in its
input or its weights). The record ``found``: the step (``watch()`` blocks counted from 0),
the phase (``forward`` or ``backward``), the module (``""`` for the model itself), what held the
value (``output``, ``gradient`` at its output, or ``grad:NAME`` of a parameter), the op, the
counts of NaN and inf in it, the statistics of the op's floating inputs
(``normlab.precision.headroom.tensor_stats``: amax and what-if overflow, flush and subnormal
fractions in bf16, fp16, fp8 and MX, the ``mxfp8`` column under the preset's scale rule as
Monitor's), and the last ``frames`` module outputs before it (module,
phase, max |x|: ``DebugUnderflowOverflow``'s frames). With ``stop=True`` it raises
:class:`NonFiniteError` there (the step does not go on); ``path`` receives the record as strict
JSON (``normlab._files.write_json``: a NaN is the string ``"nan"``). The checks cost a pass over
every op's output: a debugging tool, not a monitor (watch the steps that matter).
"""

from __future__ import annotations

import collections
import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _checks as ck
from .._files import check_output_path, write_json
from ..precision.headroom import tensor_stats
from .headroom import MXFP8, preset_mx_fractions

_CHECKED = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# ops whose output is memory not yet written, or bits read as another dtype: not values
_UNSET = ("aten.empty", "aten.new_empty", "aten.empty_like", "aten.empty_strided",
          "aten.view.dtype", "aten.set_", "aten.resize_")


class NonFiniteError(RuntimeError):
    """``FirstNonFinite(stop=True)``: an inf or NaN appeared (the message says where)."""


def _floats(xs: Any) -> list[torch.Tensor]:
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_floats(x))
        elif isinstance(x, torch.Tensor) and x.dtype in _CHECKED and x.numel():
            out.append(x)
    return out


def _bad(t: Any) -> bool:
    """Whether t holds an inf or a NaN; read detached (``isfinite`` is composite: its ``abs``
    would save t for a backward, one tensor more than activation checkpointing's recomputation
    saves)."""
    return isinstance(t, torch.Tensor) and t.dtype in _CHECKED and t.numel() > 0 and \
        not bool(torch.isfinite(t.detach()).all())


def _what_if(t: torch.Tensor) -> dict:
    """``tensor_stats`` of t (any shape), its ``mxfp8`` column under the preset's scale rule as
    Monitor's (``normlab.torch.headroom``; ``mxfp4`` keeps OCP's floor rule)."""
    x = t.detach().to("cpu", torch.float32).contiguous()
    s = tensor_stats(x.numpy())
    s["formats"][MXFP8] = preset_mx_fractions(x, s)
    return s


def _first(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return getattr(out, "loss", None) if isinstance(getattr(out, "loss", None),
                                                     torch.Tensor) else None


class _Made:
    """An op that made a non-finite value from finite inputs: its name, its inputs, and the
    module it ran in (set by ``FirstNonFinite.made``)."""

    __slots__ = ("ins", "op", "where")

    def __init__(self, op: str, ins: list[torch.Tensor]):
        self.op, self.ins, self.where = op, [t.detach() for t in ins[:4]], ""


class _Ops(TorchDispatchMode):
    """Watches each aten op of the step (module docstring)."""

    def __init__(self, owner: FirstNonFinite):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        o, name = self.owner, str(func)
        if o.found is None and not name.startswith(_UNSET):
            outs = _floats(out if isinstance(out, (list, tuple)) else [out])
            if any(_bad(t) for t in outs):
                # what an op reads: not the memory an in-place op or out= writes
                read = _floats([*(args[1:] if func._schema.name.endswith("_") else args),
                                *(v for k, v in kwargs.items() if k != "out")])
                if not any(_bad(t) for t in read):
                    o.made(_Made(name, read))
        return out


class FirstNonFinite:
    """The first inf or NaN of a watched step (module docstring).

    Args:
        model: a ``torch.nn.Module``.
        stop: raise :class:`NonFiniteError` at the first one.
        frames: module outputs kept before it (their max |x|).
        path: a JSON file for the record (checked now; written when one is found).
    """

    def __init__(self, model: torch.nn.Module, *, stop: bool = False, frames: int = 21,
                 path: Any = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        self.model = model
        self.stop = ck.flag(stop, "stop")
        self.frames: collections.deque = collections.deque(
            maxlen=ck.integer(frames, "frames", lo=0, hi=10_000))
        self.path = None if path is None else check_output_path(path, what="path")
        self.step = -1
        self.found: dict | None = None
        self._names = {id(m): n for n, m in model.named_modules()}
        self._stack: list[list[Any]] = []  # per module call: [name, the first op it made]
        self._first: dict[str, _Made | None] = {"forward": None, "backward": None}
        self._backward_made: _Made | None = None  # since the last gradient arrived
        self._arrival = ""  # the module whose output's gradient arrived last
        self._hooked: dict[int, Any] = {}  # outputs given a gradient hook in this step

    def made(self, m: _Made) -> None:
        """An op made a non-finite value: the first of every module call around it, of the
        backward since the last gradient arrived, of its phase."""
        backward = torch._C._current_graph_task_id() != -1
        m.where = self._arrival if backward else (self._stack[-1][0] if self._stack else "")
        phase = "backward" if backward else "forward"
        self._first[phase] = self._first[phase] or m
        if backward:
            self._backward_made = self._backward_made or m
            return
        for frame in self._stack:
            if frame[1] is None:
                frame[1] = m

    def _record(self, phase: str, module: str, held: str, t: torch.Tensor,
                inside: _Made | None) -> None:
        """The finding (module docstring); stop if asked. ``inside``: the op that made it
        within the module's call (else the phase's first such op, wherever it ran)."""
        m = inside or self._first[phase]
        self.found = {
            "step": self.step, "phase": phase, "module": module, "tensor": held,
            "op": None if m is None else m.op, "made_in": None if m is None else m.where,
            "made": inside is not None,
            "nan": int(torch.isnan(t.detach()).sum()), "inf": int(torch.isinf(t.detach()).sum()),
            "inputs": [] if m is None else [_what_if(x) for x in m.ins],
            "frames": list(self.frames),
        }
        if self.path is not None:
            write_json(self.path, self.found, what="path")
        if self.stop:
            how = f"made by {m.op} in {m.where or '(model)'!r}" if m is not None else \
                "received"
            raise NonFiniteError(f"first non-finite value at step {self.step}, {phase}, module "
                                 f"{module or '(model)'!r}, {held} ({how}: {self.found['nan']} "
                                 f"NaN, {self.found['inf']} inf)")

    def _frame(self, name: str, phase: str, t: torch.Tensor) -> None:
        with torch.no_grad():
            a = float(t.detach().abs().amax()) if t.numel() else 0.0
        self.frames.append({"module": name, "phase": phase, "amax": a})

    def _hooks(self) -> list[Any]:
        def pre(m: torch.nn.Module, args: Any) -> None:
            self._stack.append([self._names.get(id(m), "?"), None])

        def post(m: torch.nn.Module, args: Any, out: Any) -> None:
            name, first = self._stack.pop() if self._stack else ("?", None)
            t = _first(out)
            if t is None or t.dtype not in _CHECKED:
                return
            if torch._C._current_graph_task_id() == -1:  # not a checkpoint's recomputation
                self._frame(name, "forward", t)
                if self.found is None and _bad(t):
                    self._record("forward", name, "output", t, first)
            held = self._hooked.get(id(t))
            if t.requires_grad and (held is None or held() is not t):
                self._hooked[id(t)] = weakref.ref(t)  # an outer module returning it: skipped
                t.register_hook(lambda g, name=name: self._arrived(name, g))

        hs = []
        for m in self.model.modules():
            hs.append(m.register_forward_pre_hook(pre))
            hs.append(m.register_forward_hook(post, always_call=True))
        return hs

    def _arrived(self, name: str, g: torch.Tensor) -> None:
        """The gradient arrived at ``name``'s output."""
        self._frame(name, "backward", g)
        if self.found is None and _bad(g):
            self._record("backward", name, "gradient", g, self._backward_made)
        self._backward_made, self._arrival = None, name

    def _parameters(self) -> None:
        """After the step: a parameter gradient holding an inf or NaN, those of the module
        where the backward's first non-finite value was made first."""
        first = self._first["backward"]
        params = sorted(self.model.named_parameters(), key=lambda np_: first is None or
                        (np_[0].rsplit(".", 1)[0] if "." in np_[0] else "") != first.where)
        for name, p in params:
            if self.found is None and p.grad is not None and _bad(p.grad):
                module = name.rsplit(".", 1)[0] if "." in name else ""
                made = first if first is not None and first.where == module else None
                self._record("backward", module, f"grad:{name}", p.grad, made)

    @contextlib.contextmanager
    def watch(self) -> Iterator[FirstNonFinite]:
        """One step: its forward and backward watched (module docstring)."""
        self.step += 1
        hs = self._hooks()
        try:
            with _Ops(self):
                yield self
            self._parameters()
        finally:
            for h in hs:
                h.remove()
            self._stack.clear()
            self._hooked.clear()
            self._backward_made, self._arrival = None, ""
            self._first = {"forward": None, "backward": None}


__all__ = ["FirstNonFinite", "NonFiniteError"]
