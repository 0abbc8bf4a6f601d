"""The fuzz round of normlab.torch, as cases: every one a clear error (its type and a message
naming what is refused) or a correct result. The review's 27 bad cases come first, numbered as
it numbers them (silently wrong 1-12, crashes and state left behind 13-22, conventions 23-27);
then bad input, reuse, nesting and damaged checkpoints beyond them."""

import json
import re
import shutil
import struct
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.checkpoint import checkpoint

from normlab.lab.cli import main
from normlab.precision import Precision, get_policy
from normlab.torch import (
    FirstNonFinite,
    Monitor,
    PolicyOptimizer,
    emulate,
    inspect,
    load_causal_lm,
    mx_quantize,
    mx_scale,
    quantize,
)

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")


def _mlp(n=32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(), torch.nn.Linear(n, n))


def _llama(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=80, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**cfg, **kw}))


def _grads_ckpt(reentrant):
    m, x = _mlp(), torch.randn(4, 32, generator=torch.Generator().manual_seed(1),
                               requires_grad=True)
    out = []
    for ck in (False, True):
        m.zero_grad()
        with emulate(m, "amp_bf16"):
            (checkpoint(m, x, use_reentrant=reentrant) if ck else m(x)).pow(2).sum().backward()
        out.append(m[0].weight.grad.clone())
    assert torch.equal(*out)


def _submodule_states():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))

        def forward(self, x):
            return self.body(x)
    net = Net()
    with emulate(net, "fp8_hybrid") as em:
        for _ in range(10):
            net.body(torch.randn(3, 8)).sum().backward()
    assert len(em.rounder.states) == 6 and all(s.scale != 1 for s in em.rounder.states.values())


def _conv_rounded():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 4, 3))
    x = torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with emulate(m, "fp8_hybrid") as em:
            y = m(x)
    assert not torch.equal(y, m(x)) and torch.equal(y, y.bfloat16().float())
    assert {r["op"] for r in em.coverage if r["status"] == "rounded"} == {"conv2d"}


def _moe_rounded():
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2))
    ids = torch.arange(10)[None]
    with emulate(model, "fp8_hybrid") as em:
        model(input_ids=ids, labels=ids).loss.backward()
    assert any("experts.gate_up_proj" in k for k in em.rounder.states)


def _nested():
    m = _mlp()
    with emulate(m, "amp_fp16"), emulate(m, "fp32"):
        pass


def _embedding_max_norm():
    e = torch.nn.Embedding(10, 4, max_norm=1.0)
    with torch.no_grad():
        e.weight.mul_(3)
    twin = torch.nn.Embedding(10, 4, max_norm=1.0)
    twin.load_state_dict(e.state_dict())
    ids = torch.tensor([1, 2, 3])
    with emulate(e, "fp8_hybrid"):
        y = e(ids)
    want = twin(ids)
    assert torch.equal(e.weight, twin.weight)  # the model's own table renormalized
    assert torch.equal(y, want.bfloat16().float())  # its rows read, rounded to params


def _double_step():
    m = _mlp(4)
    opt = PolicyOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), "amp_fp16")
    opt.scale(m(torch.randn(2, 4)).sum()).backward()
    opt.step()
    opt.step()


def _default_stream():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = torch.nn.ModuleList([torch.nn.Linear(4, 1) for _ in range(2)])
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
    assert emulate(M(), "amp_bf16").stream == ("blocks.0", "blocks.1", "blocks.2")


