"""``FirstNonFinite(model)``: the first module, op and step where an inf or a NaN appears in a
forward or a backward pass, as transformers' ``DebugUnderflowOverflow`` finds it, with an option
to stop there and the headroom of the values that went in.

    debug = FirstNonFinite(model, stop=True, path="nonfinite.json")
    for batch in loader:
        with debug.watch():                 # one training step
            loss = model(**batch).loss
            loss.backward()
        optimizer.step()

Inside ``watch()`` every aten op of the step is checked (a ``TorchDispatchMode``, which sees the
backward's ops too): the first op with a non-finite floating output or input is the record
``debug.found``: the step (``watch()`` blocks counted from 0), the phase (``forward`` or
``backward``), the module (the innermost module of the model running in the forward; in the
backward the module whose output's gradient arrived last), the op (``aten.exp.default``),
whether the op made the value from finite inputs (``made``) or received it, the counts of NaN
and inf, the statistics of each floating input (``normlab.precision.headroom.tensor_stats``:
amax and what-if overflow, flush and subnormal fractions in bf16, fp16, fp8 and MX), and the
last ``frames`` module outputs before it (module, phase, max |x|: ``DebugUnderflowOverflow``'s
frames). With ``stop=True`` the op raises :class:`NonFiniteError` there (the step does not go
on); ``path`` receives the record as strict JSON (``normlab._files.write_json``: a NaN is the
string ``"nan"``). Checking costs one pass over every op's output (a debugging tool, not a
monitor: watch the steps that matter).
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


def _bad(t: torch.Tensor) -> bool:
    return not bool(torch.isfinite(t).all())


class _Ops(TorchDispatchMode):
    """Checks each aten op of the watched step (see the module docstring)."""

    def __init__(self, owner: FirstNonFinite):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        o, name = self.owner, str(func)
        if o.found is None and not name.startswith(_UNSET):
            # what an op reads: not the memory an in-place op or out= writes
            read = [*(args[1:] if func._schema.name.endswith("_") else args),
                    *(v for k, v in kwargs.items() if k != "out")]
            outs = _floats(out if isinstance(out, (list, tuple)) else [out])
            ins = _floats(read)
            if any(_bad(t) for t in outs) or any(_bad(t) for t in ins):
                o.record(name, ins, outs)
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
        self._stack: list[str] = []
        self._hooked: dict[int, Any] = {}  # outputs given a gradient hook in this step
        self._backward_module = ""

    def record(self, op: str, ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        """The first non-finite value: its record (module docstring), then stop if asked."""
        backward = torch._C._current_graph_task_id() != -1
        where = self._backward_module if backward else (self._stack[-1] if self._stack else "")
        made = not any(_bad(t) for t in ins)
        bad = outs if made else [t for t in ins if _bad(t)]
        self.found = {
            "step": self.step, "phase": "backward" if backward else "forward",
            "module": where, "op": op, "made": made,
            "nan": int(sum(int(torch.isnan(t).sum()) for t in bad)),
            "inf": int(sum(int(torch.isinf(t).sum()) for t in bad)),
            "inputs": [tensor_stats(t.detach().to("cpu", torch.float32).numpy())
                       for t in ins[:4]],
            "frames": list(self.frames),
        }
        if self.path is not None:
            write_json(self.path, self.found, what="path")
        if self.stop:
            raise NonFiniteError(f"first non-finite value at step {self.step}, "
                                 f"{self.found['phase']}, module {where or '(model)'!r}, op "
                                 f"{op} ({'made from finite inputs' if made else 'received'}: "
                                 f"{self.found['nan']} NaN, {self.found['inf']} inf)")

    def _frame(self, name: str, phase: str, t: Any) -> None:
        if isinstance(t, torch.Tensor) and t.dtype in _CHECKED and t.numel():
            with torch.no_grad():
                a = t.detach().abs().amax()
            self.frames.append({"module": name, "phase": phase, "amax": float(a)})

    def _hooks(self) -> list[Any]:
        def pre(m: torch.nn.Module, args: Any) -> None:
            self._stack.append(self._names.get(id(m), "?"))

        def post(m: torch.nn.Module, args: Any, out: Any) -> None:
            name = self._stack.pop() if self._stack else "?"
            t = out if isinstance(out, torch.Tensor) else (
                out[0] if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor)
                else None)
            self._frame(name, "forward", t)
            held = self._hooked.get(id(t)) if t is not None else None
            if t is not None and t.requires_grad and (held is None or held() is not t):
                self._hooked[id(t)] = weakref.ref(t)  # an outer module returning it: skipped
                t.register_hook(lambda g, name=name: self._arrived(name, g))

        hs = []
        for m in self.model.modules():
            hs.append(m.register_forward_pre_hook(pre))
            hs.append(m.register_forward_hook(post, always_call=True))
        return hs

    def _arrived(self, name: str, g: torch.Tensor) -> None:
        """The gradient arrived at ``name``'s output: the backward's ops are its, until the
        next arrival."""
        self._backward_module = name
        self._frame(name, "backward", g)

    @contextlib.contextmanager
    def watch(self) -> Iterator[FirstNonFinite]:
        """One step: its forward and backward checked op by op (module docstring)."""
        self.step += 1
        hs = self._hooks()
        mode = _Ops(self)
        try:
            with mode:
                yield self
        finally:
            for h in hs:
                h.remove()
            self._stack.clear()
            self._hooked.clear()
            self._backward_module = ""


__all__ = ["FirstNonFinite", "NonFiniteError"]
