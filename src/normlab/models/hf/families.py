"""The checkpoint families, one ``Family`` record each: its name and architecture, the
``config.json`` keys it reads, its tensor names and layout, how its config maps to ``GPTConfig``
and back, and what it refuses. A new family is one record in ``RECORDS`` (often a
``dataclasses.replace`` of a near relative) and one test entry; the functions below read the
records and compare no family name.

The weight layouts differ from normlab's in two ways only: q, k and v (and a gated MLP's gate and
up) are separate tensors that normlab stacks in one projection, and GPT-2's ``Conv1D`` stores
weights transposed (in, out). ``layout`` lists, for every normlab parameter, the checkpoint
tensors it is made of; loading and saving read that one list in the two directions.

Every record states its coverage of ``config.json``: the fields it ``mapped`` (read into
``GPTConfig``, type- and range-checked first by ``fields``, naming the field) and the fields it
``ignored``, each with the value normlab assumes (``Assumed``: ``attention_dropout`` is mapped,
``pretraining_tp`` is anything, GPT-2's ``scale_attn_weights`` must be true). Besides these only
``BOOKKEEPING`` keys are read past (names, token ids, generation settings: nothing the forward or
backward pass computes with). A config that sets an ignored field to a value other than the one
assumed is refused, naming the field, its value and the assumption; a field neither mapped nor
listed is refused by name, whatever its value. Families transformers has and normlab knowingly
cannot read are refused with the reason (``REFUSED_FAMILIES``: Helium's interleaved RoPE).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from ..config import GPTConfig
from . import fields as fd

# normlab's names of the norms' parameters (the one place a renaming of them is written):
# norm kind -> (gain, bias)
NORM_PARAMETERS = {"layernorm": ("weight", "bias"), "rmsnorm": ("weight", None)}
LN_GAIN, LN_BIAS = NORM_PARAMETERS["layernorm"]
RMS_GAIN = NORM_PARAMETERS["rmsnorm"][0]

# ---- what each config.json field is to normlab -----------------------------------------------
class _Anything:
    def __repr__(self) -> str:
        return "anything"


ANY: Any = _Anything()  # an ignored field whose value changes nothing normlab computes


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 0 is 0.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


class Assumed(NamedTuple):
    """A ``config.json`` field a family does not map, and what normlab assumes of it."""

    values: tuple[Any, ...]  # the values accepted (the first is the one named); (ANY,): any value
    why: str  # what the field does in transformers, and why normlab may read past it

    def accepts(self, value: Any) -> bool:
        return self.values[0] is ANY or any(_same(value, v) for v in self.values)

    def shown(self) -> str:
        """``False``, ``False or None``, ``anything``."""
        return " or ".join(repr(v) for v in self.values)


# Keys of config.json that carry no arithmetic of the forward or backward pass, for every
# family: names and versions, token ids read by generation, the labels of classification heads,
# output switches, and PretrainedConfig's generation settings (read by generate() alone).
BOOKKEEPING = frozenset({
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
    "_name_or_path", "_commit_hash", "_attn_implementation_autoset", "bos_token_id",
    "eos_token_id", "sep_token_id", "decoder_start_token_id", "id2label", "label2id",
    "problem_type", "task_specific_params", "tokenizer_class", "prefix", "finetuning_task",
    "output_attentions", "output_hidden_states", "return_dict", "use_cache", "torchscript",
    "use_bfloat16", "tf_legacy_loss", "cache_implementation", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens",
})

_ANYTHING = (ANY,)
_COMMON_IGNORED = {
    "chunk_size_feed_forward": Assumed(_ANYTHING, "read by no code of these families (it would "
                                                  "run the MLP over chunks of positions: the "
                                                  "same products)"),
    "is_encoder_decoder": Assumed((False,), "a decoder-only language model"),
    "is_decoder": Assumed(_ANYTHING, "read by no causal language model's code"),
}
_DECODER_IGNORED = {
    **_COMMON_IGNORED,
    "pad_token_id": Assumed(_ANYTHING, "the embedding's padding_idx: transformers keeps that "
                                       "row's gradient 0 and normlab does not (the forward is "
                                       "the same; training on the pad token differs)"),
    "pretraining_tp": Assumed(_ANYTHING, "read by no code of transformers 5 (transformers 4 "
                                         "sliced the same products into that many parts)"),
}
_NO_WINDOW = Assumed(_ANYTHING, "this family's transformers code reads no sliding window: every "
                                "layer attends to every earlier position")
_DECODER_MAPPED = {
    "vocab_size": "vocab_size", "hidden_size": "d_model", "intermediate_size": "d_ff",
    "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads", "head_dim": "d_head", "hidden_act": "activation",
    "max_position_embeddings": "seq_len", "rms_norm_eps": "norm_eps",
    "tie_word_embeddings": "tie_embeddings", "initializer_range": "init_std",
    "attention_dropout": "attn_dropout",
    "rope_parameters": "rope_base, rope_scaling, rope_factor, rope_low_freq_factor, "
                       "rope_high_freq_factor, rope_original_max",
    "rope_scaling": "rope_scaling and its factors (transformers 4's key)",
    "rope_theta": "rope_base (transformers 4's key)",
}
# a RoPE setting's keys, by rope_type (any other key is refused)
_ROPE_KEYS = {"default": frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})}
_ROPE_KEYS["linear"] = _ROPE_KEYS["default"] | {"factor"}
_ROPE_KEYS["llama3"] = _ROPE_KEYS["linear"] | {"low_freq_factor", "high_freq_factor",
                                               "original_max_position_embeddings"}
# families transformers has and normlab knowingly does not read: model_type -> why
REFUSED_FAMILIES = {
    "helium": "its rotary embedding is interleaved: transformers' models/helium rotates the "
              "features 0::2 of each head with 1::2, where normlab's RoPE (Llama's) rotates the "
              "first half with the second, so read as a Llama its q and k would be rotated in the "
              "wrong pairs",
    # gated attention (GPTConfig.attn_gate) is normlab's; these families hold it amid what
    # GPTConfig cannot express
    "qwen3_next": "its full-attention layers are gated attention (normlab's attn_gate), but "
                  "three layers in four are Gated DeltaNet linear attention and its MLPs are "
                  "mixtures of experts, and the gate's rows are interleaved per head with q's in "
                  "q_proj; GPTConfig has no linear attention and no experts",
    "qwen3_5": "its full-attention layers are gated attention (normlab's attn_gate), but its "
               "layer_types mix them with Gated DeltaNet linear attention, which GPTConfig "
               "cannot express",
}
# GPTConfig fields every decoder record may set
_DECODER_FREE = ("vocab_size", "seq_len", "n_layers", "d_model", "n_heads", "n_kv_heads",
                 "d_head", "d_ff", "activation", "placement", "norm", "norm_eps", "positions",
                 "rope_base", "tie_embeddings", "bias", "init_std", "dtype")


class Entry(NamedTuple):
    """One normlab parameter and the checkpoint tensors it is made of."""

    ours: str  # normlab's dotted name
    parts: tuple[str, ...]  # checkpoint names (without the record's prefix), stacked along
    #                         axis 0 in this order
    rows: tuple[int, ...]  # axis-0 length of each part
    transpose: bool  # GPT-2's Conv1D: the checkpoint holds the transpose


@dataclasses.dataclass(frozen=True)
class Family:
    """One checkpoint family. ``read``/``write``/``tensors`` are the config and layout
    translations (the decoder ones read the fields below; GPT-2 has its own); ``claims`` says
    whether ``family_of`` picks this record for a config (records are tried in order)."""

    name: str  # config.json's model_type
    architecture: str  # config.json's architectures[0]
    mapped: dict[str, str]  # config.json field -> the GPTConfig fields it sets
    ignored: dict[str, Assumed]  # config.json field -> what normlab assumes of it
    read: Callable[[dict, str, Family], dict]  # config.json -> GPTConfig fields
    write: Callable[[GPTConfig, Family], dict]  # GPTConfig -> config.json (beyond the head)
    tensors: Callable[[GPTConfig, Family], list]  # the layout: list of Entry
    claims: Callable[[GPTConfig], bool]  # family_of's test
    check: Callable[[GPTConfig, Family], None]  # a ValueError naming what it cannot hold
    prefix: str = "model."  # of every tensor but lm_head
    layers: str = "layers"  # the per-layer tensors: f"{prefix}{layers}.{i}."
    layers_key: str = "num_hidden_layers"
    embedding: str = "embed_tokens.weight"
    buffers: tuple[str, ...] = ("rotary_emb.inv_freq",)  # stored non-parameters (suffixes)
    # decoder records: the fields the shared decoder translation reads
    fixed: tuple[tuple[str, Any], ...] = ()  # GPTConfig fields the family sets
    free: tuple[str, ...] = ()  # GPTConfig fields it may set besides _DECODER_FREE
    act_key: str = "hidden_act"
    acts: tuple[tuple[str, str], ...] = (("silu", "swiglu"),)  # accepted -> normlab MLP
    act_written: str = "silu"
    tied_default: bool = False
    windows: str = "none"  # "none", "all" (every layer), "layer_types" (gemma2), "qwen"
    bias_keys: tuple[str, ...] = ()  # config.json bias switches written
    one_bias_switch: bool = False  # attention_bias sets q, k, v and o together
    rope_scaling: bool = False  # writes linear / llama3 RoPE scaling
    norms: tuple[tuple[str, str], ...] = (("attn.norm", "input_layernorm"),
                                          ("mlp.norm", "post_attention_layernorm"))
    extra_read: Callable[[dict, str, int], dict] | None = None
    extra_write: Callable[[GPTConfig], dict] | None = None
    extra_check: Callable[[GPTConfig, str], None] | None = None


def record(family: str) -> Family:
    """The record of ``family``; a ValueError listing the families otherwise."""
    if not isinstance(family, str) or family not in RECORDS:
        raise ValueError(f"family must be one of {tuple(RECORDS)}; got {family!r}")
    return RECORDS[family]


# ---- config.json -> GPTConfig ----------------------------------------------------------------
def _refuse(family: str, field: str, value: Any, what: str) -> ValueError:
    return ValueError(f"{family}: {field} = {value!r} is not supported ({what})")


def _check_fields(hf: dict, rec: Family) -> None:
    """Every key of ``hf`` is mapped by ``rec``, ignored by it with its value among those
    assumed, or bookkeeping; a ValueError naming the first that is not."""
    family = rec.name
    unknown = sorted(k for k in hf if k not in rec.mapped and k not in rec.ignored
                     and k not in BOOKKEEPING)
    if unknown:
        raise ValueError(f"{family}: {', '.join(unknown)} not supported (config fields normlab "
                         f"neither maps nor knows to be ignorable; refusing rather than "
                         f"dropping them)")
    for key, assumed in rec.ignored.items():
        if key in hf and not assumed.accepts(hf[key]):
            raise _refuse(family, key, hf[key],
                          f"normlab assumes {key} = {assumed.shown()}: {assumed.why}")


def _record_of(hf: dict) -> Family:
    """The record of ``hf``'s model_type; a ValueError naming it (and why, for a family normlab
    knowingly refuses) otherwise."""
    family = hf.get("model_type")
    if isinstance(family, str) and family in REFUSED_FAMILIES:
        raise ValueError(f"{family}: model_type not supported: {REFUSED_FAMILIES[family]}")
    if not isinstance(family, str) or family not in RECORDS:
        raise ValueError(f"{family}: model_type not supported; normlab reads "
                         f"{', '.join(RECORDS)}")
    return RECORDS[family]


def config_from_hf(hf: dict, dtype: str = "float32") -> GPTConfig:
    """The ``GPTConfig`` of a transformers ``config.json`` (a dict); refuses what it cannot
    express, naming the family and the field: a field of the wrong JSON type or out of range
    (``fields``), an ignored field whose value is not the one normlab assumes, a field the record
    neither maps nor lists, a family normlab knowingly refuses (``REFUSED_FAMILIES``)."""
    if not isinstance(hf, dict):
        raise TypeError(f"hf must be the dict of a config.json; got {type(hf).__name__}")
    rec = _record_of(hf)
    _check_fields(hf, rec)
    return GPTConfig(**rec.read(hf, dtype, rec), dtype=dtype)


def _rope_fields(hf: dict, family: str) -> dict:
    """GPTConfig's RoPE fields from ``rope_parameters`` (transformers 5) or the older
    ``rope_theta`` + ``rope_scaling`` keys."""
    key = "rope_parameters" if hf.get("rope_parameters") is not None else "rope_scaling"
    rp = dict(fd.mapping(hf, key, family))
    if rp and not isinstance(next(iter(rp.values())), (int, float, str, type(None))):
        raise _refuse(family, key, rp, "one RoPE setting for every layer")
    where = f"{family}: {key}"
    kind = fd.string(rp, "rope_type", where, default=fd.string(rp, "type", where,
                                                                default="default"))
    base = fd.real(hf, "rope_theta", family, default=10000.0, lo=0.0, open_lo=True)
    out = {"rope_base": fd.real(rp, "rope_theta", where, default=base, lo=0.0, open_lo=True)}

    def positive(k: str) -> float:
        return fd.real(rp, k, where, lo=0.0, open_lo=True)

    if kind == "linear":
        out.update(rope_scaling="linear", rope_factor=positive("factor"))
    elif kind == "llama3":
        out.update(rope_scaling="llama3", rope_factor=positive("factor"),
                   rope_low_freq_factor=positive("low_freq_factor"),
                   rope_high_freq_factor=positive("high_freq_factor"),
                   rope_original_max=fd.integer(rp, "original_max_position_embeddings", where))
    elif kind != "default":
        raise _refuse(family, "rope_type", kind, "normlab has default, linear and llama3 RoPE")
    unknown = sorted(set(rp) - _ROPE_KEYS[kind])
    if unknown:
        raise ValueError(f"{where}: {', '.join(unknown)} not supported (a {kind} RoPE setting "
                         f"holds {', '.join(sorted(_ROPE_KEYS[kind]))})")
    partial = fd.real(rp, "partial_rotary_factor", where, default=1.0)
    if partial != 1.0:
        raise _refuse(family, "partial_rotary_factor", partial, "RoPE rotates the whole head")
    return out


def _layer_types(hf: dict, rec: Family, n_layers: int) -> tuple[int | None, list | None]:
    """(the window, each layer's type or None) as the record's window rule reads them."""
    family = rec.name
    W = fd.integer(hf, "sliding_window", family, default=None)
    types = None if rec.windows == "all" else fd.string_list(hf, "layer_types", family)
    if rec.windows == "qwen" and not fd.flag(hf, "use_sliding_window", family, default=False):
        W = None  # as transformers: the window exists only with use_sliding_window
        types = None if types is None else ["full_attention"] * len(types)
    if types is None and W is not None:  # older configs: transformers' defaults
        if rec.windows == "layer_types":
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention"
                     for i in range(n_layers)]
        elif rec.windows == "qwen":
            first = fd.integer(hf, "max_window_layers", family, default=28, lo=0)
            types = ["sliding_attention" if i >= first else "full_attention"
                     for i in range(n_layers)]
    return W, types


def _windows(hf: dict, rec: Family, n_layers: int) -> dict:
    """``sliding_window`` and ``window_layers`` from ``sliding_window`` and ``layer_types``
    (nothing for a family without windows: it reads neither)."""
    family = rec.name
    if rec.windows == "none":
        return {}
    W, types = _layer_types(hf, rec, n_layers)
    if types is not None:
        bad = sorted(set(types) - {"full_attention", "sliding_attention"})
        if bad:
            raise _refuse(family, "layer_types", bad,
                          "layers are full_attention or sliding_attention")
        if len(types) != n_layers:
            raise ValueError(f"{family}: layer_types has {len(types)} entries for {n_layers} "
                             f"layers")
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
        if not sliding:
            return {}
        if W is None:
            raise ValueError(f"{family}: layer_types names sliding layers but sliding_window "
                             f"is None")
        return {"sliding_window": W,
                "window_layers": None if len(sliding) == n_layers else sliding}
    if rec.windows == "all" and W is not None:
        return {"sliding_window": W}
    return {}


def _decoder_read(hf: dict, dtype: str, rec: Family) -> dict:
    """GPTConfig fields of a Llama-like decoder's config.json."""
    family = rec.name
    acts = dict(rec.acts)
    act = fd.string(hf, rec.act_key, family, default=rec.act_written)
    if act not in acts:
        raise _refuse(family, rec.act_key, act,
                      "the MLP is SwiGLU (silu), Gemma 2's GeGLU (gelu_pytorch_tanh)")
    L = fd.integer(hf, "num_hidden_layers", family)
    C = fd.integer(hf, "hidden_size", family)
    H = fd.integer(hf, "num_attention_heads", family)
    def switch(key: str) -> bool:  # a bias switch the record has (else no bias)
        return key in rec.bias_keys and fd.flag(hf, key, family, default=False)

    attn_bias = switch("attention_bias")
    kw: dict[str, Any] = dict(
        vocab_size=fd.integer(hf, "vocab_size", family),
        seq_len=fd.integer(hf, "max_position_embeddings", family), n_layers=L,
        d_model=C, n_heads=H, n_kv_heads=fd.integer(hf, "num_key_value_heads", family, default=H),
        d_head=fd.integer(hf, "head_dim", family, default=C // H),
        d_ff=fd.integer(hf, "intermediate_size", family), activation=acts[act],
        placement="pre", norm="rmsnorm",
        norm_eps=fd.real(hf, "rms_norm_eps", family, default=1e-6), positions="rope",
        tie_embeddings=fd.flag(hf, "tie_word_embeddings", family, default=rec.tied_default),
        bias=False, qkv_bias=attn_bias, out_bias=attn_bias,
        mlp_bias=switch("mlp_bias"),
        init_std=fd.real(hf, "initializer_range", family, default=0.02, lo=0.0, open_lo=True),
        attn_dropout=fd.probability(hf, "attention_dropout", family, default=0.0),
        **_rope_fields(hf, family), **_windows(hf, rec, L),
    )
    kw.update(rec.fixed)
    if rec.extra_read is not None:
        kw.update(rec.extra_read(hf, family, C))
    return kw


def _gemma2_read(hf: dict, family: str, C: int) -> dict:
    qpas = fd.real(hf, "query_pre_attn_scalar", family, default=256, lo=0.0, open_lo=True)
    return dict(embed_scale=math.sqrt(C), attn_scale=qpas ** -0.5,
                attn_softcap=fd.real(hf, "attn_logit_softcapping", family, default=None,
                                     lo=0.0, open_lo=True),
                final_softcap=fd.real(hf, "final_logit_softcapping", family, default=None,
                                      lo=0.0, open_lo=True))


_GPT2_ACTS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
              "relu": "relu"}


def _gpt2_read(hf: dict, dtype: str, rec: Family) -> dict:
    family = rec.name
    act = fd.string(hf, "activation_function", family, default="gelu_new")
    if act not in _GPT2_ACTS:
        raise _refuse(family, "activation_function", act, f"one of {sorted(_GPT2_ACTS)}")
    return dict(
        vocab_size=fd.integer(hf, "vocab_size", family),
        seq_len=fd.integer(hf, "n_positions", family),
        n_layers=fd.integer(hf, "n_layer", family), d_model=fd.integer(hf, "n_embd", family),
        n_heads=fd.integer(hf, "n_head", family),
        d_ff=fd.integer(hf, "n_inner", family, default=None), activation=_GPT2_ACTS[act],
        placement="pre", norm="layernorm",
        norm_eps=fd.real(hf, "layer_norm_epsilon", family, default=1e-5), positions="learned",
        tie_embeddings=fd.flag(hf, "tie_word_embeddings", family, default=True), bias=True,
        init_std=fd.real(hf, "initializer_range", family, default=0.02, lo=0.0, open_lo=True),
        attn_dropout=fd.probability(hf, "attn_pdrop", family, default=0.1),
        dropout=fd.probability(hf, "resid_pdrop", family, default=0.1),
    )


# ---- GPTConfig -> family ---------------------------------------------------------------------
def family_of(config: GPTConfig) -> str:
    """The transformers family that writes ``config`` (the first record that claims it), or a
    ValueError naming what none of them expresses."""
    for rec in RECORDS.values():
        if rec.claims(config):
            rec.check(config, rec)
            return rec.name
    raise ValueError("no transformers family expresses this config")  # pragma: no cover


def _gpt2_check(c: GPTConfig, rec: Family) -> None:
    if not ((c.placement, c.norm) == ("pre", "layernorm") and all(c.biases()) and c.bias
            and c.activation in _GPT2_ACTS.values()):
        raise ValueError("no transformers family has learned positions with this config "
                         "(gpt2 is pre-LN LayerNorm with every bias and a GELU or ReLU MLP)")
    _only_defaults(c, rec.name, ("vocab_size", "seq_len", "n_layers", "d_model", "n_heads",
                                 "activation", "d_ff", "tie_embeddings", "norm_eps", "bias",
                                 "placement", "norm", "positions"))


def _decoder_check(c: GPTConfig, rec: Family) -> None:
    """A ValueError naming the first field of ``c`` a ``rec`` checkpoint cannot hold."""
    family = rec.name
    fixed = {"placement": dict(rec.fixed).get("placement", "pre"), "norm": "rmsnorm",
             "activation": dict(rec.acts)[rec.act_written]}
    for field, want in fixed.items():
        if getattr(c, field) != want:
            raise ValueError(f"{family}: {field} = {getattr(c, field)!r} is not expressible "
                             f"(the family has {want!r})")
    qkv_bias, out_bias, _ = c.biases()
    if rec.extra_check is not None:
        rec.extra_check(c, family)
    if rec.one_bias_switch and qkv_bias != out_bias:
        raise ValueError(f"{family}: qkv_bias = {qkv_bias} with out_bias = {out_bias} is not "
                         f"expressible (one attention_bias switch)")
    if c.rope_scaling != "none" and not rec.rope_scaling:
        raise ValueError(f"{family}: rope_scaling = {c.rope_scaling!r} is written for llama only")
    _only_defaults(c, family, _DECODER_FREE + rec.free)


def _gemma2_check(c: GPTConfig, family: str) -> None:
    if c.embed_scale != math.sqrt(c.d_model):
        raise ValueError(f"{family}: embed_scale = {c.embed_scale} is not expressible "
                         f"(the family has sqrt(d_model) = {math.sqrt(c.d_model)})")


def _only_defaults(c: GPTConfig, family: str, free: tuple[str, ...]) -> None:
    default = GPTConfig()
    fixed = [f for f in c.to_dict() if f not in free and f not in ("dtype",)
             and getattr(c, f) != getattr(default, f) and not _trivial(c, f)]
    if fixed:
        raise ValueError(f"{family}: {', '.join(f'{f} = {getattr(c, f)!r}' for f in fixed)} not "
                         f"expressible in a {family} checkpoint")


def _trivial(c: GPTConfig, field: str) -> bool:
    """Fields whose value changes nothing in the checkpoint: training-only settings (dropout,
    the loss's extras, the init), the RoPE scaling knobs without a scaling, explicit bias switches
    equal to ``bias`` and head counts or widths equal to their defaults."""
    if field in ("dropout", "attn_dropout", "z_loss", "label_smoothing", "init_std", "init",
                 "dyt_alpha", "derf_alpha", "derf_shift"):
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


# ---- GPTConfig -> config.json ------------------------------------------------------------------
def hf_config(config: GPTConfig, family: str | None = None) -> dict:
    """The ``config.json`` dict that transformers reads as ``config``'s family."""
    c = config
    rec = record(family_of(c) if family is None else family)
    head = {"architectures": [rec.architecture], "model_type": rec.name,
            "vocab_size": c.vocab_size, "tie_word_embeddings": c.tie_embeddings,
            "initializer_range": c.init_std, "dtype": c.dtype}
    return {**head, **rec.write(c, rec)}


def _gpt2_write(c: GPTConfig, rec: Family) -> dict:
    act = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}[c.activation]
    return {"n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
            "n_positions": c.seq_len, "n_inner": c.d_ff, "activation_function": act,
            "layer_norm_epsilon": c.norm_eps, "attn_pdrop": c.attn_dropout,
            "embd_pdrop": 0.0, "resid_pdrop": c.dropout, "scale_attn_weights": True}


