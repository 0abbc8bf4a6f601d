"""Checkpoints of transformers: for each of the seven families a tiny random-weight model built
from its config class and written by ``save_pretrained`` (no network), loaded by ``load_hf``:
logits, loss and every parameter gradient against transformers + autograd; ``save_hf`` read back
by ``from_pretrained``; float16 / bfloat16 files, shards, and the refusals."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from normlab.functional import IGNORE_INDEX, rope_frequencies  # noqa: E402
from normlab.models import GPT, GPTConfig, load_hf, save_hf  # noqa: E402
from normlab.models.hf import config_from_hf, family_of, from_hf_tensors, hf_config  # noqa: E402
from normlab.testing import errors, format_eps  # noqa: E402

transformers.logging.set_verbosity_error()

B, T = 2, 8
# hidden 16 with 4 query heads and 2 key/value heads; head_dim 8 != 16 / 4 where the family
# allows it; windows of 3 < T so that they cut
TINY = dict(vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _family(name: str):
    """(config, model class) of a tiny model of family ``name``."""
    t = transformers
    if name == "gpt2":
        return t.GPT2Config(n_embd=16, n_layer=2, n_head=4, n_positions=32, vocab_size=40,
                            bos_token_id=1, eos_token_id=2), t.GPT2LMHeadModel
    if name == "llama":
        return t.LlamaConfig(
            **TINY, head_dim=8, attention_bias=True, mlp_bias=True
        ), t.LlamaForCausalLM
    if name == "llama3-rope":
        rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
        return t.LlamaConfig(**TINY, rope_parameters=rope), t.LlamaForCausalLM
    if name == "mistral":
        return t.MistralConfig(**TINY, head_dim=8, sliding_window=3), t.MistralForCausalLM
    if name == "qwen2":
        return t.Qwen2Config(**TINY, tie_word_embeddings=True), t.Qwen2ForCausalLM
    if name == "qwen3":
        return (t.Qwen3Config(**TINY, head_dim=8, use_sliding_window=True, sliding_window=3,
                              max_window_layers=1), t.Qwen3ForCausalLM)
    if name == "gemma2":
        return (t.Gemma2Config(**TINY, head_dim=8, query_pre_attn_scalar=6, sliding_window=3,
                               attn_logit_softcapping=2.0, final_logit_softcapping=3.0),
                t.Gemma2ForCausalLM)
    if name == "olmo2":
        return t.Olmo2Config(**TINY), t.Olmo2ForCausalLM
    raise KeyError(name)


FAMILIES = ["gpt2", "llama", "llama3-rope", "mistral", "qwen2", "qwen3", "gemma2", "olmo2"]


def _randomize(model, gemma: bool, seed: int = 0) -> None:
    """Random values everywhere (ones and zeros hide wrong layouts): gains near 1 (near 0 for
    Gemma's 1 + w), biases O(0.3), matrices with unit-variance outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("norm" in name or ".ln_" in name) and not name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (0.0 if gemma else 1.0))
            elif p.ndim == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def _save(name: str, root, dtype=None, **save_kw):
    cfg, cls = _family(name)
    torch.manual_seed(0)
    model = cls(cfg)
    _randomize(model, gemma=name == "gemma2")
    if dtype is not None:
        model = model.to(dtype)
    path = root / name
    model.save_pretrained(path, **save_kw)
    return path


def _hf(path, dtype=torch.float32):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager",
                                                              dtype=dtype)
    return model.eval()


def _batch(seed: int = 1):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, 40, size=(B, T))
    targets = np.concatenate([idx[:, 1:], np.full((B, 1), IGNORE_INDEX)], axis=1)
    return idx, targets


def _theirs(hf_model, idx, targets):
    """transformers' logits, the cross-entropy of them in their dtype (transformers' own loss
    casts the logits to float32), and every parameter gradient by autograd; transformers' own
    loss (labels = idx, shifted inside) is checked to be that cross-entropy."""
    ids = torch.from_numpy(idx)
    hf_model.zero_grad()
    out = hf_model(input_ids=ids, labels=ids)
    loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1),
                                             torch.from_numpy(targets).flatten())
    assert float(out.loss.detach()) == pytest.approx(
        float(loss.detach()), rel=16 * format_eps(np.float32)
    )
    loss.backward()
    grads = {n: p.grad.detach().numpy() for n, p in hf_model.named_parameters()}
    return out.logits.detach().numpy(), float(loss.detach()), grads


def _ours(model: GPT, idx, targets):
    model.zero_grad()
    loss = model.forward(idx, targets).loss
    model.backward()
    return model.logits(idx), loss, model.gradients()


