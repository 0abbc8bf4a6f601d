"""``inspect(model, batch)`` and ``Monitor(model, every=N)``: ``normlab inspect``'s per-tensor
statistics on a ``torch.nn.Module``.

One forward and backward of ``model(**batch)`` (its ``.loss``, or the output itself when it is a
scalar) at the model's own precision, with ``normlab.precision.headroom.tensor_stats`` (amax,
RMS, the log2 histogram, the overflow / flush / subnormal fractions in each format and scaling)
of:

- ``activation``: the input of every ``nn.Linear`` (``{module}.input``) and the residual stream
  after each ``stream`` module (``{module}.stream.x``; the children of the first
  ``nn.ModuleList`` by default, the decoder layers of a transformers model);
- ``gradient``: the gradient arriving at every ``nn.Linear`` output (``{module}.dout``) and at
  each stream module's output (``{module}.stream.dx``), and every parameter's gradient
  (``grad:{name}``);
- ``weight``: every parameter (``weight:{name}``).

Per stream module the residual stream's RMS and max |x| and, per attention head, the largest
kept logit and the mean row entropy (``layers``; from the layer's
``scaled_dot_product_attention`` call or its eager softmax); the output's mean log Z and mean
logit when the model returns ``.logits``. In a sandwich layer (Gemma 2, OLMo 2: a
``post_feedforward_layernorm``) the stream's branches are the post-norms' outputs, the tensors
the layer adds. The model's mode and gradients are as they were afterwards (``model.eval()``
during the pass: no dropout).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .._files import check_output_path, dumps_json
from ..precision.headroom import FORMAT_SCALINGS, format_window, tensor_stats
from .emulate import default_stream as _default_stream
from .headroom import MXFP8, preset_mx_fractions, preset_rule


def _stats(t: torch.Tensor, kind: str, delayed: dict[str, float], name: str) -> dict:
    x = t.detach().to("cpu", torch.float32).contiguous()
    s = tensor_stats(x.numpy(), delayed_amax=delayed.get(name))
    s["formats"][MXFP8] = preset_mx_fractions(x, s)
    s["kind"] = kind
    return s


def _loss_of(out: Any) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, torch.Tensor) and out.dim() == 0:
        loss = out
    if loss is None:
        raise ValueError("model(**batch) must return a scalar or an object with .loss (pass "
                         "labels in the batch)")
    return loss


def inspect(model: torch.nn.Module, batch: dict, *, stream: Any = None,
            delayed: dict[str, float] | None = None) -> dict:
    """The statistics of the module docstring, JSON-ready. ``batch``: keyword arguments of
    ``model`` (with labels). ``delayed``: each tensor's amax at the previous step (delayed
    scaling's reference; default: its own)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not isinstance(batch, dict):
        raise TypeError(f"batch must be a dict of model(**batch) arguments; got "
                        f"{type(batch).__name__}")
    stream = _check_names(model, _default_stream(model) if stream is None else stream)
    delayed = delayed or {}
    probe = _Probe(model, stream, delayed)
    was_training = model.training
    saved = {n: p.grad for n, p in model.named_parameters()}
    model.eval()
    try:
        for p in model.parameters():
            p.grad = None
        with probe:
            out = model(**batch)
            loss = _loss_of(out)
            if loss.requires_grad:  # a model without parameters has no gradients to measure
                loss.backward()
        _weights(model, probe.tensors, delayed)
    finally:
        for n, p in model.named_parameters():
            p.grad = saved[n]
        model.train(was_training)
    return _report(out, loss, probe, stream)


def _weights(model: torch.nn.Module, tensors: dict, delayed: dict[str, float]) -> None:
    """Every parameter's and every parameter gradient's statistics into ``tensors``, on as
    many threads as torch uses (the statistics' kernels release the GIL)."""
    jobs: list[tuple[str, str, torch.Tensor]] = []
    for n, p in model.named_parameters():
        jobs.append((f"weight:{n}", "weight", p))
        if p.grad is not None:
            jobs.append((f"grad:{n}", "gradient", p.grad))
    with ThreadPoolExecutor(max(1, min(torch.get_num_threads(), len(jobs)))) as pool:
        stats = list(pool.map(lambda job: _stats(job[2], job[1], delayed, job[0]), jobs))
    for (name, _, _), s in zip(jobs, stats):
        tensors[name] = s