def _rope_written(c: GPTConfig) -> dict:
    rope: dict[str, Any] = {"rope_theta": c.rope_base, "rope_type": "default"}
    if c.rope_scaling == "linear":
        rope.update(rope_type="linear", factor=c.rope_factor)
    elif c.rope_scaling == "llama3":
        rope.update(rope_type="llama3", factor=c.rope_factor,
                    low_freq_factor=c.rope_low_freq_factor,
                    high_freq_factor=c.rope_high_freq_factor,
                    original_max_position_embeddings=c.rope_original_max)
    return rope


def _decoder_write(c: GPTConfig, rec: Family) -> dict:
    qkv_bias, out_bias, mlp_bias = c.biases()
    out = {"hidden_size": c.d_model, "intermediate_size": c.hidden,
           "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.kv_heads, "head_dim": c.head_dim,
           "max_position_embeddings": c.seq_len, "rms_norm_eps": c.norm_eps,
           "rope_parameters": _rope_written(c), "attention_dropout": c.attn_dropout,
           rec.act_key: rec.act_written}
    if rec.extra_write is not None:
        out.update(rec.extra_write(c))
    if "attention_bias" in rec.bias_keys and qkv_bias != out_bias:
        raise ValueError(f"{rec.name}: qkv_bias and out_bias must agree (one attention_bias "
                         f"switch)")
    out.update({k: {"attention_bias": qkv_bias, "mlp_bias": mlp_bias}[k] for k in rec.bias_keys})
    if c.sliding_window is not None or rec.windows in ("qwen", "layer_types"):
        out["sliding_window"] = c.sliding_window
        if rec.windows != "all":
            out["layer_types"] = ["sliding_attention" if c.window(i) is not None
                                  else "full_attention" for i in range(c.n_layers)]
        if rec.windows == "qwen":
            out.update(use_sliding_window=c.sliding_window is not None, max_window_layers=0)
    return out


