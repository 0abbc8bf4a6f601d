"""Monitor's per-block statistics (``normlab.torch.monitor``): the figures of
``precision.blockstats.block_stats`` for each named dialect on each watched tensor of a
transformers GPT-2 (random weights), on the measured steps, in strict JSON lines."""

import json

import numpy as np
import pytest
import torch

from normlab.precision import NVFP4Scaling, Precision
from normlab.precision.blockstats import WHAT_IF, block_stats
from normlab.torch import Monitor
from normlab.torch.inspect import Monitor as InspectMonitor

transformers = pytest.importorskip("transformers")


def _gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=96, n_positions=32,
                                  bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


def _strict(line: str) -> dict:
    def refuse(c):
        raise ValueError(f"not strict JSON: {c}")
    return json.loads(line, parse_constant=refuse)


def _train(mon, model, steps=3):
    idx = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        with mon.watch():
            model(idx, labels=idx).loss.backward()
        opt.step()
        opt.zero_grad()


def test_block_statistics_per_watched_tensor_are_blockstats(tmp_path):
    model = _gpt2()
    path = tmp_path / "stats.jsonl"
    mon = Monitor(model, every=2, path=str(path), blocks=("nvfp4", "mxfp8", "fp8_128x128"),
                  block_gradients=True)
    assert isinstance(mon, InspectMonitor)
    snap = {}
    idx = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(0))
    with mon.watch():
        model(idx, labels=idx).loss.backward()
    snap["w"] = model.transformer.h[1].mlp.c_fc.weight.detach().numpy().copy()
    snap["g"] = model.transformer.h[1].mlp.c_fc.weight.grad.numpy().copy()
    _train(mon, model, steps=2)
    lines = [_strict(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 2] and len(mon.records) == 2
    blocks = lines[0]["blocks"]
    matrices = [n for n, p in model.named_parameters() if p.dim() == 2]
    assert set(blocks) == {f"{k}:{n}" for n in matrices for k in ("weight", "grad")}
    got = blocks["weight:transformer.h.1.mlp.c_fc.weight"]
    assert set(got) == {"nvfp4", "mxfp8", "fp8_128x128"}
    for d in got:
        want = json.loads(json.dumps(block_stats(snap["w"], WHAT_IF[d],
                                                 rng=np.random.default_rng(0)).to_dict()))
        assert got[d] == want
    g = blocks["grad:transformer.h.1.mlp.c_fc.weight"]["nvfp4"]
    assert g == json.loads(json.dumps(block_stats(snap["g"], WHAT_IF["nvfp4"]).to_dict()))
    n = got["nvfp4"]
    assert sum(n["scale_binades"].values()) <= n["blocks"] == snap["w"].size // 16
    assert 0 <= n["top_band"] <= 1 and n["rowcol_differ"] > 0 and n["dynamic_range_max"] > 0
    assert lines[0]["tensors"] and lines[0]["loss"] is not None  # inspect's record as before


def test_without_blocks_it_is_inspects_monitor():
    model = _gpt2()
    a, b = Monitor(model, every=1), InspectMonitor(model, every=1)
    _train(a, model, steps=1)
    _train(b, model, steps=1)
    assert "blocks" not in a.records[0] and set(a.records[0]) == set(b.records[0])


def test_any_dialect_by_precision_and_nonfinite_figures_stay_strict_json(tmp_path):
    model = _gpt2()
    rot = {"format": "float4_e2m1fn", "scaling": {"kind": "hadamard",
                                                  "scaling": {"kind": "nvfp4"}}}
    path = tmp_path / "s.jsonl"
    mon = Monitor(model, every=1, path=str(path), block_tensors=["*.attn.c_attn.weight"],
                  blocks={"rht": rot, "te2d": Precision("float4_e2m1fn",
                                                        scaling=NVFP4Scaling(two_d=True))})
    with torch.no_grad():
        model.transformer.h[0].attn.c_attn.weight[0, 0] = float("nan")
    _train(mon, model, steps=1)
    rec = _strict(path.read_text().splitlines()[0])
    assert set(rec["blocks"]) == {f"weight:transformer.h.{i}.attn.c_attn.weight" for i in (0, 1)}
    assert set(rec["blocks"]["weight:transformer.h.1.attn.c_attn.weight"]) == {"rht", "te2d"}
    assert rec["blocks"]["weight:transformer.h.0.attn.c_attn.weight"]["te2d"][
        "scales_nonfinite"] > 0


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"blocks": ["nvfp5"]}, ValueError, "unknown dialect 'nvfp5'"),
    ({"blocks": {"x": "bfloat16"}}, ValueError, r"blocks\['x'\]: per-block statistics need"),
    ({"blocks": 3}, TypeError, "blocks must be dialect names"),
    ({"blocks": "nvfp4", "block_tensors": ["nope.*"]}, ValueError, "'nope.*' matches no"),
    ({"blocks": "nvfp4", "block_gradients": 1}, TypeError, "block_gradients"),
    ({"blocks": "nvfp4", "rng": 0}, TypeError, "rng must be"),
])
def test_bad_arguments_are_refused_by_name(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        Monitor(_gpt2(), **kwargs)