def _assert_parity(model: GPT, hf_model, bound: float) -> None:
    idx, targets = _batch()
    logits, loss, grads = _ours(model, idx, targets)
    t_logits, t_loss, t_grads = _theirs(hf_model, idx, targets)
    t_grads = from_hf_tensors(t_grads, model.config, family_of(model.config))
    assert abs(loss - t_loss) <= bound * abs(t_loss), (loss, t_loss)
    rel = errors(logits, t_logits)[1]
    assert rel <= bound, f"logits: relative error {rel:.3g} > {bound:.3g}"
    assert grads.keys() == t_grads.keys()
    for k in grads:
        rel = errors(grads[k], t_grads[k])[1]
        assert rel <= bound, f"{k}: relative error {rel:.3g} > {bound:.3g}"
        assert np.any(t_grads[k] != 0), f"{k}: a zero gradient proves nothing"


@pytest.mark.parametrize("name", FAMILIES)
def test_float32_parity_with_transformers(name, tmp_path):
    path = _save(name, tmp_path)
    model = load_hf(path)
    # float32 rounding of a two-layer model: a few hundred epsilons at most on the gradients
    _assert_parity(model, _hf(path), 256 * format_eps(np.float32))


def test_float64_parity_with_transformers_gpt2(tmp_path):
    # GPT-2 is the family whose transformers code computes in float64 throughout (the RMSNorm
    # families cast to float32 inside their norms and RoPE), so the agreement is float64's
    path = _save("gpt2", tmp_path)
    _assert_parity(load_hf(path, dtype="float64"), _hf(path, torch.float64), 1e-12)


@pytest.mark.parametrize("name", FAMILIES)
def test_save_hf_round_trips_through_from_pretrained(name, tmp_path):
    path = _save(name, tmp_path)
    model = load_hf(path)
    out = save_hf(model, tmp_path / "ours")
    reloaded, original = _hf(out), _hf(path)
    ids = torch.from_numpy(_batch()[0])
    with torch.no_grad():
        assert torch.equal(
            reloaded(ids).logits, original(ids).logits
        )  # the same weights, bit for bit
    assert config_from_hf(json.loads((out / "config.json").read_text())) == model.config
    np.testing.assert_allclose(model.logits(_batch()[0]), original(ids).logits.detach().numpy(),
                               rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_files_load_exactly(dtype, tmp_path):
    path = _save("qwen3", tmp_path, dtype=dtype)
    model = load_hf(path)
    hf_model = _hf(path, dtype)
    stored = {n: p.detach().float().numpy() for n, p in hf_model.named_parameters()}
    expected = from_hf_tensors(stored, model.config, "qwen3")
    for k, v in model.parameters().items():
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v, expected[k], err_msg=k)


def test_save_hf_writes_bfloat16_and_shards_that_transformers_reads(tmp_path):
    model = load_hf(_save("llama", tmp_path))
    out = save_hf(model, tmp_path / "sharded", dtype="bfloat16", max_shard_bytes=2000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    reread = load_hf(out)
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(reread.parameters()[k],
                                      v.astype(ml_dtypes.bfloat16).astype(np.float32), err_msg=k)
    hf_model = _hf(out)
    _assert_parity(reread, hf_model, 256 * format_eps(np.float32))


def test_sharded_checkpoints_of_transformers_load(tmp_path):
    whole = load_hf(_save("gemma2", tmp_path))
    path = _save("gemma2", tmp_path / "sharded", max_shard_size="4KB")
    assert (path / "model.safetensors.index.json").is_file()
    sharded = load_hf(path)
    for k, v in whole.parameters().items():
        np.testing.assert_array_equal(sharded.parameters()[k], v, err_msg=k)


def test_configs_map_each_family_feature(tmp_path):
    g = load_hf(_save("gemma2", tmp_path)).config
    assert (g.placement, g.norm_offset, g.activation, g.tie_embeddings) == (
        "sandwich",
        1.0,
        "geglu",
        True,
    )
    assert g.attn_scale == pytest.approx(6 ** -0.5) and g.embed_scale == pytest.approx(4.0)
    assert (g.sliding_window, g.window_layers, g.attn_softcap, g.final_softcap) == (
        3,
        (0,),
        2.0,
        3.0,
    )
    assert (g.n_kv_heads, g.head_dim) == (2, 8)
    o = load_hf(_save("olmo2", tmp_path)).config
    assert (o.placement, o.qk_norm, o.qk_norm_scope) == ("branch", "rmsnorm", "all")
    q2 = load_hf(_save("qwen2", tmp_path)).config
    assert q2.biases() == (True, False, False)
    q3 = load_hf(_save("qwen3", tmp_path)).config
    assert (q3.qk_norm, q3.sliding_window, q3.window_layers) == ("rmsnorm", 3, (1,))
    m = load_hf(_save("mistral", tmp_path)).config
    assert (m.sliding_window, m.window_layers) == (3, None)
    r = load_hf(_save("llama3-rope", tmp_path)).config
    assert (r.rope_scaling, r.rope_factor, r.rope_original_max) == ("llama3", 8.0, 64)


@pytest.mark.parametrize("kind,extra", [
    ("default", {}),
    ("linear", {"factor": 4.0}),
    ("llama3", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64}),
])
def test_rope_frequencies_match_transformers(kind, extra):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = transformers.LlamaConfig(
        **{**TINY, "head_dim": 32},
        rope_parameters={"rope_type": kind, "rope_theta": 500.0, **extra},
    )
    if kind == "default":
        theirs = 1.0 / 500.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    else:
        theirs = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu")[0]
    ours = rope_frequencies(32, 500.0, "none" if kind == "default" else kind,
                            factor=extra.get("factor", 1.0), original_max=extra.get(
                                "original_max_position_embeddings", 8192))
    np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=4 * format_eps(np.float32))
    if kind == "llama3":  # the three regions all occur: kept, smoothed and divided
        ratio = theirs.double().numpy() * 500.0 ** (np.arange(0, 32, 2) / 32)
        assert np.any(ratio == 1.0) and np.any(np.isclose(ratio, 1 / 8)) \
            and np.any((ratio > 1 / 8 + 1e-6) & (ratio < 1 - 1e-6))


