"""Read and write checkpoints in the layout of Hugging Face ``transformers``: ``config.json`` plus
``model.safetensors``, or shards listed in ``model.safetensors.index.json``.

Seven families are understood, each a setting of ``GPTConfig`` (the README's "Your model" table):

    gpt2     pre-LN LayerNorm with biases, learned positions, tied head, tanh GELU
    llama    RMSNorm, RoPE (rotate-half; linear / llama3 scaling), SwiGLU, GQA, optional biases
    mistral  llama + a sliding window on every layer
    qwen2    llama + biases on q, k, v only (+ sliding windows on the layers ``layer_types`` says)
    qwen3    llama + per-head RMSNorm QK-norm and a free head width
    gemma2   sandwich RMSNorm with gain (1 + w), GeGLU, embeddings times sqrt(C), tied head,
             scale 1 / sqrt(query_pre_attn_scalar), sliding windows on alternate layers,
             attention soft-cap and final soft-cap
    olmo2    RMSNorm on the branch output (x + N(F(x))), RMSNorm over all of q and k, GQA

The weight layouts differ from normlab's in two ways only: q, k and v (and a gated MLP's gate and
up) are separate tensors that normlab stacks in one projection, and GPT-2's ``Conv1D`` stores
weights transposed (in, out). ``_layout`` lists, for every normlab parameter, the checkpoint
tensors it is made of; loading and saving read that one list in the two directions.

Reading: the files are memory-mapped (private, copy-on-write). A parameter stored in one tensor
of its dtype stays a view of the map, read from disk when first used (GPT-2's transposed
``Conv1D`` weights as a transposed view, which NumPy's matrix products read as they are); the
others are copied into the model's parameters (float16 and bfloat16 converted on
the copy, bfloat16 through ml_dtypes), one tensor at a time, each mapped range released after its
copy, so the peak memory is the copied parameters plus about one tensor.
The header is read here rather than by ``safetensors.safe_open``, whose NumPy side neither knows
bfloat16 nor lets a mapped range go; writing uses the ``safetensors`` library.

What a family's config says that normlab cannot express is refused with the field's name, and a
tensor in the file that no parameter takes is refused with its name: nothing is dropped silently.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from .config import GPTConfig
from .gpt import GPT

FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "olmo2")
ARCHITECTURES = {
    "gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
}
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": "bfloat16"}

# Keys of config.json that carry no arithmetic of the forward pass (generation, tokenizer ids,
# init, bookkeeping, dropout): read past. Every other key is either read (the families' own
# sets below) or, when set, refused by name.
_INERT = {
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype", "use_cache",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "initializer_range", "output_attentions", "output_hidden_states", "return_dict",
    "tie_word_embeddings", "id2label", "label2id", "task_specific_params", "_name_or_path",
    "_commit_hash", "chunk_size_feed_forward", "problem_type", "tokenizer_class", "prefix",
    "is_decoder", "is_encoder_decoder", "finetuning_task", "attention_dropout",
}
_GPT2_KEYS = {
    "vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "n_inner", "n_ctx",
    "activation_function", "layer_norm_epsilon", "attn_pdrop", "embd_pdrop", "resid_pdrop",
    "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
    "summary_first_dropout", "reorder_and_upcast_attn", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "add_cross_attention",
}
_DECODER_KEYS = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "pretraining_tp", "sliding_window",
}
_FAMILY_KEYS = {
    "llama": {"attention_bias", "mlp_bias"},
    "mistral": set(),
    "qwen2": {"use_sliding_window", "max_window_layers", "layer_types"},
    "qwen3": {"attention_bias", "use_sliding_window", "max_window_layers", "layer_types"},
    "gemma2": {"attention_bias", "hidden_activation", "query_pre_attn_scalar", "layer_types",
               "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"},
    "olmo2": {"attention_bias"},
}


class _Entry(NamedTuple):
    """One normlab parameter and the checkpoint tensors it is made of."""

    ours: str  # normlab's dotted name
    parts: tuple[str, ...]  # checkpoint names (without the "model." / "transformer." prefix),
    #                         stacked along axis 0 in this order
    rows: tuple[int, ...]  # axis-0 length of each part
    transpose: bool  # GPT-2's Conv1D: the checkpoint holds the transpose


# ---- the config ----------------------------------------------------------------------------
def _refuse(family: str, field: str, value: Any, what: str) -> ValueError:
    return ValueError(f"{family}: {field} = {value!r} is not supported ({what})")


def _rope_fields(hf: dict, family: str) -> dict:
    """GPTConfig's RoPE fields from ``rope_parameters`` (transformers 5) or the older
    ``rope_theta`` + ``rope_scaling`` keys."""
    rp = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    if rp and not isinstance(next(iter(rp.values())), (int, float, str, type(None))):
        raise _refuse(family, "rope_parameters", rp, "one RoPE setting for every layer")
    kind = rp.get("rope_type", rp.get("type", "default"))
    out = {"rope_base": float(rp.get("rope_theta", hf.get("rope_theta", 10000.0)))}
    if kind == "linear":
        out.update(rope_scaling="linear", rope_factor=float(rp["factor"]))
    elif kind == "llama3":
        out.update(rope_scaling="llama3", rope_factor=float(rp["factor"]),
                   rope_low_freq_factor=float(rp["low_freq_factor"]),
                   rope_high_freq_factor=float(rp["high_freq_factor"]),
                   rope_original_max=int(rp["original_max_position_embeddings"]))
    elif kind != "default":
        raise _refuse(family, "rope_type", kind, "normlab has default, linear and llama3 RoPE")
    if rp.get("partial_rotary_factor", 1.0) != 1.0:
        raise _refuse(family, "partial_rotary_factor", rp["partial_rotary_factor"],
                      "RoPE rotates the whole head")
    return out


def _windows(hf: dict, family: str, n_layers: int) -> dict:
    """``sliding_window`` and ``window_layers`` from ``sliding_window`` and ``layer_types``."""
    W = hf.get("sliding_window")
    types = hf.get("layer_types")
    if family in ("qwen2", "qwen3") and not hf.get("use_sliding_window", False):
        W = None  # as transformers: the window exists only with use_sliding_window
        types = None if types is None else ["full_attention"] * len(types)
    if types is None and W is not None:  # older configs: transformers' defaults
        if family == "gemma2":
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
        elif family in ("qwen2", "qwen3"):
            first = hf.get("max_window_layers", 28)
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    if types is not None:
        bad = sorted(set(types) - {"full_attention", "sliding_attention"})
        if bad:
            raise _refuse(family, "layer_types", bad, "layers are full_attention or sliding_attention")
        if len(types) != n_layers:
            raise ValueError(f"{family}: layer_types has {len(types)} entries for {n_layers} layers")
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
        if not sliding:
            return {}
        if W is None:
            raise ValueError(f"{family}: layer_types names sliding layers but sliding_window is None")
        return {"sliding_window": int(W),
                "window_layers": None if len(sliding) == n_layers else sliding}
    if family == "mistral" and W is not None:
        return {"sliding_window": int(W)}
    return {}


def config_from_hf(hf: dict, dtype: str = "float32") -> GPTConfig:
    """The ``GPTConfig`` of a transformers ``config.json`` (a dict); refuses what it cannot
    express, naming the family and the field."""
    if not isinstance(hf, dict):
        raise TypeError(f"hf must be the dict of a config.json; got {type(hf).__name__}")
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"{family}: model_type not supported; normlab reads {', '.join(FAMILIES)}")
    if family == "gpt2":
        return _gpt2_config(hf, dtype)
    _refuse_unknown(hf, family, _INERT | _DECODER_KEYS | _FAMILY_KEYS[family])
    act_key = "hidden_activation" if family == "gemma2" else "hidden_act"
    act = hf.get(act_key) or ("gelu_pytorch_tanh" if family == "gemma2" else "silu")
    gated = {"silu": "swiglu", "gelu_pytorch_tanh": "geglu", "gelu_new": "geglu"}
    if act not in gated or (family == "gemma2") != (gated[act] == "geglu"):
        raise _refuse(family, act_key, act, "the MLP is SwiGLU (silu), Gemma 2's GeGLU (gelu_pytorch_tanh)")
    if hf.get("use_bidirectional_attention"):
        raise _refuse(family, "use_bidirectional_attention", True, "attention is causal")
    L, C, H = hf["num_hidden_layers"], hf["hidden_size"], hf["num_attention_heads"]
    attn_bias = bool(hf.get("attention_bias", False)) and family != "mistral"
    kw: dict[str, Any] = dict(
        vocab_size=hf["vocab_size"], seq_len=hf["max_position_embeddings"], n_layers=L,
        d_model=C, n_heads=H, n_kv_heads=hf.get("num_key_value_heads") or H,
        d_head=hf.get("head_dim") or C // H, d_ff=hf["intermediate_size"], activation=gated[act],
        placement="pre", norm="rmsnorm", norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        positions="rope", tie_embeddings=bool(hf.get("tie_word_embeddings", family == "gemma2")),
        bias=False, qkv_bias=attn_bias, out_bias=attn_bias, mlp_bias=bool(hf.get("mlp_bias", False)),
        dtype=dtype, init_std=float(hf.get("initializer_range", 0.02)),
        **_rope_fields(hf, family), **_windows(hf, family, L),
    )
    if family == "qwen2":
        kw.update(qkv_bias=True, out_bias=False)
    elif family == "qwen3":
        kw.update(qk_norm="rmsnorm", qk_norm_scope="head")
    elif family == "olmo2":
        kw.update(placement="branch", qk_norm="rmsnorm", qk_norm_scope="all")
    elif family == "gemma2":
        kw.update(placement="sandwich", norm_offset=1.0, embed_scale=math.sqrt(C),
                  attn_scale=float(hf.get("query_pre_attn_scalar", 256)) ** -0.5,
                  attn_softcap=hf.get("attn_logit_softcapping"),
                  final_softcap=hf.get("final_logit_softcapping"))
    return GPTConfig(**kw)


def _gpt2_config(hf: dict, dtype: str) -> GPTConfig:
    family = "gpt2"
    _refuse_unknown(hf, family, _INERT | _GPT2_KEYS)
    for field, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                      ("add_cross_attention", False)):
        if field in hf and bool(hf[field]) != ok:
            raise _refuse(family, field, hf[field], f"normlab's attention has {field} = {ok}")
    acts = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
    act = hf.get("activation_function", "gelu_new")
    if act not in acts:
        raise _refuse(family, "activation_function", act, f"one of {sorted(acts)}")
    return GPTConfig(
        vocab_size=hf["vocab_size"], seq_len=hf["n_positions"], n_layers=hf["n_layer"],
        d_model=hf["n_embd"], n_heads=hf["n_head"], d_ff=hf.get("n_inner"), activation=acts[act],
        placement="pre", norm="layernorm", norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        positions="learned", tie_embeddings=bool(hf.get("tie_word_embeddings", True)), bias=True,
        init_std=float(hf.get("initializer_range", 0.02)), dtype=dtype,
    )


def _refuse_unknown(hf: dict, family: str, known: set) -> None:
    unknown = sorted(k for k in hf if k not in known and hf[k] not in (None, False, 0, {}, []))
    if unknown:
        raise ValueError(f"{family}: {', '.join(unknown)} not supported (config fields normlab "
                         f"cannot express; refusing rather than dropping them)")


def family_of(config: GPTConfig) -> str:
    """The transformers family that writes ``config``, or a ValueError naming what none of them
    expresses."""
    c = config
    qkv_bias, out_bias, mlp_bias = c.biases()
    if c.positions == "learned":
        if (c.placement, c.norm) == ("pre", "layernorm") and all(c.biases()) and c.bias \
                and c.activation in ("gelu_tanh", "gelu", "relu"):
            return _only_defaults(c, "gpt2", ("vocab_size", "seq_len", "n_layers", "d_model",
                                              "n_heads", "activation", "d_ff", "tie_embeddings",
                                              "norm_eps", "bias", "placement", "norm", "positions"))
        raise ValueError("no transformers family has learned positions with this config "
                         "(gpt2 is pre-LN LayerNorm with every bias and a GELU or ReLU MLP)")
    if c.placement == "sandwich" and c.norm == "rmsnorm" and c.norm_offset == 1.0:
        family = "gemma2"
    elif c.placement == "branch" and c.qk_norm == "rmsnorm" and c.qk_norm_scope == "all":
        family = "olmo2"
    elif c.qk_norm == "rmsnorm" and c.qk_norm_scope == "head":
        family = "qwen3"
    elif (qkv_bias, out_bias) == (True, False):
        family = "qwen2"
    elif c.sliding_window is not None and c.window_layers is None:
        family = "mistral"
    else:
        family = "llama"
    fixed = {"placement": {"gemma2": "sandwich", "olmo2": "branch"}.get(family, "pre"),
             "norm": "rmsnorm", "activation": "geglu" if family == "gemma2" else "swiglu"}
    for field, want in fixed.items():
        if getattr(c, field) != want:
            raise ValueError(f"{family}: {field} = {getattr(c, field)!r} is not expressible "
                             f"(the family has {want!r})")
    allowed = {"llama": ("rope_scaling", "rope_factor", "rope_low_freq_factor",
                         "rope_high_freq_factor", "rope_original_max", "qkv_bias", "out_bias",
                         "mlp_bias"),
               "mistral": ("sliding_window",),
               "qwen2": ("qkv_bias", "out_bias", "sliding_window", "window_layers"),
               "qwen3": ("qk_norm", "qkv_bias", "out_bias", "sliding_window", "window_layers"),
               "gemma2": ("norm_offset", "embed_scale", "attn_scale", "attn_softcap",
                          "final_softcap", "sliding_window", "window_layers", "tie_embeddings"),
               "olmo2": ("qk_norm", "qk_norm_scope", "qkv_bias", "out_bias")}[family]
    common = ("vocab_size", "seq_len", "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head",
              "d_ff", "activation", "placement", "norm", "norm_eps", "positions", "rope_base",
              "tie_embeddings", "bias", "init_std", "dtype")
    if family == "gemma2" and c.embed_scale != math.sqrt(c.d_model):
        raise ValueError(f"gemma2: embed_scale = {c.embed_scale} is not expressible "
                         f"(the family has sqrt(d_model) = {math.sqrt(c.d_model)})")
    if family in ("qwen3", "olmo2") and (qkv_bias != out_bias):
        raise ValueError(f"{family}: qkv_bias = {qkv_bias} with out_bias = {out_bias} is not "
                         f"expressible (one attention_bias switch)")
    if c.rope_scaling != "none" and family != "llama":
        raise ValueError(f"{family}: rope_scaling = {c.rope_scaling!r} is written for llama only")
    return _only_defaults(c, family, common + allowed)


def _only_defaults(c: GPTConfig, family: str, free: tuple[str, ...]) -> str:
    default = GPTConfig()
    fixed = [f for f in c.to_dict() if f not in free and f not in ("dtype",)
             and getattr(c, f) != getattr(default, f) and not _trivial(c, f)]
    if fixed:
        raise ValueError(f"{family}: {', '.join(f'{f} = {getattr(c, f)!r}' for f in fixed)} not "
                         f"expressible in a {family} checkpoint")
    return family


def _trivial(c: GPTConfig, field: str) -> bool:
    """Fields whose value changes nothing in the checkpoint: training-only settings (dropout,
    the loss's extras, the init), the RoPE scaling knobs without a scaling, explicit bias switches
    equal to ``bias`` and head counts or widths equal to their defaults."""
    if field in ("dropout", "attn_dropout", "z_loss", "label_smoothing", "init_std", "init",
                 "dyt_alpha"):
        return True
    if field == "n_kv_heads":
        return c.kv_heads == c.n_heads
    if field == "d_head":
        return c.d_model % c.n_heads == 0 and c.head_dim == c.d_model // c.n_heads
    if field.startswith("rope_") and field != "rope_base":
        return c.rope_scaling == "none" or field == "rope_scaling"
    if field in ("qkv_bias", "out_bias", "mlp_bias"):
        return getattr(c, field) == c.bias
    return False


def hf_config(config: GPTConfig, family: str | None = None) -> dict:
    """The ``config.json`` dict that transformers reads as ``config``'s family."""
    c = config
    family = family_of(c) if family is None else family
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")
    head = {"architectures": [ARCHITECTURES[family]], "model_type": family,
            "vocab_size": c.vocab_size, "tie_word_embeddings": c.tie_embeddings,
            "initializer_range": c.init_std, "dtype": c.dtype}
    if family == "gpt2":
        act = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}[c.activation]
        return {**head, "n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
                "n_positions": c.seq_len, "n_inner": c.d_ff, "activation_function": act,
                "layer_norm_epsilon": c.norm_eps, "attn_pdrop": c.attn_dropout,
                "embd_pdrop": 0.0, "resid_pdrop": c.dropout, "scale_attn_weights": True}
    qkv_bias, out_bias, mlp_bias = c.biases()
    rope: dict[str, Any] = {"rope_theta": c.rope_base, "rope_type": "default"}
    if c.rope_scaling == "linear":
        rope.update(rope_type="linear", factor=c.rope_factor)
    elif c.rope_scaling == "llama3":
        rope.update(rope_type="llama3", factor=c.rope_factor,
                    low_freq_factor=c.rope_low_freq_factor,
                    high_freq_factor=c.rope_high_freq_factor,
                    original_max_position_embeddings=c.rope_original_max)
    out = {**head, "hidden_size": c.d_model, "intermediate_size": c.hidden,
           "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.kv_heads, "head_dim": c.head_dim,
           "max_position_embeddings": c.seq_len, "rms_norm_eps": c.norm_eps,
           "rope_parameters": rope, "attention_dropout": c.attn_dropout}
    if family == "gemma2":
        out.update(hidden_activation="gelu_pytorch_tanh",
                   query_pre_attn_scalar=_qpas(c),
                   attn_logit_softcapping=c.attn_softcap, final_logit_softcapping=c.final_softcap)
    else:
        out["hidden_act"] = "silu"
    if family == "llama":
        out.update(attention_bias=qkv_bias, mlp_bias=mlp_bias)
        if qkv_bias != out_bias:
            raise ValueError("llama: qkv_bias and out_bias must agree (one attention_bias switch)")
    elif family in ("qwen3", "olmo2", "gemma2"):
        out["attention_bias"] = qkv_bias
    if c.sliding_window is not None or family in ("qwen2", "qwen3", "gemma2"):
        out["sliding_window"] = c.sliding_window
        if family != "mistral":
            out["layer_types"] = ["sliding_attention" if c.window(i) is not None else "full_attention"
                                  for i in range(c.n_layers)]
        if family in ("qwen2", "qwen3"):
            out.update(use_sliding_window=c.sliding_window is not None, max_window_layers=0)
    return out