def _gemma2_write(c: GPTConfig) -> dict:
    return {"query_pre_attn_scalar": _qpas(c), "attn_logit_softcapping": c.attn_softcap,
            "final_logit_softcapping": c.final_softcap}


def _qpas(c: GPTConfig) -> float | int:
    """Gemma 2's query_pre_attn_scalar: 1 / scale^2 (an integer when it is one)."""
    if c.attn_scale is None:
        return c.head_dim
    q = 1.0 / c.attn_scale ** 2
    return round(q) if abs(q - round(q)) <= 1e-9 * q else q


# ---- the weight layout -------------------------------------------------------------------------
def layout(c: GPTConfig, family: str) -> list[Entry]:
    """Every normlab parameter of ``c`` and the checkpoint tensors it is made of."""
    rec = record(family)
    out = rec.tensors(c, rec)
    if not c.tie_embeddings:
        out.append(Entry("head.weight", ("lm_head.weight",), (), False))
    return out


def _gpt2_tensors(c: GPTConfig, rec: Family) -> list[Entry]:
    E = Entry
    out = [E("wte.weight", ("wte.weight",), (), False), E("wpe.weight", ("wpe.weight",), (), False)]
    for i in range(c.n_layers):
        b, h = f"blocks.{i}.", f"{rec.layers}.{i}."
        for ours, theirs in (("attn.norm", "ln_1"), ("mlp.norm", "ln_2")):
            out += [E(f"{b}{ours}.{LN_GAIN}", (f"{h}{theirs}.weight",), (), False),
                    E(f"{b}{ours}.{LN_BIAS}", (f"{h}{theirs}.bias",), (), False)]
        for ours, theirs in (("attn.branch.qkv", "attn.c_attn"),
                             ("attn.branch.proj", "attn.c_proj"),
                             ("mlp.branch.fc", "mlp.c_fc"), ("mlp.branch.proj", "mlp.c_proj")):
            out += [E(f"{b}{ours}.weight", (f"{h}{theirs}.weight",), (), True),
                    E(f"{b}{ours}.bias", (f"{h}{theirs}.bias",), (), False)]
    return out + [E(f"norm_f.{LN_GAIN}", ("ln_f.weight",), (), False),
                  E(f"norm_f.{LN_BIAS}", ("ln_f.bias",), (), False)]


