"""FirstNonFinite (the first inf or NaN: step, phase, module, op, the inputs' headroom, stop
there) and Monitor's files and reach (strict JSON whatever the loss, transformers' Conv1D and MoE
experts, no backward-hook warning, arguments checked at construction)."""

import contextlib
import json
import warnings

import pytest
import torch

from normlab.precision import get_policy
from normlab.precision.headroom import tensor_stats
from normlab.torch import FirstNonFinite, Monitor, NonFiniteError, apply, emulate, inspect

transformers = pytest.importorskip("transformers")


def _strict(text: str):
    def refuse(c):
        raise ValueError(f"not strict JSON: {c}")
    return json.loads(text, parse_constant=refuse)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.exp(self.a(x)))


def test_the_first_overflow_in_the_forward(tmp_path):
    net, x = Net(), torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    debug = FirstNonFinite(net, path=tmp_path / "nonfinite.json")
    for scale in (1.0, 1.0, 1000.0, 1.0):
        with debug.watch():
            net(x * scale).sum().backward()
    f = debug.found  # b's output is the first bad module output; exp (in the model's own
    # forward, outside b) made the inf b received
    assert (f["step"], f["phase"], f["module"], f["tensor"], f["op"], f["made_in"],
            f["made"]) == (2, "forward", "b", "output", "aten.exp.default", "", False)
    assert f["inf"] + f["nan"] > 0
    assert f["inputs"][0]["amax"] > 88  # exp overflows float32 past 88.7
    assert f["inputs"][0]["formats"]["float8_e4m3fn/none"]["overflow"] > 0  # what-if headroom
    assert [fr["module"] for fr in f["frames"]][-2:] == ["a", "b"]  # the module outputs
    assert _strict((tmp_path / "nonfinite.json").read_text())["op"] == "aten.exp.default"


def test_the_first_overflow_in_the_backward_names_the_module():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    x = torch.randn(3, 4)
    debug = FirstNonFinite(model)
    with debug.watch():
        y = model(x)
        torch.autograd.backward(y, torch.full_like(y, 3e38))  # dx = dY W overflows
    f = debug.found  # dW = dY^T x of the last linear: its weight's gradient, made there
    assert (f["phase"], f["module"], f["tensor"], f["made_in"], f["made"]) == (
        "backward", "1", "grad:1.weight", "1", True)
    assert f["op"].startswith("aten.")


def test_a_nan_weight_is_received_and_stop_raises():
    net = Net()
    with torch.no_grad():
        net.b.weight[0, 0] = float("nan")
    debug = FirstNonFinite(net, stop=True)
    with pytest.raises(NonFiniteError, match=r"step 0, forward, module 'b', output \(received"):
        with debug.watch():
            net(torch.randn(2, 4))
    assert debug.found["made"] is False and debug.found["op"] is None
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in net.modules())


def test_nothing_found_and_bad_arguments():
    net = Net()
    debug = FirstNonFinite(net)
    with debug.watch(), emulate(net, "amp_bf16"):
        net(torch.randn(2, 4)).sum().backward()
    assert debug.found is None and debug.step == 0
    with pytest.raises(TypeError, match="model must be"):
        FirstNonFinite(object())
    with pytest.raises(ValueError, match="frames"):
        FirstNonFinite(net, frames=-1)
    with pytest.raises(ValueError, match="path"):
        FirstNonFinite(net, path="/no/such/dir/x.json")


def test_monitor_writes_strict_json_with_a_nan_loss(tmp_path):
    net = Net()
    path = tmp_path / "stats.jsonl"
    mon = Monitor(net, every=1, path=str(path))
    with mon.watch():
        out = net(torch.full((2, 4), float("nan"))).sum()
        out.backward()
    rec = _strict(path.read_text().splitlines()[0])
    assert rec["step"] == 0 and rec["tensors"]["a.input"]["nonfinite"] == 8


def test_monitor_sees_conv1d_and_experts_without_warnings():
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_layer=1, n_embd=32, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0))
    ids = torch.arange(10)[None]
    rec = inspect(gpt2, {"input_ids": ids, "labels": ids})
    for name in ("transformer.h.0.attn.c_attn", "transformer.h.0.mlp.c_proj", "lm_head"):
        assert f"{name}.input" in rec["tensors"] and f"{name}.dout" in rec["tensors"], name
    mix = transformers.MixtralForCausalLM(transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2))
    rec = inspect(mix, {"input_ids": ids, "labels": ids})
    assert "model.layers.0.mlp.experts.input" in rec["tensors"]
    assert "model.layers.0.mlp.experts.dout" in rec["tensors"]
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's full-backward-hook warning would raise
        mon = Monitor(mlp, every=1)
        with mon.watch():
            mlp(torch.randn(3, 4)).sum().backward()
    assert "0.dout" in mon.records[0]["tensors"]
    assert [f["scale_rule"] for f in mon.records[0]["formats"] if f["scaling"] == "mx"] == [
        "ceil", "floor"]