def _qpas(c: GPTConfig) -> float | int:
    """Gemma 2's query_pre_attn_scalar: 1 / scale^2 (an integer when it is one)."""
    if c.attn_scale is None:
        return c.head_dim
    q = 1.0 / c.attn_scale ** 2
    return round(q) if abs(q - round(q)) <= 1e-9 * q else q


# ---- the weight layout ---------------------------------------------------------------------
def _layout(c: GPTConfig, family: str) -> list[_Entry]:
    """Every normlab parameter of ``c`` and the checkpoint tensors it is made of."""
    E = _Entry
    H, K, D, C, F = c.n_heads, c.kv_heads, c.head_dim, c.d_model, c.hidden
    qkv_bias, out_bias, mlp_bias = c.biases()
    out: list[_Entry] = []
    if family == "gpt2":
        out += [E("wte.weight", ("wte.weight",), (), False), E("wpe.weight", ("wpe.weight",), (), False)]
        for i in range(c.n_layers):
            b, h = f"blocks.{i}.", f"h.{i}."
            for ours, theirs in (("attn.norm", "ln_1"), ("mlp.norm", "ln_2")):
                out += [E(f"{b}{ours}.weight", (f"{h}{theirs}.weight",), (), False),
                        E(f"{b}{ours}.bias", (f"{h}{theirs}.bias",), (), False)]
            for ours, theirs in (("attn.branch.qkv", "attn.c_attn"), ("attn.branch.proj", "attn.c_proj"),
                                 ("mlp.branch.fc", "mlp.c_fc"), ("mlp.branch.proj", "mlp.c_proj")):
                out += [E(f"{b}{ours}.weight", (f"{h}{theirs}.weight",), (), True),
                        E(f"{b}{ours}.bias", (f"{h}{theirs}.bias",), (), False)]
        out += [E("norm_f.weight", ("ln_f.weight",), (), False), E("norm_f.bias", ("ln_f.bias",), (), False)]
    else:
        out.append(E("wte.weight", ("embed_tokens.weight",), (), False))
        norms = {"gemma2": (("attn.norm", "input_layernorm"), ("attn.norm_out", "post_attention_layernorm"),
                            ("mlp.norm", "pre_feedforward_layernorm"),
                            ("mlp.norm_out", "post_feedforward_layernorm")),
                 "olmo2": (("attn.norm", "post_attention_layernorm"),
                           ("mlp.norm", "post_feedforward_layernorm"))}.get(
            family, (("attn.norm", "input_layernorm"), ("mlp.norm", "post_attention_layernorm")))
        for i in range(c.n_layers):
            b, h = f"blocks.{i}.", f"layers.{i}."
            out += [E(f"{b}{ours}.weight", (f"{h}{theirs}.weight",), (), False) for ours, theirs in norms]
            a = f"{h}self_attn."
            out.append(E(f"{b}attn.branch.qkv.weight", (f"{a}q_proj.weight", f"{a}k_proj.weight",
                                                       f"{a}v_proj.weight"), (H * D, K * D, K * D), False))
            if qkv_bias:
                out.append(E(f"{b}attn.branch.qkv.bias", (f"{a}q_proj.bias", f"{a}k_proj.bias",
                                                         f"{a}v_proj.bias"), (H * D, K * D, K * D), False))
            out.append(E(f"{b}attn.branch.proj.weight", (f"{a}o_proj.weight",), (), False))
            if out_bias:
                out.append(E(f"{b}attn.branch.proj.bias", (f"{a}o_proj.bias",), (), False))
            if c.qk_norm != "none":
                out += [E(f"{b}attn.branch.q_norm", (f"{a}q_norm.weight",), (), False),
                        E(f"{b}attn.branch.k_norm", (f"{a}k_norm.weight",), (), False)]
            m = f"{h}mlp."
            out.append(E(f"{b}mlp.branch.fc.weight", (f"{m}gate_proj.weight", f"{m}up_proj.weight"),
                         (F, F), False))
            if mlp_bias:
                out.append(E(f"{b}mlp.branch.fc.bias", (f"{m}gate_proj.bias", f"{m}up_proj.bias"),
                             (F, F), False))
            out.append(E(f"{b}mlp.branch.proj.weight", (f"{m}down_proj.weight",), (), False))
            if mlp_bias:
                out.append(E(f"{b}mlp.branch.proj.bias", (f"{m}down_proj.bias",), (), False))
        out.append(E("norm_f.weight", ("norm.weight",), (), False))
    if not c.tie_embeddings:
        out.append(E("head.weight", ("lm_head.weight",), (), False))
    return out