def _write_config(path, hf: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(hf))


@pytest.mark.parametrize("edit,message", [
    ({"model_type": "gemma3"}, "gemma3: model_type not supported"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}},
     "llama: rope_type = 'yarn' is not supported"),
    ({"sliding_window_pattern": 6}, "llama: sliding_window_pattern not supported"),
    ({"hidden_act": "gelu"}, "llama: hidden_act = 'gelu' is not supported"),
    ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config not supported"),
])
def test_configs_normlab_cannot_express_are_refused_by_name(edit, message, tmp_path):
    path = _save("llama", tmp_path)
    hf = json.loads((path / "config.json").read_text())
    _write_config(path, {**hf, **edit})
    with pytest.raises(ValueError, match=message):
        load_hf(path)


def test_unknown_tensors_and_non_checkpoints_are_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    path = _save("olmo2", tmp_path)
    tensors = load_file(path / "model.safetensors")
    save_file({**tensors, "model.layers.0.self_attn.extra_gate": np.ones(3, np.float32)},
              path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError, match=r"olmo2: tensors \['model.layers.0.self_attn.extra_gate'\]"
    ):
        load_hf(path)
    del tensors["model.norm.weight"]
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"lacks tensors \['model.norm.weight'\]"):
        load_hf(path)
    with pytest.raises(ValueError, match="is not a checkpoint directory"):
        load_hf(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"has no config.json"):
        load_hf(tmp_path / "empty")
    with pytest.raises(TypeError, match="path must be a str"):
        load_hf(3)
    with pytest.raises(ValueError, match="dtype must be"):
        load_hf(path, dtype="float16")