def test_monitor_checks_its_arguments_at_construction():
    net = Net()
    with pytest.raises(ValueError, match="no module named 'nope'"):
        Monitor(net, stream=["nope"])
    with pytest.raises(TypeError, match="stream must be"):
        Monitor(net, stream=3)
    with pytest.raises(ValueError, match="path"):
        Monitor(net, path="/missing/dir/x.jsonl")
    assert Monitor(net, stream="a").stream == ("a",)


def test_inspect_a_model_without_parameters():
    class Free(torch.nn.Module):
        def forward(self, x):
            return (x * 2).sum()
    rec = inspect(Free(), {"x": torch.ones(3)})
    assert rec["loss"] == 6.0


def test_the_what_if_headroom_of_mxfp8_is_the_presets():
    """The record's ``mxfp8`` column follows the preset's scale rule, as Monitor's: a block whose
    amax is 480 overflows E4M3 under OCP's floor scale (2^0) and not under the preset's ceil
    scale (2^1), which the preset's own rounding shows."""

    class Exp(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x)
    x = torch.linspace(-1, 1, 32)
    x[5] = 480.0  # exp(480) is inf in float32
    model = Exp()
    debug = FirstNonFinite(model)
    with debug.watch():
        model(x)
    formats = debug.found["inputs"][0]["formats"]
    assert debug.found["op"] == "aten.exp.default"
    assert formats["mxfp4"] == tensor_stats(x.numpy())["formats"]["mxfp4"]  # floor, as OCP
    assert tensor_stats(x.numpy())["formats"]["mxfp8"]["overflow"] == 1 / 32  # the floor rule
    kept = apply(get_policy("mxfp8").compute, x)
    assert torch.isfinite(kept).all() and kept[5] == 480.0  # the preset keeps it
    assert formats["mxfp8"]["overflow"] == 0.0


def _gpt2_finding(where, checkpointing):
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_layer=3, n_embd=32, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0, use_cache=False))
    if checkpointing:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": checkpointing == "reentrant"})
    model.train()
    with torch.no_grad():
        if where == "forward":  # the next layer's norm squares it past float32
            model.transformer.h[1].mlp.c_fc.weight.mul_(1e36)
        else:
            model.transformer.h[1].mlp.c_proj.weight.mul_(1e6)
    ids = torch.arange(10)[None]
    debug = FirstNonFinite(model)
    torch.manual_seed(1)  # the same dropout masks in every run
    with debug.watch():
        loss = model(input_ids=ids, labels=ids).loss
        (loss if where == "forward" else loss * 3e38).backward()
    f = debug.found
    return tuple(f[k] for k in ("step", "phase", "module", "tensor", "op", "made_in", "made",
                                "nan", "inf")), [(fr["module"], fr["phase"]) for fr in f["frames"]]


@pytest.mark.parametrize("checkpointing", ["non-reentrant", "reentrant"])
@pytest.mark.parametrize("where", ["forward", "backward"])
def test_checkpointing_finds_the_same_first_value(where, checkpointing):
    """transformers' gradient checkpointing: the same finding as without it (the search once
    saved a tensor more in the forward than the recomputation, a CheckpointError)."""
    (want, frames), (got, got_frames) = _gpt2_finding(where, None), _gpt2_finding(
        where, checkpointing)
    assert want[1] == where and got == want
    # the frames: the module outputs of the forward, then the gradients arriving in the
    # backward; a recomputation's outputs are not forward frames (the reentrant kind's
    # recomputed graph adds the arrivals inside the layers)
    phases = [phase for _, phase in got_frames]
    assert phases == sorted(phases, key=("forward", "backward").index), got_frames
    if checkpointing == "non-reentrant":
        assert got_frames == frames


def _watched_run(policy, rules, tool, order):
    """Two steps of GPT-2 under ``emulate``, watched by ``tool`` (None, Monitor or
    FirstNonFinite) entered inside or outside the emulate block: the gradients and losses."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_layer=2, n_embd=32, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
    watcher = None if tool is None else tool(model) if tool is FirstNonFinite else \
        tool(model, every=1)
    em, ids, losses = emulate(model, policy, rules=rules), torch.arange(10)[None], []
    for _ in range(2):
        outer, inner = (em, contextlib.nullcontext()) if watcher is None else \
            (em, watcher.watch()) if order == "inside" else (watcher.watch(), em)
        with outer, inner:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        losses.append(float(loss))
    return {n: p.grad for n, p in model.named_parameters()}, losses


@pytest.mark.parametrize("order", ["inside", "outside"])
@pytest.mark.parametrize("tool", [Monitor, FirstNonFinite])
@pytest.mark.parametrize("policy, rules", [("fp8_hybrid", "normlab"), ("amp_bf16", "autocast")])
def test_watching_changes_no_bit_of_the_emulated_step(policy, rules, tool, order):
    """Monitor and FirstNonFinite beside emulate (delayed scales moving over two steps, or
    autocast's rules): the gradients and losses of the step without them, bit for bit."""
    grads, losses = _watched_run(policy, rules, None, order)
    watched, watched_losses = _watched_run(policy, rules, tool, order)
    assert watched_losses == losses
    assert all(torch.equal(watched[n], grads[n]) for n in grads)
