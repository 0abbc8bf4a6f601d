"""normlab.torch.inspect against normlab inspect (the twin model), Monitor, a transformers model."""

import json

import numpy as np
import pytest
import torch
from twin import TwinGPT

from normlab.models import GPT, GPTConfig
from normlab.models.inspect import inspect_model
from normlab.precision import get_format, get_policy
from normlab.torch import Monitor, inspect, mx_quantize
from normlab.torch.inspect import _stats

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layers=2, d_model=64, n_heads=4)


def _close(a: dict, b: dict, name: str):
    assert a["size"] == b["size"] and a["nonfinite"] == b["nonfinite"], name
    for k in ("amax", "rms"):
        assert a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-30), (name, k)
    for key, fa in a["formats"].items():
        if key == "mxfp8":  # the mxfp8 preset's scale rule here, OCP's floor in normlab inspect
            continue  # (test_mxfp8_column_follows_the_preset)
        for what, v in fa.items():  # a value within float32 rounding of a threshold may flip
            assert abs(v - b["formats"][key][what]) <= 2 / a["size"], (name, key, what)


def test_parity_with_normlab_inspect():
    rng = np.random.default_rng(0)
    model = GPT(CFG, rng=rng)
    tokens = rng.integers(0, CFG.vocab_size, CFG.seq_len + 1)
    want = inspect_model(model, tokens, policies=())
    twin = TwinGPT(CFG, model.parameters())
    batch = {"idx": torch.from_numpy(tokens[None, :-1]),
             "targets": torch.from_numpy(tokens[None, 1:])}
    got = inspect(twin, batch)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)
    compared = 0
    for i in range(CFG.n_layers):
        for j, sub in enumerate(("attn", "mlp")):
            ours, theirs = f"layers.{2 * i + j}.stream", f"blocks.{i}.{sub}.stream"
            for key in ("x", "dx"):
                _close(got["tensors"][f"{ours}.{key}"], want["tensors"][f"{theirs}.{key}"],
                       theirs)
                compared += 1
    for name in model.parameters():
        for kind in ("weight", "grad"):
            key = f"{kind}:flat.{name.replace('.', '__')}"
            _close(got["tensors"][key], want["tensors"][f"{kind}:{name}"], name)
            compared += 1
    assert compared == 4 * CFG.n_layers + 2 * len(model.parameters())
    assert [layer["residual_rms"] for layer in got["layers"][1::2]] == pytest.approx(
        [layer["residual_rms"] for layer in want["layers"]], rel=1e-5)


def test_monitor_and_a_transformers_model(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(vocab_size=96, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2, max_position_embeddings=64)
    model = transformers.MixtralForCausalLM(cfg)
    model.train()
    ids = torch.randint(0, 96, (2, 12))
    path = tmp_path / "stats.jsonl"
    mon = Monitor(model, every=2, path=str(path))
    recs = [mon.step({"input_ids": ids, "labels": ids}) for _ in range(3)]
    assert recs[1] is None and recs[0]["step"] == 0 and recs[2]["step"] == 2
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 2]
    r = lines[0]
    assert len(r["layers"]) == 2 and "log_z" in r["output"]
    kinds = {s["kind"] for s in r["tensors"].values()}
    assert kinds == {"activation", "gradient", "weight"}
    assert any(k.endswith("q_proj.input") for k in r["tensors"])
    assert model.training and all(p.grad is None for p in model.parameters())


def test_bad_input():
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        inspect(object(), {})
    with pytest.raises(TypeError, match="batch must be a dict"):
        inspect(torch.nn.Linear(2, 2), [1])
    with pytest.raises(ValueError, match="every must be"):
        Monitor(torch.nn.Linear(2, 2), every=0)


def test_monitor_watch_measures_the_step_itself():
    """watch() on the training step: the statistics inspect gives for the same batch (eval
    mode both, so no dropout), nothing installed on the unmeasured steps."""
    rng = np.random.default_rng(1)
    model = GPT(CFG, rng=rng)
    twin = TwinGPT(CFG, model.parameters())
    twin.eval()
    tokens = rng.integers(0, CFG.vocab_size, CFG.seq_len + 1)
    batch = {"idx": torch.from_numpy(tokens[None, :-1]),
             "targets": torch.from_numpy(tokens[None, 1:])}
    want = inspect(twin, batch)
    mon = Monitor(twin, every=2)
    for k in range(3):
        with mon.watch():
            if k == 1:  # not measured: no hooks
                assert not any(m._forward_hooks or m._forward_pre_hooks
                               for m in twin.modules())
            twin.zero_grad()
            twin(**batch).backward()
    assert [r["step"] for r in mon.records] == [0, 2]
    got = mon.records[0]
    assert got["loss"] == want["loss"]
    assert set(got["tensors"]) == set(want["tensors"])
    for name, s in want["tensors"].items():
        assert got["tensors"][name]["amax"] == s["amax"], name
        assert got["tensors"][name]["formats"] == s["formats"], name
    assert not any(m._forward_hooks for m in twin.modules())