def _prefix(family: str) -> str:
    return "transformer." if family == "gpt2" else "model."


def _hf_name(family: str, part: str) -> str:
    return part if part.startswith("lm_head") else _prefix(family) + part


def _ignorable(family: str, name: str, config: GPTConfig) -> bool:
    """Checkpoint tensors that are not parameters: GPT-2's causal-mask buffers, stored RoPE
    frequencies, and the head of a tied model (a copy of the embeddings)."""
    return (name.endswith((".attn.bias", ".attn.masked_bias")) and family == "gpt2"
            or name.endswith("rotary_emb.inv_freq")
            or (name == "lm_head.weight" and config.tie_embeddings))


def to_hf_tensors(params: dict[str, np.ndarray], config: GPTConfig,
                  family: str | None = None) -> dict[str, np.ndarray]:
    """normlab's parameters (or gradients: the layout change is linear) as the checkpoint's
    tensors, by transformers names."""
    family = family_of(config) if family is None else family
    out = {}
    for e in _layout(config, family):
        a = params[e.ours]
        if e.transpose:
            a = a.T
        if e.rows:
            starts = np.cumsum((0,) + e.rows)
            for part, r0, r1 in zip(e.parts, starts[:-1], starts[1:]):
                out[_hf_name(family, part)] = a[r0:r1]
        else:
            out[_hf_name(family, e.parts[0])] = a
    return out