def _report(out: Any, loss: Any, probe: _Probe, stream: tuple) -> dict:
    tensors = probe.tensors
    res: dict[str, Any] = {"loss": None if loss is None else float(loss.detach())}
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        lg = logits.detach().float()
        res["output"] = {"log_z": float(torch.logsumexp(lg, -1).mean()),
                         "mean_logit": float(lg.double().mean())}
    res["layers"] = [{"layer": i, "residual_rms": tensors[f"{n}.stream.x"]["rms"],
                      "residual_max": tensors[f"{n}.stream.x"]["amax"],
                      **probe.attention.get(i, {"max_logit": [], "entropy": []}),
                      **probe.added.get(i, {})}
                     for i, n in enumerate(stream) if f"{n}.stream.x" in tensors]
    res["tensors"] = tensors
    res["formats"] = [{"key": k, "format": f, "scaling": s, "window": format_window(f),
                       **({"scale_rule": _rule(k)} if s == "mx" else {})}
                      for k, f, s in FORMAT_SCALINGS]
    return res


def weight_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The modules whose own parameters include a matrix (or a stack of them: MoE experts) and
    whose input is floating: linear layers, transformers' ``Conv1D``, convolutions, experts,
    routers, ``nn.MultiheadAttention``; not embeddings (their input is token ids)."""
    out = []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Embedding):
            continue
        if any(p.dim() >= 2 for p in m.parameters(recurse=False)):
            out.append((name, m))
    return out


def _first_float(xs: Any) -> torch.Tensor | None:
    return next((x for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()), None)


def _rule(key: str) -> str:
    """The scale rule of an MX column: the ``mxfp8`` preset's for ``mxfp8``, OCP's floor for
    the others."""
    return preset_rule()[1] if key == MXFP8 else "floor"


def _first(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        return x[0]
    return None


_ATTN_NAMES = ("self_attn", "attn", "attention")
_MLP_NAMES = ("mlp", "block_sparse_moe", "feed_forward")
# a sandwich layer (Gemma 2, OLMo 2) normalizes each branch's output before it is added: the
# module whose output is added to the stream, per branch
_SANDWICH = {"attn": "post_attention_layernorm", "mlp": "post_feedforward_layernorm"}


def _child(m: torch.nn.Module, names: tuple[str, ...]) -> torch.nn.Module | None:
    return next((getattr(m, n) for n in names if isinstance(getattr(m, n, None),
                                                            torch.nn.Module)), None)


def _added(layer: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """Per branch, the module whose output the layer adds to the stream: the post-norm of a
    sandwich layer (which has ``post_feedforward_layernorm``), else the branch itself. (In
    Llama-style layers ``post_attention_layernorm`` is the MLP's pre-norm: not added.)"""
    sandwich = isinstance(getattr(layer, _SANDWICH["mlp"], None), torch.nn.Module)
    out = {}
    for branch, names in (("attn", _ATTN_NAMES), ("mlp", _MLP_NAMES)):
        m = getattr(layer, _SANDWICH[branch], None) if sandwich else _child(layer, names)
        if isinstance(m, torch.nn.Module):
            out[branch] = m
    return out


class _Probe(TorchFunctionMode):
    """The hooks of one measured pass: the tensors' statistics (module docstring), per layer
    the terms added to the stream and the attention statistics per head, and the model's
    outputs. A context: installed on entry, removed on exit."""

    def __init__(self, model: torch.nn.Module, stream: tuple, delayed: dict[str, float]):
        super().__init__()
        self.model, self.stream, self.delayed = model, stream, delayed
        self.tensors: dict[str, dict] = {}
        self.attention: dict[int, dict] = {}
        self.added: dict[int, dict] = {}
        self.outputs: list[Any] = []
        self.layer: int | None = None
        self._inputs: dict[int, torch.Tensor] = {}
        self._handles: list[Any] = []

    def record(self, kind: str, name: str, t: torch.Tensor) -> None:
        self.tensors[name] = _stats(t, kind, self.delayed, name)

    def __enter__(self) -> _Probe:
        self._handles = self._install()
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles = []

    def _install(self) -> list:
        hs = [self.model.register_forward_hook(lambda m, a, o: self.outputs.append(o))]
        for name, m in weight_modules(self.model):
            hs.append(m.register_forward_pre_hook(self._module_input(name), with_kwargs=True))
            hs.append(m.register_forward_hook(self._module_output(name)))
        for i, name in enumerate(self.stream):
            layer = self.model.get_submodule(name)
            hs.append(layer.register_forward_pre_hook(self._enter_layer(i), with_kwargs=True))
            hs.append(layer.register_forward_hook(self._leave_layer(i, name)))
            for branch, m in _added(layer).items():
                hs.append(m.register_forward_hook(self._branch(i, name, branch)))
        return hs

    def _module_input(self, name: str) -> Callable:
        def pre(mod: Any, args: Any, kwargs: Any) -> None:
            x = _first_float((*args, *kwargs.values()))
            if x is not None:
                self.record("activation", f"{name}.input", x)
        return pre

    def _module_output(self, name: str) -> Callable:
        """The gradient arriving at the module's output, by a hook on the output tensor (a
        module's full backward hook would warn where no input needs a gradient)."""
        def post(mod: Any, args: Any, out: Any) -> None:
            t = _first(out)
            if t is not None and t.requires_grad and t.is_floating_point():
                t.register_hook(lambda g: self.record("gradient", f"{name}.dout", g))
        return post

    def _enter_layer(self, i: int) -> Callable:
        def pre(mod: Any, args: Any, kwargs: Any) -> None:
            self.layer = i
            x = args[0] if args else kwargs.get("hidden_states")
            if isinstance(x, torch.Tensor):
                self._inputs[i] = x
        return pre

    def _leave_layer(self, i: int, name: str) -> Callable:
        def post(mod: Any, args: Any, out: Any) -> None:
            self.layer = None
            t = _first(out)
            if t is None:
                return
            self.record("activation", f"{name}.stream.x", t)
            if t.requires_grad:
                t.register_hook(lambda g: self.record("gradient", f"{name}.stream.dx", g))
        return post

    def _branch(self, i: int, name: str, branch: str) -> Callable:
        """The term a branch adds; after the attention branch the stream is input + term."""
        def post(mod: Any, args: Any, out: Any) -> None:
            t = _first(out)
            if t is None:
                return
            with torch.no_grad():
                self.added.setdefault(i, {})[f"{branch}_added_rms"] = float(
                    torch.sqrt(torch.mean(t.detach().double() ** 2)))
                x = self._inputs.get(i)
                if branch == "attn" and x is not None and x.shape == t.shape:
                    self.record("activation", f"{name}.attn.stream.x", x + t)
        return post

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.layer is None:
            return out
        if func is F.scaled_dot_product_attention:
            with torch.no_grad():
                self.attention[self.layer] = _sdpa_stats(*args, **kwargs)
        elif func in (F.softmax, torch.softmax, torch.Tensor.softmax) and args and \
                isinstance(args[0], torch.Tensor) and args[0].dim() == 4:
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim in (-1, 3):  # eager attention's probabilities
                with torch.no_grad():
                    self.attention[self.layer] = _head_stats(args[0].detach().float(),
                                                             out.detach().float())
        return out


def _head_stats(s: torch.Tensor, p: torch.Tensor) -> dict:
    """Per head: the largest logit where the mask keeps the position (s: the masked logits,
    (B, H, T, S)) and the mean over batch and queries of the rows' entropy in nats."""
    logp = torch.where(p > 0, torch.log(p), torch.zeros_like(p))
    ent = -(p * logp).sum(-1)  # (B, H, T)
    return {"max_logit": s.amax(dim=(0, 2, 3)).double().tolist(),
            "entropy": ent.double().mean(dim=(0, 2)).tolist()}


def _sdpa_stats(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None,
                dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                enable_gqa: bool = False) -> dict:
    """``_head_stats`` of a ``scaled_dot_product_attention`` call: its logits s = q k^T scale
    (keys repeated for grouped heads), masked as it masks them, and their softmax."""
    q, k = q.detach().float(), k.detach().float()
    if k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * sc
    T, S = s.shape[-2], s.shape[-1]
    if is_causal:
        keep = torch.ones(T, S, dtype=torch.bool, device=s.device).tril(S - T)
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask.float()
    return _head_stats(s, torch.softmax(s, dim=-1))


def _check_names(model: torch.nn.Module, stream: Any) -> tuple[str, ...]:
    """``stream``: a module name or a list of them, each a module of ``model``."""
    names = (stream,) if isinstance(stream, str) else stream
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"stream must be a module name or a list of module names; got "
                        f"{stream!r}")
    known = dict(model.named_modules())
    missing = [n for n in names if n not in known]
    if missing:
        raise ValueError(f"stream: no module named {missing[0]!r} in the model")
    return tuple(names)