def _by_definition(x: torch.Tensor, rule: str) -> dict:
    """The mxfp8 fractions counted from their definition: blocks of 32 along the last axis
    quantized with ``rule`` (normlab.torch.mx_quantize, tested against normlab.precision), the
    elements compared with the format's bounds."""
    f = get_format("float8_e4m3fn")
    mx = mx_quantize(x, "float8_e4m3fn", scale_rule=rule)
    X = torch.repeat_interleave(mx.scales, 32, dim=-1)[..., :x.shape[-1]]
    v, p = x.abs() / X, mx.elements.abs()
    nz = x != 0
    n = int(nz.sum())
    beyond = f.max_finite + 2.0 ** (f.emax - f.mantissa_bits - 1)
    return {"overflow": int((v > beyond).sum()) / n, "flush": int(((p == 0) & nz).sum()) / n,
            "subnormal": int(((p > 0) & (p < f.min_normal)).sum()) / n}


@pytest.mark.parametrize("scale", [1.0, 2.0**-125, 2.0**100])
def test_mxfp8_column_follows_the_preset(scale):
    """The mxfp8 column predicts the mxfp8 preset: its rule (ceil: no block clips), counted by
    definition; the floor rule's count differs on N(0, 1) data (the OCP rule clips blocks)."""
    assert get_policy("mxfp8").compute.scaling.scale_rule == "ceil"
    x = torch.randn(16, 100, generator=torch.Generator().manual_seed(0)) * scale
    x[0, :40] = 0.0
    x[1, 3] = float("nan")
    got = _stats(x, "activation", {}, "x")["formats"]["mxfp8"]
    finite = torch.nan_to_num(x, nan=0.0)
    want = _by_definition(finite, "ceil")
    assert got == pytest.approx(want, abs=1e-12)
    assert want["overflow"] == 0
    if scale == 1.0:
        assert _by_definition(finite, "floor")["overflow"] > 0


def test_the_ceil_blocks_read_from_the_bits_are_mx_scales():
    """The blocks the ceil rule moves, found from the bits of their amax, and their floor
    scales: the same as normlab.torch.mx_scale's on amaxes at every edge (powers of two, the
    format's max times them, just above and below, zero, float32's subnormals and extremes)."""
    from normlab.torch.headroom import _moved

    f = get_format("float8_e4m3fn")
    k = np.arange(-149, 128, dtype=np.float64)
    edges = np.concatenate([2.0**k, 448 * 2.0**k, 464 * 2.0**k, 1.75 * 2.0**k, [0.0, 3.4e38]])
    a32 = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])
    a32 = a32[np.isfinite(a32.astype(np.float32)) & (a32 <= np.finfo(np.float32).max)]
    amax = torch.from_numpy(a32.astype(np.float32))
    idx, inv, ratio = _moved(amax, f, "ceil")
    xf = mx_scale_reference(amax, "floor")
    xr = mx_scale_reference(amax, "ceil")
    want = (xf != xr).nonzero().squeeze(1)
    assert torch.equal(idx, want)
    assert torch.equal(inv.double(), 1.0 / xf[idx]) and torch.equal(ratio.double(),
                                                                   xr[idx] / xf[idx])


def mx_scale_reference(amax: torch.Tensor, rule: str) -> torch.Tensor:
    from normlab.torch import mx_scale

    return mx_scale(amax.double(), "float8_e4m3fn", rule)


@pytest.mark.parametrize("scale", [2.0**-140, 2.0**-125, 1e-3, 1.0, 2.0**100, 2.0**126])
@pytest.mark.parametrize("shape", [(7,), (33, 65), (64, 96), (3, 4, 40)])
def test_the_kernel_and_torch_count_the_same(shape, scale):
    """normlab.torch.headroom's numba kernel and its torch operations: the same mxfp8 column,
    with inf and NaN in blocks and scales at both ends of E8M0's range."""
    from normlab.precision.headroom import tensor_stats
    from normlab.torch.headroom import preset_mx_fractions

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape))) * scale
    flat = x.view(-1)
    if flat.numel() > 40:
        flat[3], flat[40] = float("nan"), float("-inf")
    stats = tensor_stats(x.numpy())
    assert preset_mx_fractions(x, stats, impl="kernel") == preset_mx_fractions(x, stats,
                                                                               impl="torch")