def from_hf_tensors(tensors: dict[str, np.ndarray], config: GPTConfig,
                    family: str | None = None) -> dict[str, np.ndarray]:
    """The inverse of ``to_hf_tensors``: checkpoint tensors (by transformers names, with or
    without the "model." / "transformer." prefix) as normlab's parameters."""
    family = family_of(config) if family is None else family
    lookup = _by_short_name(tensors, family)
    out = {}
    for e in _layout(config, family):
        parts = [np.asarray(tensors[lookup[p]]) for p in e.parts]
        a = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        out[e.ours] = a.T if e.transpose else a
    return out


def _by_short_name(names, family: str) -> dict[str, str]:
    """Checkpoint name without its model prefix -> the name as stored."""
    pre = _prefix(family)
    return {n[len(pre):] if n.startswith(pre) else n: n for n in names}


# ---- safetensors files ---------------------------------------------------------------------
class _Tensor(NamedTuple):
    file: Path
    dtype: Any  # numpy dtype of the stored values
    shape: tuple[int, ...]
    start: int  # byte offset in the file
    stop: int


def _read_header(path: Path) -> dict[str, _Tensor]:
    """The tensors of one .safetensors file: 8 bytes little-endian header length, a JSON header
    of ``name -> {dtype, shape, data_offsets}``, then the data."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
        (n,) = struct.unpack("<Q", head)
        if n > os.path.getsize(path):
            raise ValueError(f"{path}: not a safetensors file (header length {n} > file size)")
        header = json.loads(f.read(n))
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        if spec["dtype"] not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {spec['dtype']}; normlab reads "
                             f"{sorted(_ST_DTYPES)}")
        dt = _ST_DTYPES[spec["dtype"]]
        if dt == "bfloat16":
            import ml_dtypes

            dt = ml_dtypes.bfloat16
        start, stop = spec["data_offsets"]
        out[name] = _Tensor(path, np.dtype(dt), tuple(spec["shape"]), 8 + n + start, 8 + n + stop)
    return out


def checkpoint_files(path: str | os.PathLike) -> tuple[dict, list[Path]]:
    """``(config.json as a dict, the weight files)`` of a checkpoint directory, with a clear
    error for a path that is not one."""
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"path {str(root)!r} is not a checkpoint directory (expected a folder with "
                         f"{CONFIG_FILE} and {WEIGHTS_FILE} or {INDEX_FILE})")
    if not (root / CONFIG_FILE).is_file():
        raise ValueError(f"path {str(root)!r} has no {CONFIG_FILE}: not a transformers checkpoint")
    hf = json.loads((root / CONFIG_FILE).read_text())
    if (root / WEIGHTS_FILE).is_file():
        files = [root / WEIGHTS_FILE]
    elif (root / INDEX_FILE).is_file():
        index = json.loads((root / INDEX_FILE).read_text())
        files = [root / f for f in sorted(set(index["weight_map"].values()))]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ValueError(f"{INDEX_FILE} lists missing shards: {missing}")
    else:
        raise ValueError(f"path {str(root)!r} has neither {WEIGHTS_FILE} nor {INDEX_FILE} "
                         f"(PyTorch .bin checkpoints are not read: save them as safetensors)")
    return hf, files


class _MappedFiles:
    """Private (copy-on-write) memory maps of the weight files: ``view`` is a tensor without a
    copy, writable without touching the file; ``release`` hands the pages of a tensor that has
    been copied elsewhere back to the OS (only while no view of the file has been written)."""

    def __init__(self, files: list[Path]):
        self.maps: dict[Path, mmap.mmap] = {}
        for f in files:
            with open(f, "rb") as fh:
                self.maps[f] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)

    def view(self, t: _Tensor) -> np.ndarray:
        count = int(np.prod(t.shape, dtype=np.int64))
        return np.frombuffer(self.maps[t.file], t.dtype, count, t.start).reshape(t.shape)

    def release(self, t: _Tensor) -> None:
        if hasattr(mmap, "MADV_DONTNEED"):
            page = mmap.PAGESIZE
            start = t.start // page * page
            if t.stop > start:
                self.maps[t.file].madvise(mmap.MADV_DONTNEED, start, t.stop - start)


class _Unset(np.ndarray):
    """A stand-in for random initial values that are about to be overwritten: scaling keeps it,
    ``astype`` gives ``np.zeros`` (whose pages the OS provides only once written)."""

    __array_ufunc__ = None  # arithmetic falls to the reflected methods below

    def __rmul__(self, other):
        return self

    __mul__ = __rmul__

    def astype(self, dtype, *args, **kwargs):  # noqa: D102
        return np.zeros(self.shape, dtype)


class _NoDraw(np.random.Generator):
    """A generator whose normal draws are ``_Unset``: builds a model whose parameters are about
    to be loaded without spending time or memory on random initial values."""

    def standard_normal(self, size=None, dtype=np.float64, out=None):  # noqa: D102
        return np.broadcast_to(np.float32(0), size).view(_Unset)


def load_hf(path: str | os.PathLike, *, dtype: str = "float32", mmap_weights: bool = True) -> GPT:
    """The ``GPT`` of a transformers checkpoint directory (``config.json`` and
    ``model.safetensors``, or shards with ``model.safetensors.index.json``) of one of
    ``FAMILIES``; weights stored in float32, float16 or bfloat16 come in as ``dtype`` ("float32"
    or "float64"). The model is in eval mode (dropout off), as ``from_pretrained`` leaves it.

    With ``mmap_weights`` (the default) a parameter stored in one tensor of its dtype (not
    stacked; a transposed one as a transposed view) is a private memory map of the file: read
    from disk when first used, written (by training) into private memory, never into the file. The others, and
    all of them with ``mmap_weights=False``, are copied into memory.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {dtype!r}")
    if not isinstance(mmap_weights, bool):
        raise TypeError(f"mmap_weights must be True or False; got {mmap_weights!r}")
    hf, files = checkpoint_files(path)
    config = config_from_hf(hf, dtype)
    family = hf["model_type"]
    stored: dict[str, _Tensor] = {}
    for f in files:
        stored.update(_read_header(f))
    lookup = _by_short_name(stored, family)
    layout = _layout(config, family)
    missing = [_hf_name(family, p) for e in layout for p in e.parts if p not in lookup]
    if missing:
        raise ValueError(f"{family}: the checkpoint lacks tensors {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")
    used = {lookup[p] for e in layout for p in e.parts}
    extra = sorted(n for n in stored if n not in used and not _ignorable(family, n, config))
    if extra:
        raise ValueError(f"{family}: tensors {extra[:5]} are not supported (no parameter of the "
                         f"config takes them)")
    # not flattened: a flat buffer would copy every mapped weight and touch a gradient buffer
    # of the model's size (Module.flatten can still be called before training it)
    model = GPT(config, rng=_NoDraw(np.random.PCG64(0)), flatten=False)
    owners = {name: (m, name.rsplit(".", 1)[-1]) for name, m in _owners(model)}
    maps = _MappedFiles(files)
    mapped, copies = [], []
    for e in layout:
        module, key = owners[e.ours]
        p = module.params[key]
        ts = [stored[lookup[part]] for part in e.parts]
        want = [p.shape[::-1] if e.transpose else p.shape] if not e.rows else \
            [(rows, *p.shape[1:]) for rows in e.rows]
        for part, t, w in zip(e.parts, ts, want):
            if t.shape != tuple(w):
                raise ValueError(f"{family}: tensor {lookup[part]} has shape {t.shape}; the "
                                 f"config needs {tuple(w)}")
        if mmap_weights and len(ts) == 1 and ts[0].dtype == p.dtype:
            view = maps.view(ts[0])  # backed by the file; Conv1D's (in, out) read as its transpose
            module.params[key] = view.T if e.transpose else view  # (shape of p)
            mapped.append(e.ours)
        else:
            copies.append((p, ts, e.transpose))

    def copy(job) -> None:
        p, ts, transpose = job
        r0 = 0
        for t in ts:
            _copy(p[r0:r0 + t.shape[-1 if transpose else 0]], maps.view(t), transpose)
            r0 += t.shape[-1 if transpose else 0]
            maps.release(t)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # NumPy copies drop the GIL
        list(pool.map(copy, sorted(copies, key=lambda j: -j[0].size)))
    model.eval()
    model.mapped_parameters = tuple(mapped)
    return model