class Monitor:
    """``normlab inspect``'s statistics every ``every`` steps of training, as JSON lines.

        monitor = Monitor(model, every=10, path="stats.jsonl")
        for batch in loader:
            with monitor.watch():          # measures the step itself on steps 0, 10, 20, ...
                loss = model(**batch).loss
                loss.backward()
            optimizer.step()

    ``watch()`` measures the training step's own forward and backward (the model's mode, the
    user's loss and its scale): on a measured step it installs ``inspect``'s hooks for the
    block and records the weights and gradients at its end; on the others it does nothing.
    ``step(batch)`` instead runs ``inspect`` (an extra forward and backward in eval mode, the
    gradients restored) on every ``every``-th call. Each line is ``{"step": k, ...}`` with
    ``inspect``'s keys; delayed scaling's reference is the amax of the same tensor at the
    previous measured step.
    """

    def __init__(self, model: torch.nn.Module, every: int = 10, path: str | None = None, *,
                 stream: Any = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1; got {every!r}")
        if path is not None:
            path = str(check_output_path(path, what="path"))
        self.model, self.every, self.path = model, every, path
        self.stream = _check_names(model, _default_stream(model) if stream is None else stream)
        self.count = 0
        self.records: list[dict] = []
        self._amax: dict[str, float] = {}

    def step(self, batch: dict) -> dict | None:
        """Measure on every ``every``-th call (the first included) with an extra pass; returns
        the record or None."""
        k, self.count = self.count, self.count + 1
        if k % self.every:
            return None
        return self._keep({"step": k, **inspect(self.model, batch, stream=self.stream,
                                                 delayed=self._amax)})

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Measure the forward and backward run inside the block on every ``every``-th
        block (class docstring); the record is ``records[-1]``."""
        k, self.count = self.count, self.count + 1
        if k % self.every:
            yield
            return
        probe = _Probe(self.model, self.stream, self._amax)
        with probe:
            yield
        _weights(self.model, probe.tensors, self._amax)
        out = probe.outputs[-1] if probe.outputs else None
        loss = out if isinstance(out, torch.Tensor) and out.dim() == 0 else getattr(out, "loss",
                                                                                      None)
        self._keep({"step": k, **_report(out, loss, probe, self.stream)})

    def _keep(self, rec: dict) -> dict:
        self._amax = {n: s["amax"] for n, s in rec["tensors"].items()}
        self.records.append(rec)
        if self.path is not None:
            line = dumps_json(rec, indent=None)  # strict JSON: a NaN loss is "nan"
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")  # one write of one line: O_APPEND keeps lines whole
        return rec