def _decoder_tensors(c: GPTConfig, rec: Family) -> list[Entry]:
    E = Entry
    H, K, D, F = c.n_heads, c.kv_heads, c.head_dim, c.hidden
    qkv_bias, out_bias, mlp_bias = c.biases()
    qkv_rows, ff_rows = (H * D, K * D, K * D), (F, F)
    out = [E("wte.weight", (rec.embedding,), (), False)]
    for i in range(c.n_layers):
        b, h = f"blocks.{i}.", f"{rec.layers}.{i}."
        a, m = f"{h}self_attn.", f"{h}mlp."
        out += [E(f"{b}{ours}.{RMS_GAIN}", (f"{h}{theirs}.weight",), (), False)
                for ours, theirs in rec.norms]
        out.append(E(f"{b}attn.branch.qkv.weight", tuple(f"{a}{x}_proj.weight" for x in "qkv"),
                     qkv_rows, False))
        if qkv_bias:
            out.append(E(f"{b}attn.branch.qkv.bias", tuple(f"{a}{x}_proj.bias" for x in "qkv"),
                         qkv_rows, False))
        out.append(E(f"{b}attn.branch.proj.weight", (f"{a}o_proj.weight",), (), False))
        if out_bias:
            out.append(E(f"{b}attn.branch.proj.bias", (f"{a}o_proj.bias",), (), False))
        if c.qk_norm != "none":
            out += [E(f"{b}attn.branch.q_norm", (f"{a}q_norm.weight",), (), False),
                    E(f"{b}attn.branch.k_norm", (f"{a}k_norm.weight",), (), False)]
        out.append(E(f"{b}mlp.branch.fc.weight", (f"{m}gate_proj.weight", f"{m}up_proj.weight"),
                     ff_rows, False))
        if mlp_bias:
            out.append(E(f"{b}mlp.branch.fc.bias", (f"{m}gate_proj.bias", f"{m}up_proj.bias"),
                         ff_rows, False))
        out.append(E(f"{b}mlp.branch.proj.weight", (f"{m}down_proj.weight",), (), False))
        if mlp_bias:
            out.append(E(f"{b}mlp.branch.proj.bias", (f"{m}down_proj.bias",), (), False))
    return out + [E(f"norm_f.{RMS_GAIN}", ("norm.weight",), (), False)]