def _copy(dst: np.ndarray, src: np.ndarray, transpose: bool, tile: int = 64) -> None:
    """``dst[...] = src`` (``src.T`` with ``transpose``), converting the dtype; a transposed copy
    goes tile by tile so that both sides stay in cache."""
    if not transpose:
        dst[...] = src
        return
    R, C = src.shape  # dst is (C, R)
    for i in range(0, R, tile):
        for j in range(0, C, tile):
            dst[j:j + tile, i:i + tile] = src[i:i + tile, j:j + tile].T


def _owners(model: GPT):
    """(dotted parameter name, the module that holds it) for every parameter."""
    for prefix, m in model.named_modules():
        for key in m.params:
            yield (f"{prefix}.{key}" if prefix else key), m


def save_hf(model: GPT, path: str | os.PathLike, *, family: str | None = None,
            dtype: str = "float32", max_shard_bytes: int | None = None) -> Path:
    """Write ``model`` as a transformers checkpoint in the directory ``path`` (created):
    ``config.json`` and ``model.safetensors`` in ``dtype`` ("float32", "float16" or
    "bfloat16"), or shards of at most ``max_shard_bytes`` with ``model.safetensors.index.json``.
    ``family`` defaults to the one ``family_of`` finds; ``from_pretrained`` loads the result.
    Every file is written atomically (``normlab._files``: a replaced file keeps its mode); a path
    that is not a folder, or a file of the checkpoint's that is not a regular file (a FIFO, a
    folder), is refused with a ValueError before anything is written."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a normlab GPT; got {type(model).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float32', 'float16' or 'bfloat16'; got {dtype!r}")
    if max_shard_bytes is not None and (isinstance(max_shard_bytes, bool)
                                        or not isinstance(max_shard_bytes, int) or max_shard_bytes < 1):
        raise ValueError(f"max_shard_bytes must be an integer >= 1 or None; got {max_shard_bytes!r}")
    try:
        from safetensors.numpy import save_file
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("save_hf writes with the safetensors library: "
                          "pip install 'normlab[hf]'") from e
    import ml_dtypes

    config = model.config
    family = family_of(config) if family is None else family
    hf = hf_config(config, family)
    hf["dtype"] = dtype
    np_dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    tensors = {k: np.ascontiguousarray(v, dtype=np_dtype)
               for k, v in to_hf_tensors(model.parameters(), config, family).items()}
    from .._files import atomic_write, atomic_write_file, check_output_dir, check_output_path

    root = check_output_dir(path, what="save_hf path")
    meta = {"format": "pt"}
    shards = list(_shards(tensors, max_shard_bytes))
    names = ([WEIGHTS_FILE] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    if root.is_dir():  # every file it writes or removes is new or a regular file: checked first
        for name in (*names, WEIGHTS_FILE, INDEX_FILE, CONFIG_FILE):
            check_output_path(root / name, what=f"save_hf: {name}")
    root.mkdir(parents=True, exist_ok=True)

    def write(name: str, shard: dict) -> None:
        # a new file renamed over the old one (normlab._files): a model memory-mapped from the old
        # file (saved back where it was loaded from) keeps reading the old file
        atomic_write_file(root / name, lambda tmp: save_file(shard, tmp, metadata=meta),
                          what=f"save_hf: {name}")

    if len(shards) == 1:
        write(WEIGHTS_FILE, shards[0])
        (root / INDEX_FILE).unlink(missing_ok=True)
    else:
        weight_map, total = {}, 0
        for name, shard in zip(names, shards):
            write(name, shard)
            weight_map.update({k: name for k in shard})
            total += sum(v.nbytes for v in shard.values())
        (root / WEIGHTS_FILE).unlink(missing_ok=True)
        atomic_write(root / INDEX_FILE, json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n",
            what=f"save_hf: {INDEX_FILE}")
    atomic_write(root / CONFIG_FILE, json.dumps(hf, indent=2, sort_keys=True) + "\n",
                 what=f"save_hf: {CONFIG_FILE}")
    return root


def _shards(tensors: dict[str, np.ndarray], limit: int | None) -> Iterator[dict[str, np.ndarray]]:
    """Consecutive groups of tensors of at most ``limit`` bytes (a larger tensor alone)."""
    if limit is None:
        yield tensors
        return
    shard: dict[str, np.ndarray] = {}
    size = 0
    for k, v in tensors.items():
        if shard and size + v.nbytes > limit:
            yield shard
            shard, size = {}, 0
        shard[k] = v
        size += v.nbytes
    if shard:
        yield shard
