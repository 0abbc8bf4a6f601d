"""Per-module precision: emulate(..., overrides=[(pattern, policy or roles), ...]) keeps named
modules (the head, the last block, a router) in another precision; the first matching entry
wins; patterns and values are checked before any work."""

import json

import pytest
import torch
import torch.nn.functional as F

from normlab.torch import emulate

transformers = pytest.importorskip("transformers")


def _llama(layers=2):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def _outputs(model, names):
    """Forward hooks (registered inside the block, after emulate's) keeping each named
    module's input and output."""
    got = {}
    hooks = [model.get_submodule(n).register_forward_hook(
        lambda m, a, o, n=n: got.__setitem__(n, (a[0], o[0] if isinstance(o, tuple) else o)))
        for n in names]
    return got, hooks


def _grid(t, dtype=torch.bfloat16):
    return bool(torch.equal(t, t.to(dtype).float()))


def test_the_head_and_the_last_block_keep_their_precision():
    model = _llama()
    ids = torch.arange(12)[None]
    overrides = [("lm_head", "fp32"), ("model.layers.-1", "amp_bf16"),
                 ("*.layers.0.mlp.gate_proj", {"compute": "float16"})]
    with emulate(model, "fp8_hybrid", overrides=overrides) as em:
        got, hooks = _outputs(model, ["lm_head", "model.layers.1.mlp.up_proj",
                                      "model.layers.0.mlp.up_proj"])
        model(input_ids=ids, labels=ids).loss.backward()
        for h in hooks:
            h.remove()
    x, y = got["lm_head"]
    assert torch.equal(y, F.linear(x, model.lm_head.weight))  # the head: float32
    assert _grid(got["model.layers.1.mlp.up_proj"][1])  # the last block: bf16
    base = set(em.rounder.states)
    assert base and all(k.startswith("model.layers.0.") for k in base)  # fp8 states, block 0
    assert not any("gate_proj" in k and "compute" in k for k in base)
    assert em.regions[0].states == {} and em.regions[1].states == {}
    gate = set(em.regions[2].states)  # fp8_hybrid with a float16 compute: E5M2's dout only
    assert gate == {"model.layers.0.mlp.gate_proj.weight/dout/gradients"}
    assert [r.policy.name for r in em.regions] == ["fp32", "amp_bf16", "fp8_hybrid+compute"]


def test_the_first_matching_entry_wins():
    model = _llama()
    ids = torch.arange(12)[None]
    with torch.no_grad(), emulate(model, "amp_bf16", overrides=[
            ("model.layers.1.mlp", "fp32"), ("model.layers.-1", "amp_fp16")]):
        got, hooks = _outputs(model, ["model.layers.1.mlp.down_proj",
                                      "model.layers.1.self_attn.o_proj"])
        model(input_ids=ids)
        for h in hooks:
            h.remove()
    x, y = got["model.layers.1.mlp.down_proj"]
    assert torch.equal(y, F.linear(x, model.model.layers[1].mlp.down_proj.weight))
    o = got["model.layers.1.self_attn.o_proj"][1]
    assert _grid(o, torch.float16) and not _grid(o)  # fp16, the second entry's


def test_a_region_of_the_stream_follows_its_entry():
    model = _llama()
    ids = torch.arange(12)[None]
    with torch.no_grad(), emulate(model, "amp_bf16",
                                  overrides=[("model.layers.1", "fp32")]):
        got, hooks = _outputs(model, ["model.layers.0", "model.layers.1"])
        model(input_ids=ids)
        for h in hooks:
            h.remove()
    assert _grid(got["model.layers.0"][1]) and not _grid(got["model.layers.1"][1])


def test_states_of_every_region_round_trip():
    model = _llama()
    ids = torch.arange(12)[None]
    em = emulate(model, "fp8_hybrid", overrides=[("model.layers.-1", "fp8_hybrid")])
    with em:
        model(input_ids=ids, labels=ids).loss.backward()
    em.end_step()
    state = json.loads(json.dumps(em.state_dict()))
    fresh = emulate(model, "fp8_hybrid", overrides=[("model.layers.-1", "fp8_hybrid")])
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state and state["overrides"][0]
    with pytest.raises(ValueError, match="override states"):
        emulate(model, "fp8_hybrid").load_state_dict(state)


@pytest.mark.parametrize("overrides, error, match", [
    ([("lm_haed", "fp32")], ValueError, r"pattern 'lm_haed' matches no module"),
    ([("model.layers.-3", "fp32")], ValueError, "matches no module"),
    ([("lm_head", 3)], TypeError, r"must be a PrecisionPolicy, a preset name or a mapping"),
    ([("lm_head", "no_such")], ValueError, r"overrides\[0\] \('lm_head'\)"),
    ([("lm_head", {"weights": "bfloat16"})], ValueError, r"unknown roles \['weights'\]"),
    ([("lm_head", {"compute": "float99"})], ValueError,
     r"overrides\[0\] \('lm_head'\): .*unknown format 'float99'"),
    ([("lm_head", {"compute": {"format": "bfloat16", "rounding": "sideways"}})], ValueError,
     r"overrides\[0\] \('lm_head'\): .*sideways"),
    ([("lm_head", {"compute": {"fmt": "bfloat16"}})], TypeError,
     r"overrides\[0\] \('lm_head'\): .*fmt"),
    (["lm_head"], TypeError, r"overrides\[0\] must be a \(module pattern, policy\) pair"),
    ("lm_head", TypeError, "overrides must be a list"),
])
def test_bad_overrides_are_refused_by_name(overrides, error, match):
    with pytest.raises(error, match=match):
        emulate(_llama(), "amp_bf16", overrides=overrides)