def hf_name(family: str, part: str) -> str:
    """A layout part's name as stored (the record's prefix; lm_head has none)."""
    return part if part.startswith("lm_head") else record(family).prefix + part


def embedding_name(family: str) -> str:
    """The stored name of the token embedding table."""
    return hf_name(family, record(family).embedding)


def ignorable(family: str, name: str, config: GPTConfig) -> bool:
    """Checkpoint tensors that are not parameters: the record's buffers (GPT-2's causal-mask
    buffers, stored RoPE frequencies) and the head of a tied model (a copy of the embeddings)."""
    return (name.endswith(record(family).buffers)
            or (name == "lm_head.weight" and config.tie_embeddings))


def short_names(names: Iterable[str], family: str) -> dict[str, str]:
    """Checkpoint name without its model prefix -> the name as stored."""
    pre = record(family).prefix
    return {n.removeprefix(pre): n for n in names}


def to_hf_tensors(params: dict[str, np.ndarray], config: GPTConfig,
                  family: str | None = None) -> dict[str, np.ndarray]:
    """normlab's parameters (or gradients: the layout change is linear) as the checkpoint's
    tensors, by transformers names."""
    family = family_of(config) if family is None else family
    out = {}
    for e in layout(config, family):
        a = params[e.ours]
        if e.transpose:
            a = a.T
        if e.rows:
            starts = np.cumsum((0,) + e.rows)
            for part, r0, r1 in zip(e.parts, starts[:-1], starts[1:]):
                out[hf_name(family, part)] = a[r0:r1]
        else:
            out[hf_name(family, e.parts[0])] = a
    return out