@pytest.mark.parametrize("kw,message", [
    ({"norm": "dyt"}, "llama: norm = 'dyt' is not expressible"),
    ({"norm": "derf"}, "llama: norm = 'derf' is not expressible"),
    ({"placement": "deepnorm"}, "placement = 'deepnorm' is not expressible"),
    ({"placement": "lns"}, "placement = 'lns' is not expressible"),
    ({"placement": "mixln", "mixln_fraction": 0.5}, "placement = 'mixln' is not expressible"),
    ({"attn_gate": True}, "llama: attn_gate = True not expressible"),
    ({"attn_fn": "sigmoid"}, "llama: attn_fn = 'sigmoid' not expressible"),
    ({"attn_softcap": 5.0}, r"llama: attn_softcap = 5.0 not expressible"),
    ({"positions": "learned", "norm": "rmsnorm"}, "no transformers family has learned positions"),
])
def test_save_hf_refuses_configs_no_family_expresses(kw, message, tmp_path):
    base = dict(vocab_size=11, seq_len=8, n_layers=1, d_model=8, n_heads=2, norm="rmsnorm",
                positions="rope", activation="swiglu")
    model = GPT(GPTConfig(**{**base, **kw}), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        save_hf(model, tmp_path / "x")


def test_save_hf_writes_atomically_and_refuses_what_is_not_a_regular_file(tmp_path):
    import os
    import stat

    base = dict(vocab_size=11, seq_len=8, n_layers=1, d_model=8, n_heads=2, norm="rmsnorm",
                positions="rope", activation="swiglu", bias=False)
    model = GPT(GPTConfig(**base), rng=np.random.default_rng(0))
    out = save_hf(model, tmp_path / "ck")
    os.chmod(out / "config.json", 0o640)
    os.chmod(out / "model.safetensors", 0o604)
    save_hf(model, out)  # replaced files keep their modes; no temporary file is left
    assert stat.S_IMODE((out / "config.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o604
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"save_hf path: .* is a file; expected a folder"):
        save_hf(model, tmp_path / "file")
    fifo = tmp_path / "f"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")
    with pytest.raises(ValueError, match=r"save_hf: config.json: .* is a FIFO"):
        save_hf(model, fifo)  # refused before any file is written: never blocks on the FIFO
    assert sorted(p.name for p in fifo.iterdir()) == ["config.json"]


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_config_round_trips_every_family(name):
    cfg = config_from_hf(_family(name)[0].to_dict())
    assert config_from_hf(hf_config(cfg)) == cfg


def test_mapped_parameters_never_write_the_file_and_save_back_in_place(tmp_path):
    path = _save("gemma2", tmp_path)
    before = (path / "model.safetensors").read_bytes()
    model = load_hf(path)
    assert "wte.weight" in model.mapped_parameters  # float32, one tensor, not stacked
    copied = load_hf(path, mmap_weights=False)
    assert copied.mapped_parameters == ()
    wte = model.parameters()["wte.weight"]
    wte += 1.0  # training writes into private memory
    assert (path / "model.safetensors").read_bytes() == before
    np.testing.assert_array_equal(wte, copied.parameters()["wte.weight"] + 1.0)
    save_hf(model, path)  # over the file the model is mapped from
    again = load_hf(path)
    np.testing.assert_array_equal(again.parameters()["wte.weight"], wte)
    for k, v in copied.parameters().items():
        if k != "wte.weight":
            np.testing.assert_array_equal(again.parameters()[k], v, err_msg=k)


def test_gpt2_conv1d_weights_stay_mapped_as_transposed_views(tmp_path, ran_under_portable):
    """GPT-2's Conv1D stores (in, out): load_hf maps it as a transposed view, not a copy, and the
    model computes and trains through it exactly as through copied weights. Exactly under
    normlab.portable: OpenBLAS's AVX-512 kernels sum a transposed operand in another order (the
    logits then differ by about one float32 rounding)."""
    if ran_under_portable:
        return
    path = _save("gpt2", tmp_path)
    before = (path / "model.safetensors").read_bytes()
    model, copied = load_hf(path), load_hf(path, mmap_weights=False)
    qkv = next(k for k in model.mapped_parameters if k.endswith("attn.branch.qkv.weight"))
    w = model.parameters()[qkv]
    assert w.flags.f_contiguous and not w.flags.owndata  # a view of the file's (in, out) tensor
    np.testing.assert_array_equal(w, copied.parameters()[qkv])
    idx = np.random.default_rng(0).integers(0, model.config.vocab_size, (2, 8))
    for m in (model, copied):
        m.zero_grad()
        m.forward(idx, idx)
        m.backward(1.0)
    np.testing.assert_array_equal(model.logits(idx), copied.logits(idx))
    grads = model.gradients()
    for k, g in copied.gradients().items():
        np.testing.assert_allclose(grads[k], g, rtol=1e-6, atol=1e-7, err_msg=k)
    w -= 0.5 * grads[qkv]  # an update writes private memory, never the file
    assert (path / "model.safetensors").read_bytes() == before


def test_a_loaded_model_trains_its_mapped_and_transposed_weights_in_place(
        tmp_path, ran_under_portable):
    """load_hf leaves the weights mapped (no flat buffer): AdamW's per-array path updates a
    transposed view in place, exactly as it updates the copied model's weights (under
    normlab.portable, as the test above)."""
    if ran_under_portable:
        return
    from normlab.train import AdamW

    path = _save("gpt2", tmp_path)
    before = (path / "model.safetensors").read_bytes()
    models = load_hf(path), load_hf(path, mmap_weights=False)
    idx = np.random.default_rng(1).integers(0, models[0].config.vocab_size, (2, 8))
    for m in models:
        opt = AdamW(m.parameters(), weight_decay=0.1)
        for _ in range(2):
            m.zero_grad()
            m.forward(idx, idx)
            m.backward(1.0)
            opt.step(m.gradients(), 1e-3)
    mapped, copied = (m.parameters() for m in models)
    qkv = next(k for k in models[0].mapped_parameters if k.endswith("qkv.weight"))
    assert mapped[qkv].flags.f_contiguous
    for k, v in copied.items():
        np.testing.assert_allclose(mapped[k], v, rtol=1e-5, atol=1e-7, err_msg=k)
    assert not np.array_equal(mapped[qkv], load_hf(path).parameters()[qkv])  # it moved
    assert (path / "model.safetensors").read_bytes() == before
