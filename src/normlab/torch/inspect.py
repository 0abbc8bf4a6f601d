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

Per stream module the residual stream's RMS and max |x| (``layers``); the output's mean log Z
and mean logit when the model returns ``.logits``. The model's mode and gradients are as they
were afterwards (``model.eval()`` during the pass: no dropout). Not measured here (normlab
inspect has them): per-head attention statistics and the loss under each preset.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from ..precision.headroom import FORMAT_SCALINGS, format_window, tensor_stats
from .emulate import _default_stream, emulate


def _stats(t: torch.Tensor, kind: str, delayed: dict[str, float], name: str) -> dict:
    s = tensor_stats(t.detach().to("cpu", torch.float32).numpy(),
                     delayed_amax=delayed.get(name))
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
    stream = _default_stream(model) if stream is None else tuple(stream)
    delayed = delayed or {}
    tensors: dict[str, dict] = {}
    record = lambda kind, name, t: tensors.__setitem__(  # noqa: E731
        name, _stats(t, kind, delayed, name))
    handles = _hooks(model, stream, record)
    was_training = model.training
    saved = {n: p.grad for n, p in model.named_parameters()}
    model.eval()
    try:
        for p in model.parameters():
            p.grad = None
        out = model(**batch)
        loss = _loss_of(out)
        loss.backward()
        for n, p in model.named_parameters():
            tensors[f"weight:{n}"] = _stats(p, "weight", delayed, f"weight:{n}")
            if p.grad is not None:
                tensors[f"grad:{n}"] = _stats(p.grad, "gradient", delayed, f"grad:{n}")
    finally:
        for h in handles:
            h.remove()
        for n, p in model.named_parameters():
            p.grad = saved[n]
        model.train(was_training)
    return _report(out, loss, tensors, stream)


def _report(out: Any, loss: torch.Tensor, tensors: dict, stream: tuple) -> dict:
    res: dict[str, Any] = {"loss": float(loss.detach())}
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        lg = logits.detach().float()
        res["output"] = {"log_z": float(torch.logsumexp(lg, -1).mean()),
                         "mean_logit": float(lg.double().mean())}
    res["layers"] = [{"layer": i, "residual_rms": tensors[f"{n}.stream.x"]["rms"],
                      "residual_max": tensors[f"{n}.stream.x"]["amax"]}
                     for i, n in enumerate(stream) if f"{n}.stream.x" in tensors]
    res["tensors"] = tensors
    res["formats"] = [{"key": k, "format": f, "scaling": s, "window": format_window(f)}
                      for k, f, s in FORMAT_SCALINGS]
    return res


def _first(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        return x[0]
    return None


def _hooks(model: torch.nn.Module, stream: tuple, record: Callable) -> list:
    handles = []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            def pre(mod: Any, args: Any, n: str = name) -> Any:
                return record("activation", f"{n}.input", args[0])

            def back(mod: Any, gin: Any, gout: Any, n: str = name) -> Any:
                return record("gradient", f"{n}.dout", gout[0])

            handles.append(m.register_forward_pre_hook(pre))
            handles.append(m.register_full_backward_hook(back))
        if name in stream:
            def post(mod: Any, args: Any, out: Any, n: str = name) -> None:
                t = _first(out)
                if t is None:
                    return
                record("activation", f"{n}.stream.x", t)
                if t.requires_grad:
                    t.register_hook(lambda g: record("gradient", f"{n}.stream.dx", g))
            handles.append(m.register_forward_hook(post))
    return handles


class Monitor:
    """``inspect`` every ``every`` steps of training, as JSON lines.

        monitor = Monitor(model, every=10, path="stats.jsonl")
        for step, batch in enumerate(loader):
            monitor.step(batch)   # measures on steps 0, 10, 20, ... (an extra pass)
            ...

    Each line is ``{"step": k, **inspect(model, batch)}``; delayed scaling's reference is the
    amax of the same tensor at the previous measured step.
    """

    def __init__(self, model: torch.nn.Module, every: int = 10, path: str | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1; got {every!r}")
        self.model, self.every, self.path = model, every, path
        self.count = 0
        self.records: list[dict] = []
        self._amax: dict[str, float] = {}

    def step(self, batch: dict) -> dict | None:
        """Measure on every ``every``-th call (the first included); returns the record or
        None."""
        k, self.count = self.count, self.count + 1
        if k % self.every:
            return None
        rec = {"step": k, **inspect(self.model, batch, delayed=self._amax)}
        self._amax = {n: s["amax"] for n, s in rec["tensors"].items()}
        self.records.append(rec)
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        return rec


def _policy_losses(model: torch.nn.Module, batch: dict, policies: tuple[str, ...]) -> dict:
    """The loss of one forward under each preset (emulated; a delayed-scaling policy runs a
    first forward to fill its histories, as normlab inspect does)."""
    import numpy as np

    from ..precision import PRESETS, DelayedScaling

    out = {}
    with torch.no_grad():
        for name in policies:
            em = emulate(model, name, rng=np.random.default_rng(0))
            with em:
                if any(isinstance(getattr(PRESETS[name], r).scaling, DelayedScaling)
                       for r in ("compute", "activations")):
                    model(**batch)
                    em.end_step()
                out[name] = float(_loss_of(model(**batch)))
    return out


def inspect_checkpoint(path: Any, tokens: Any, *, seq_len: int | None = None,
                       policies: tuple[str, ...] | None = None) -> dict:
    """``normlab inspect --torch``: any transformers causal-LM directory, loaded with
    ``AutoModelForCausalLM`` in float32, measured by :func:`inspect` on the last ``seq_len``
    + 1 of ``tokens`` (default: at most 256), with the loss under each preset; the dict has the
    keys of ``normlab.models.inspect.inspect_model``'s result that the page reads (per-head
    attention statistics and norm gains empty: not measured on torch models)."""
    import numpy as np
    import transformers

    from ..precision import PRESETS

    ids = np.asarray(tokens)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size < 2:
        raise ValueError(f"tokens must be a 1-D array of at least 2 token ids; got {ids.dtype} "
                         f"{ids.shape}")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    cfg = model.config
    if ids.max() >= cfg.vocab_size or ids.min() < 0:
        raise ValueError(f"tokens must lie in [0, vocab_size = {cfg.vocab_size})")
    T = min(256, ids.size - 1) if seq_len is None else min(int(seq_len), ids.size - 1)
    window = torch.from_numpy(ids[-(T + 1):].astype(np.int64))[None]
    batch = {"input_ids": window[:, :-1], "labels": window[:, :-1]}
    res = inspect(model, batch)
    policies = tuple(p for p in PRESETS if p != "fp32") if policies is None else policies
    losses = {"fp32": res["loss"], **_policy_losses(model, batch, tuple(policies))}
    heads = getattr(cfg, "num_attention_heads", 0)
    res.update({
        "model": {"config": {"n_layers": getattr(cfg, "num_hidden_layers", len(res["layers"])),
                             "d_model": getattr(cfg, "hidden_size", 0), "n_heads": heads,
                             "n_kv_heads": getattr(cfg, "num_key_value_heads", heads),
                             "placement": "as " + type(model).__name__,
                             "norm": "the model's own", "architecture": type(model).__name__},
                  "parameters": int(sum(p.numel() for p in model.parameters()))},
        "tokens": {"measured": int(T), "delayed_from": "the same window (no earlier tokens)"},
        "nll": res["loss"],
        "policies": {k: {"loss": v, "delta": v - res["loss"]} for k, v in losses.items()},
    })
    for layer in res["layers"]:
        layer.update({"max_logit": [], "entropy": [], "norms": {}})
    return res