def from_hf_tensors(tensors: dict[str, np.ndarray], config: GPTConfig,
                    family: str | None = None) -> dict[str, np.ndarray]:
    """The inverse of ``to_hf_tensors``: checkpoint tensors (by transformers names, with or
    without the "model." / "transformer." prefix) as normlab's parameters."""
    family = family_of(config) if family is None else family
    lookup = short_names(tensors, family)
    out = {}
    for e in layout(config, family):
        parts = [np.asarray(tensors[lookup[p]]) for p in e.parts]
        a = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        out[e.ours] = a.T if e.transpose else a
    return out


# ---- can the model be written as a family? -----------------------------------------------------
# training-only fields, and those whose effect the comparison reads through methods
_UNWRITTEN = ("dropout", "attn_dropout", "z_loss", "label_smoothing", "init_std", "init",
              "dyt_alpha", "derf_alpha", "derf_shift", "dtype", "n_kv_heads", "d_head", "d_ff",
              "qkv_bias", "out_bias", "mlp_bias", "window_layers", "attn_scale")


def writable_family(config: GPTConfig, family: str | None) -> str:
    """``family`` (default: ``family_of(config)``) after checking that a checkpoint of that
    family reads back as ``config``: a ValueError naming the family and the first field that
    would change, before anything is written. nGPT (placement 'ngpt') is refused by name: no
    transformers family has its normalized residual updates and learned scalings."""
    if config.placement == "ngpt":
        raise ValueError("save_hf: no transformers family holds nGPT (placement 'ngpt': the "
                         "normalized Transformer's updates, s_qk, s_uv and s_z)")
    if family is None:
        return family_of(config)
    record(family)
    try:
        back = config_from_hf(hf_config(config, family), config.dtype)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"save_hf: the model cannot be written as {family} ({exc!r})") from None
    c = config
    pairs = [(f, getattr(c, f), getattr(back, f)) for f in c.to_dict() if f not in _UNWRITTEN]
    pairs += [("biases", c.biases(), back.biases()), ("kv_heads", c.kv_heads, back.kv_heads),
              ("head_dim", c.head_dim, back.head_dim), ("hidden", c.hidden, back.hidden),
              ("windows", [c.window(i) for i in range(c.n_layers)],
               [back.window(i) for i in range(c.n_layers)]),
              ("attention scale", c.attn_scale or c.head_dim ** -0.5,
               back.attn_scale or back.head_dim ** -0.5)]
    for field, ours, theirs in pairs:
        if ours != theirs and not (isinstance(ours, float) and isinstance(theirs, float)
                                   and math.isclose(ours, theirs, rel_tol=1e-12)):
            raise ValueError(f"save_hf: the model cannot be written as {family}: its {field} "
                             f"is {ours!r}; a {family} checkpoint would read back {theirs!r}")
    return family


