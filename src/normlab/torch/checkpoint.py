"""``normlab inspect --torch``: a transformers causal-LM directory loaded with transformers,
refusing what normlab's own loader (``normlab.models.load_hf``) refuses, then measured by
``normlab.torch.inspect`` with the loss under each preset.

Before any weight is read or any module built, beside the checks of the command (the files, each
safetensors header by normlab's rules, the config's layer count against the layers the
checkpoint stores): the model is built on the meta device and its size in float32 compared with
the memory available (``available``: the command passes ``normlab._memory.available_memory()``),
the refusal naming its largest tensor. transformers then loads it with its loading report,
read: a tensor of the model that the checkpoint lacks (one, or all of them: the model would be
measured with random weights), a stored tensor whose shape the config contradicts, a stored
tensor the model does not take (it would be dropped) and a weight holding an inf or a NaN are
refused by name, as normlab's loader refuses them; any error of the loader is one line. Every
refusal is a ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .emulate import emulate
from .inspect import _loss_of, inspect


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0][:300] if text else type(exc).__name__)


def _meta_size(config: Any, available: int | None) -> None:
    """The model built on the meta device: its parameters and buffers in float32 against
    ``available`` bytes (None: not checked)."""
    import transformers

    if available is None:
        return
    try:
        with torch.device("meta"):
            meta = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    except Exception as exc:  # transformers raises many kinds for a config it cannot build
        raise ValueError(f"config.json: transformers cannot build the model ({_first_line(exc)})"
                         ) from None
    tensors = [(n, t) for n, t in (*meta.named_parameters(), *meta.named_buffers())]
    need = sum(t.numel() for _, t in tensors) * 4
    if need > available:
        name, big = max(tensors, key=lambda nt: nt[1].numel())
        raise ValueError(f"the model needs about {need / 1e9:.3g} GB of memory in float32, more "
                         f"than the {available / 1e9:.3g} GB available (its largest tensor: "
                         f"{name} {tuple(big.shape)}: check the config's sizes)")


def load_causal_lm(path: Any, *, available: int | None = None) -> torch.nn.Module:
    """The checkpoint at ``path`` as an ``AutoModelForCausalLM`` in float32, after the checks
    of the module docstring (a ValueError naming what is refused)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(str(path))
    except Exception as exc:
        raise ValueError(f"{path}: not a configuration transformers reads "
                         f"({_first_line(exc)})") from None
    _meta_size(config, available)
    try:
        loaded: Any = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch.float32, output_loading_info=True,
            ignore_mismatched_sizes=True)
    except Exception as exc:
        raise ValueError(f"{path}: transformers cannot load it ({_first_line(exc)})") from None
    model, info = loaded
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        n = sum(1 for _ in model.state_dict())
        what = "stores none of the model's tensors" if len(missing) >= n else \
            f"lacks {len(missing)} of the model's {n} tensors"
        raise ValueError(f"{path}: the checkpoint {what} ({missing[:3]}"
                         f"{' ...' if len(missing) > 3 else ''}): the model would be measured "
                         f"with random weights")
    bad = sorted(info.get("mismatched_keys", ()), key=str)
    if bad:
        name, stored, wanted = (list(bad[0]) + [None, None])[:3]
        raise ValueError(f"{path}: tensor {name} is stored with shape "
                         f"{tuple(stored) if stored is not None else '?'}; the config makes it "
                         f"{tuple(wanted) if wanted is not None else '?'} ({len(bad)} such)")
    _refuse_unread(path, model, info)
    return model


def _refuse_unread(path: Any, model: torch.nn.Module, info: dict) -> None:
    """What normlab's loader refuses beyond a missing or misshapen tensor: a stored tensor the
    model does not take (transformers' unexpected keys, but those its model class ignores and
    the buffers normlab's families name, GPT-2's ``attn.masked_bias``: the config does not
    describe the checkpoint, and the tensor would be dropped), and a
    weight holding an inf or a NaN (load_hf's ``allow_nonfinite`` is not offered here)."""
    from ..models.hf.families import RECORDS

    buffers = tuple({b for r in RECORDS.values() for b in r.buffers})  # as load_hf skips them
    extra = sorted(k for k in info.get("unexpected_keys", ()) if not k.endswith(buffers))
    if extra:
        raise ValueError(f"{path}: the checkpoint stores {len(extra)} tensor(s) the model does "
                         f"not take ({extra[:3]}{' ...' if len(extra) > 3 else ''}): the "
                         f"config does not describe it, and they would be dropped")
    for name, t in model.state_dict().items():
        if t.is_floating_point() and t.numel():
            finite = torch.isfinite(t.detach())
            if not bool(finite.all()):
                i = int((~finite).reshape(-1).nonzero()[0])
                raise ValueError(f"{path}: tensor {name!r} holds a non-finite value (element "
                                 f"{i}: {float(t.reshape(-1)[i])}), as normlab inspect refuses")


def _policy_losses(model: torch.nn.Module, batch: dict, policies: tuple[str, ...]) -> dict:
    """The loss of one forward under each preset (emulated; a delayed-scaling policy runs a
    first forward to fill its histories, as normlab inspect does)."""
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
                       policies: tuple[str, ...] | None = None,
                       available: int | None = None) -> dict:
    """``normlab inspect --torch``: the checkpoint loaded by :func:`load_causal_lm`, measured by
    ``normlab.torch.inspect`` on the last ``seq_len`` + 1 of ``tokens`` (default: at most
    256), with the loss under each preset; the dict has the keys of
    ``normlab.models.inspect.inspect_model``'s result that the page reads (norm gains empty:
    not read from torch models)."""
    from ..precision import PRESETS

    ids = np.asarray(tokens)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size < 2:
        raise ValueError(f"tokens must be a 1-D array of at least 2 token ids; got {ids.dtype} "
                         f"{ids.shape}")
    model = load_causal_lm(path, available=available)
    cfg: Any = model.config
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
        layer.setdefault("norms", {})
    return res


__all__ = ["inspect_checkpoint", "load_causal_lm"]