def _hf_checkpointing():
    ids = torch.arange(12)[None]
    grads = []
    for ck in (False, True):
        model = _llama(use_cache=False)
        if ck:
            model.gradient_checkpointing_enable()
        model.train()
        with emulate(model, "fp32"):
            model(input_ids=ids, labels=ids).loss.backward()
        grads.append([p.grad for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def _compile():
    m, x = _mlp(8), torch.randn(2, 8)
    with emulate(m, "amp_bf16"):
        want = m(x)
    cm = torch.compile(m, backend="eager")
    with emulate(cm, "amp_bf16"):
        assert torch.equal(cm(x), want)


def _reenter():
    m = _mlp(4)
    em = emulate(m, "amp_bf16")
    try:
        with em, em:
            pass
    finally:
        assert not any(mm._forward_hooks or mm._forward_pre_hooks for mm in m.modules())


def _linear_0():
    m, x = torch.nn.Linear(0, 4), torch.randn(3, 0, requires_grad=True)
    with emulate(m, "amp_bf16"):
        m(x).sum().backward()
    assert m.weight.grad.shape == (4, 0) and x.grad.shape == (3, 0)


def _full_backward_warning():
    m = _mlp(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mon = Monitor(m, every=1)
        with mon.watch():
            m(torch.randn(2, 4)).sum().backward()


def _nan_loss_json(tmp):
    path = tmp / "s.jsonl"
    m = _mlp(4)
    mon = Monitor(m, every=1, path=str(path))
    with mon.watch():
        m(torch.full((2, 4), float("nan"))).sum().backward()
    json.loads(path.read_text().splitlines()[0],
               parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def _stream_string():
    m = _llama()
    em = emulate(m, "amp_bf16", stream="model.layers.0")
    assert em.stream == ("model.layers.0",)


def _no_params():
    class Free(torch.nn.Module):
        def forward(self, x):
            return (x * 2).sum()
    assert inspect(Free(), {"x": torch.ones(2)})["loss"] == 4.0


def _stochastic_checkpoint():
    sr = replace(get_policy("amp_bf16"), name="sr",
                 compute=Precision("bfloat16", rounding="stochastic"))
    m, x = _mlp(4), torch.randn(2, 4, requires_grad=True)
    with emulate(m, sr, rng=np.random.default_rng(0)):
        checkpoint(m, x, use_reentrant=False).sum().backward()


def _lstm_strict():
    lstm = torch.nn.LSTM(4, 4)
    with emulate(lstm, "amp_bf16", strict=True):
        lstm(torch.randn(3, 1, 4))


def _debug_stop():
    m = _mlp(4)
    with FirstNonFinite(m, stop=True).watch():
        m(torch.full((2, 4), float("inf")))


CASES: dict[str, tuple[Callable, Any, str]] = {  # name -> (case, error or None, message)
    "01 checkpoint non-reentrant: the same gradients": (lambda t: _grads_ckpt(False), None, ""),
    "02 checkpoint reentrant: the same gradients": (lambda t: _grads_ckpt(True), None, ""),
    "03 a submodule called directly: stable states": (lambda t: _submodule_states(), None, ""),
    "04 convolutions rounded": (lambda t: _conv_rounded(), None, ""),
    "05 grouped MoE experts rounded": (lambda t: _moe_rounded(), None, ""),
    "06 nested emulate refused": (lambda t: _nested(), RuntimeError, "already under emulate"),
    "07 Embedding(max_norm) renormalizes its table": (lambda t: _embedding_max_norm(), None, ""),
    "08 PolicyOptimizer.step twice refused": (lambda t: _double_step(), RuntimeError,
                                              "again on the gradients"),
    "09 the default stream is the blocks": (lambda t: _default_stream(), None, ""),
    "10 mx_scale of a negative amax refused": (
        lambda t: mx_scale(torch.tensor([-1.0]), "float8_e4m3fn"), ValueError,
        "block_amax must be >= 0"),
    "13 transformers' gradient checkpointing": (lambda t: _hf_checkpointing(), None, ""),
    "14 torch.compile": (lambda t: _compile(), None, ""),
    "15 the same emulate entered twice refused": (lambda t: _reenter(), RuntimeError,
                                                  "already entered"),
    "19 Linear(0, 4)": (lambda t: _linear_0(), None, ""),
    "20 mx_quantize of an empty tensor": (
        lambda t: mx_quantize(torch.empty(0, 32)).dequantize().shape == (0, 32), None, ""),
    "21 Monitor(stream=['nope']) refused at once": (
        lambda t: Monitor(_mlp(4), stream=["nope"]), ValueError, "no module named 'nope'"),
    "22 inspect of a model without parameters": (lambda t: _no_params(), None, ""),
    "23 Monitor with a NaN loss: strict JSON": (_nan_loss_json, None, ""),
    "24 Monitor(path in a missing folder) refused at once": (
        lambda t: Monitor(_mlp(4), path="/missing/dir/x.jsonl"), ValueError, "path"),
    "25 Monitor on a plain MLP: no warning": (lambda t: _full_backward_warning(), None, ""),
    "26 emulate(stream='model.layers.0')": (lambda t: _stream_string(), None, ""),
    "27 quantize to a torch float8 dtype": (
        lambda t: torch.equal(quantize(torch.tensor([448.0, 464.0]), torch.float8_e4m3fn),
                              torch.tensor([448.0, 448.0])) or 1 / 0, None, ""),
    "bad: emulate(rules='amp')": (lambda t: emulate(_mlp(4), "amp_bf16", rules="amp"),
                                  ValueError, "rules"),
    "bad: emulate(micro_batches=0)": (lambda t: emulate(_mlp(4), "amp_bf16", micro_batches=0),
                                      ValueError, "micro_batches"),
    "bad: emulate(strict='yes')": (lambda t: emulate(_mlp(4), "amp_bf16", strict="yes"),
                                   TypeError, "strict"),
    "bad: emulate(stream=3)": (lambda t: emulate(_mlp(4), "amp_bf16", stream=3), TypeError,
                               "stream must be"),
    "bad: emulate(embed=3)": (lambda t: emulate(_mlp(4), "amp_bf16", embed=3), TypeError,
                              "embed must be"),
    "bad: quantize to torch.int8": (lambda t: quantize(torch.ones(2), torch.int8), ValueError,
                                    "torch dtype torch.int8 is not one of"),
    "reuse: stochastic rounding with checkpointing refused": (
        lambda t: _stochastic_checkpoint(), RuntimeError, "draw other random bits"),
    "coverage: an LSTM under strict=True": (lambda t: _lstm_strict(), RuntimeError,
                                            "lstm in .* computes with the weight"),
    "debug: stop at the first non-finite value": (lambda t: _debug_stop(), RuntimeError,
                                                  "first non-finite value at step 0"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case(name, tmp_path):
    case, error, match = CASES[name]
    if error is None:
        case(tmp_path)
    else:
        with pytest.raises(error, match=match):
            case(tmp_path)


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    _llama().save_pretrained(root / "good")
    _llama().save_pretrained(root / "sharded", max_shard_size="20KB")
    np.save(root / "ids.npy", np.random.default_rng(0).integers(0, 80, 30))
    return root


def _variant(root, name, tensors=None, config=None, raw=None, edit=None):
    d = root / name
    if not d.exists():
        shutil.copytree(root / ("sharded" if edit else "good"), d)
        if edit is not None:  # a sharded checkpoint's folder changed
            edit(d)
        if tensors is not None:
            stored = safetensors_torch.load_file(d / "model.safetensors")
            safetensors_torch.save_file(tensors(stored), d / "model.safetensors",
                                        metadata={"format": "pt"})
        if raw is not None:
            (d / "model.safetensors").write_bytes(raw)
        if config is not None:
            cfg = json.loads((d / "config.json").read_text())
            (d / "config.json").write_text(json.dumps({**cfg, **config}))
    return d


def _index_names_an_absent_tensor(d):
    path = d / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    index["weight_map"]["model.norm.scale"] = index["weight_map"]["model.norm.weight"]
    path.write_text(json.dumps(index))


def _a_tensor_in_two_shards(d):
    shards = sorted(d.glob("model-*.safetensors"))
    stored, first = (safetensors_torch.load_file(shards[i]) for i in (-1, 0))
    name = next(iter(first))  # the first shard's tensor, written into the last one too
    safetensors_torch.save_file({**stored, name: first[name]}, shards[-1],
                                metadata={"format": "pt"})


CHECKPOINTS = {  # name -> (variant arguments, exit status, message on stderr)
    "good": ({}, 0, ""),
    "sharded": ({"edit": lambda d: None}, 0, ""),
    "an index naming a tensor no shard holds": (
        {"edit": _index_names_an_absent_tensor}, 2,
        "weight_map puts tensor 'model.norm.scale' in .*; the shards' headers have it in None"),
    "a tensor stored in two shards": ({"edit": _a_tensor_in_two_shards}, 2,
                                      "is stored twice"),
    "11 none of the model's tensors": (
        {"tensors": lambda s: {"foo": torch.zeros(2)}}, 2, "stores none of the model's"),
    "12 one tensor missing": (
        {"tensors": lambda s: {k: v for k, v in s.items() if "layers.1.mlp.down_proj" not in k}},
        2, r"lacks 1 of the model's \d+ tensors \(\['model.layers.1.mlp.down_proj.weight'\]"),
    "16 a header length past the limit": ({"raw": struct.pack("<Q", 10**12) + b"{}"}, 2,
                                          "header length 1000000000000 is over"),
    "17 a short header": ({"raw": b"\x01\x02"}, 2, "not a safetensors file"),
    "18 a shape the config contradicts": (
        {"config": {"intermediate_size": 48}}, 2,
        r"layers.0.mlp.down_proj.weight is stored with shape \(32, 64\); the config makes it "
        r"\(32, 48\) \(6 such\)"),
    "a tensor the model does not take": (
        {"tensors": lambda s: {**s, "model.layers.0.mlp.up_proj.bias": torch.zeros(64)}}, 2,
        r"stores 1 tensor\(s\) the model does not take \(\['model.layers.0.mlp.up_proj.bias'\]"),
    "a NaN weight": (
        {"tensors": lambda s: {**s, "model.norm.weight": torch.tensor(
            [1.0] * 5 + [float("nan")] + [1.0] * 26)}}, 2,
        r"tensor 'model.norm.weight' holds a non-finite value \(element 5: nan\)"),
    "num_hidden_layers 10^9": ({"config": {"num_hidden_layers": 10**9}}, 2,
                               "num_hidden_layers = 1000000000 but the checkpoint stores"),
    "vocab_size 10^9": ({"config": {"vocab_size": 10**9}}, 2,
                        "needs about .* GB.*its largest tensor: model.embed_tokens.weight"),
    "max_position_embeddings 10^9 (RoPE: no table)": (
        {"config": {"max_position_embeddings": 10**9}}, 0, ""),
    "a config transformers cannot build": ({"config": {"hidden_size": "wide"}}, 2,
                                             "config"),
}


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_inspect_torch_refuses_as_normlab_does(name, checkpoint_dir, tmp_path, capsys):
    kwargs, status, message = CHECKPOINTS[name]
    d = _variant(checkpoint_dir, re.sub(r"\W+", "_", name), **kwargs)
    rc = main(["inspect", str(d), "--torch", "--tokens", str(checkpoint_dir / "ids.npy"),
               "--out", str(tmp_path / "out"), "--policies", "amp_bf16", "--quiet"])
    err = capsys.readouterr().err
    assert rc == status, err
    if status:
        lines = [x for x in err.splitlines() if "normlab inspect: error:" in x]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert re.search(message, lines[0]), lines[0]
    else:
        assert (tmp_path / "out" / "inspect.json").is_file()


def test_inspect_torch_needs_its_tokens(checkpoint_dir, capsys):
    assert main(["inspect", str(checkpoint_dir / "good"), "--torch"]) == 2
    assert "--text --tokens" in capsys.readouterr().err



def test_the_buffers_old_gpt2_checkpoints_store_are_not_refused(tmp_path):
    """The Hub's GPT-2 stores its causal mask and ``attn.masked_bias`` (buffers, skipped by
    normlab's loader too) and the tied head: loaded, not refused as tensors the model does not
    take; a stored tensor of no buffer's name still is."""
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_layer=1, n_embd=32, n_head=4, bos_token_id=0,
        eos_token_id=0)).save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    stored = safetensors_torch.load_file(path)
    stored.update({"transformer.h.0.attn.bias": torch.ones(1, 1, 32, 32).tril(),
                   "transformer.h.0.attn.masked_bias": torch.tensor(-1e4),
                   "lm_head.weight": stored["transformer.wte.weight"].clone()})
    safetensors_torch.save_file(stored, path, metadata={"format": "pt"})
    assert isinstance(load_causal_lm(tmp_path), transformers.GPT2LMHeadModel)
    stored["transformer.h.0.attn.c_attn.scale"] = torch.ones(96)
    safetensors_torch.save_file(stored, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"\['transformer.h.0.attn.c_attn.scale'\]"):
        load_causal_lm(tmp_path)