# ---- the records ------------------------------------------------------------------------------
def _is_gemma2(c: GPTConfig) -> bool:
    return c.placement == "sandwich" and c.norm == "rmsnorm" and c.norm_offset == 1.0


def _is_olmo2(c: GPTConfig) -> bool:
    return c.placement == "branch" and c.qk_norm == "rmsnorm" and c.qk_norm_scope == "all"


_SUMMARY = Assumed(_ANYTHING, "GPT2DoubleHeadsModel's classification head, no part of "
                             "GPT2LMHeadModel")
_GPT2 = Family(
    name="gpt2", architecture="GPT2LMHeadModel", read=_gpt2_read, write=_gpt2_write,
    tensors=_gpt2_tensors, claims=lambda c: c.positions == "learned", check=_gpt2_check,
    prefix="transformer.",
    layers="h", layers_key="n_layer", embedding="wte.weight",
    buffers=(".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq"),
    mapped={"vocab_size": "vocab_size", "n_embd": "d_model", "n_layer": "n_layers",
            "n_head": "n_heads", "n_positions": "seq_len", "n_inner": "d_ff",
            "activation_function": "activation", "layer_norm_epsilon": "norm_eps",
            "tie_word_embeddings": "tie_embeddings", "initializer_range": "init_std",
            "attn_pdrop": "attn_dropout", "resid_pdrop": "dropout"},
    ignored={
        **_COMMON_IGNORED,
        "pad_token_id": Assumed(_ANYTHING, "read by GPT2ForSequenceClassification alone"),
        "embd_pdrop": Assumed(_ANYTHING, "dropout of the embeddings in training: normlab has "
                                         "none (load_hf's model is in eval mode, where "
                                         "dropout is the identity)"),
        "scale_attn_weights": Assumed((True,), "normlab scales q.k by 1 / sqrt(D)"),
        "scale_attn_by_inverse_layer_idx": Assumed((False,), "normlab's attention logits carry "
                                                             "no 1 / (layer + 1)"),
        "add_cross_attention": Assumed((False,), "a decoder without cross-attention"),
        "reorder_and_upcast_attn": Assumed(_ANYTHING, "how transformers orders and upcasts "
                                                      "float16 attention; normlab computes "
                                                      "attention in float32 or float64"),
        "n_ctx": Assumed(_ANYTHING, "transformers 4's copy of n_positions, read by no code of "
                                    "transformers 5"),
        **{k: _SUMMARY for k in ("summary_type", "summary_use_proj", "summary_activation",
                                 "summary_proj_to_labels", "summary_first_dropout")},
    },
)
_LLAMA = Family(
    name="llama", architecture="LlamaForCausalLM", read=_decoder_read, write=_decoder_write,
    tensors=_decoder_tensors, claims=lambda c: True, check=_decoder_check,
    mapped={**_DECODER_MAPPED, "attention_bias": "qkv_bias, out_bias", "mlp_bias": "mlp_bias"},
    ignored={**_DECODER_IGNORED, "sliding_window": _NO_WINDOW},
    bias_keys=("attention_bias", "mlp_bias"),
    rope_scaling=True, free=("rope_scaling", "rope_factor", "rope_low_freq_factor",
                             "rope_high_freq_factor", "rope_original_max", "qkv_bias",
                             "out_bias", "mlp_bias"),
)
_MISTRAL = dataclasses.replace(
    _LLAMA, name="mistral", architecture="MistralForCausalLM",
    mapped={**_DECODER_MAPPED, "sliding_window": "sliding_window"}, ignored=_DECODER_IGNORED,
    claims=lambda c: c.sliding_window is not None and c.window_layers is None,
    bias_keys=(), rope_scaling=False, windows="all", free=("sliding_window",),
)
_QWEN2 = dataclasses.replace(
    _MISTRAL, name="qwen2", architecture="Qwen2ForCausalLM", windows="qwen",
    mapped={**_MISTRAL.mapped, "use_sliding_window": "sliding_window",
            "max_window_layers": "window_layers", "layer_types": "window_layers"},
    claims=lambda c: c.biases()[:2] == (True, False), fixed=(("qkv_bias", True),
                                                            ("out_bias", False)),
    free=("qkv_bias", "out_bias", "sliding_window", "window_layers"),
)
_QWEN3 = dataclasses.replace(
    _QWEN2, name="qwen3", architecture="Qwen3ForCausalLM",
    mapped={**_QWEN2.mapped, "attention_bias": "qkv_bias, out_bias"},
    bias_keys=("attention_bias",), one_bias_switch=True,
    claims=lambda c: c.qk_norm == "rmsnorm" and c.qk_norm_scope == "head",
    fixed=(("qk_norm", "rmsnorm"), ("qk_norm_scope", "head")),
    free=("qk_norm", "qkv_bias", "out_bias", "sliding_window", "window_layers"),
)
_GEMMA2 = dataclasses.replace(
    _LLAMA, name="gemma2", architecture="Gemma2ForCausalLM", claims=_is_gemma2,
    mapped={**{k: v for k, v in _DECODER_MAPPED.items() if k != "hidden_act"},
            "hidden_activation": "activation", "attention_bias": "qkv_bias, out_bias",
            "query_pre_attn_scalar": "attn_scale", "sliding_window": "sliding_window",
            "layer_types": "window_layers", "attn_logit_softcapping": "attn_softcap",
            "final_logit_softcapping": "final_softcap"},
    ignored={**_DECODER_IGNORED,
             "hidden_act": Assumed(_ANYTHING, "transformers' Gemma 2 reads hidden_activation, "
                                              "never hidden_act"),
             "use_bidirectional_attention": Assumed((False, None), "attention is causal")},
    act_key="hidden_activation", acts=(("gelu_pytorch_tanh", "geglu"), ("gelu_new", "geglu")),
    act_written="gelu_pytorch_tanh", tied_default=True, windows="layer_types",
    bias_keys=("attention_bias",), rope_scaling=False,
    fixed=(("placement", "sandwich"), ("norm_offset", 1.0)),
    norms=(("attn.norm", "input_layernorm"), ("attn.norm_out", "post_attention_layernorm"),
           ("mlp.norm", "pre_feedforward_layernorm"),
           ("mlp.norm_out", "post_feedforward_layernorm")),
    free=("norm_offset", "embed_scale", "attn_scale", "attn_softcap", "final_softcap",
          "sliding_window", "window_layers", "tie_embeddings"),
    extra_read=_gemma2_read, extra_write=_gemma2_write, extra_check=_gemma2_check,
)
_OLMO2 = dataclasses.replace(
    _LLAMA, name="olmo2", architecture="Olmo2ForCausalLM", claims=_is_olmo2,
    mapped={**_DECODER_MAPPED, "attention_bias": "qkv_bias, out_bias"},
    bias_keys=("attention_bias",),
    one_bias_switch=True, rope_scaling=False,
    fixed=(("placement", "branch"), ("qk_norm", "rmsnorm"), ("qk_norm_scope", "all")),
    norms=(("attn.norm", "post_attention_layernorm"), ("mlp.norm", "post_feedforward_layernorm")),
    free=("qk_norm", "qk_norm_scope", "qkv_bias", "out_bias"),
)

# family_of tries the records in this order (the most specific first; llama claims the rest)
RECORDS: dict[str, Family] = {r.name: r for r in (_GPT2, _GEMMA2, _OLMO2, _QWEN3, _QWEN2,
                                                    _MISTRAL, _LLAMA)}
FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "olmo2")
ARCHITECTURES = {name: RECORDS[name].architecture for name in FAMILIES}
