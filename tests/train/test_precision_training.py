"""Precision policies in the model and the trainer: where the roles round, fp16 gradient underflow
and loss scaling, pure-bf16 update stagnation against fp32 master weights, skipped steps."""

import dataclasses
import json

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.nn import FULL_PRECISION, Linear
from normlab.nn.numerics import PolicyNumerics
from normlab.precision import PRESETS, get_policy, quantize
from normlab.train import TrainConfig, Trainer

MODEL = GPTConfig(vocab_size=16, seq_len=32, n_layers=2, d_model=32, n_heads=2)
RUN = TrainConfig(model=MODEL, steps=6, batch_size=8, warmup=1, eval_interval=6, eval_batches=1)


def on_grid(a, fmt):
    return np.array_equal(quantize(a, fmt), a)


def test_linear_rounds_at_the_documented_points():
    rng = np.random.default_rng(0)
    lin = Linear(8, 4, rng=rng)
    lin.numerics = PolicyNumerics("amp_fp16").bind("lin")
    x = rng.normal(size=(3, 8)).astype(np.float32)
    y = lin(x)
    assert on_grid(y, "float16") and on_grid(lin._cache.x2, "float16")  # output, saved input
    assert on_grid(lin._cache.weight, "float16") and not on_grid(lin.params["weight"], "float16")
    dx = lin.backward(rng.normal(size=y.shape).astype(np.float32))
    assert on_grid(dx, "float16") and on_grid(lin.grads["weight"], "float16")


def _grads(numerics, dloss, cfg=MODEL):
    rng = np.random.default_rng(0)
    idx, tgt = rng.integers(0, 16, (16, 32)), rng.integers(0, 16, (16, 32))
    model = GPT(cfg, rng=np.random.default_rng(1))
    model.set_numerics(numerics)
    model.forward(idx, tgt)
    model.zero_grad()
    model.backward(dloss)
    return {k: v / dloss for k, v in model.gradients().items()}


def test_fp16_gradients_underflow_without_loss_scaling():
    # A loss times 1e-4 (small gradients, as late in training): without a loss scale fp16 flushes
    # the activation gradients to zero; S = 2^16 (the dynamic scaler's start) moves them back
    # into range; bfloat16's float32 exponent range needs no scaling (Micikevicius et al. 2017).
    small = 1e-4
    ref = _grads(FULL_PRECISION, small)
    fp16, scaled = PolicyNumerics("amp_fp16"), PolicyNumerics("amp_fp16")
    unscaled = _grads(fp16, small)
    rescued = _grads(scaled, small * 2.0**16)
    bf16 = _grads(PolicyNumerics("amp_bf16"), small)
    name = "blocks.0.attn.branch.qkv.weight"
    r = ref[name]
    flushed = np.mean((unscaled[name] == 0) & (r != 0))
    assert flushed > 0.9
    rel = lambda g: np.linalg.norm(g[name] - r) / np.linalg.norm(r)  # noqa: E731
    assert rel(rescued) < 1e-2 and rel(bf16) < 3e-2
    assert np.mean((rescued[name] == 0) & (r != 0)) < 0.01


def test_pure_bf16_weights_stagnate_where_master_weights_learn():
    # AdamW moves each weight by about lr per step; below half a bfloat16 ulp of the weight the
    # update is rounded away when the weights are stored in bfloat16 (no master copy).
    cfg = dataclasses.replace(
        RUN, lr=3e-5, warmup=0, schedule="constant", steps=5, weight_decay=0.0
    )
    moved = {}
    for policy in ("amp_bf16", "pure_bf16"):
        t = Trainer(dataclasses.replace(cfg, precision=policy))
        w0 = t.params["blocks.0.mlp.branch.fc.weight"].copy()
        t.run()
        w = t.params["blocks.0.mlp.branch.fc.weight"]
        moved[policy] = np.mean(w != w0)
        if policy == "pure_bf16":
            assert all(on_grid(p, "bfloat16") for p in t.params.values())
            assert all(on_grid(s["m"], "bfloat16") for s in t.optimizer.state.values())
    assert moved["amp_bf16"] > 0.95
    assert moved["pure_bf16"] < 0.5 * moved["amp_bf16"]


def _policy_file(tmp_path, **loss_scaling):
    d = get_policy("amp_fp16").to_dict()
    d["name"] = "amp_fp16_custom"
    d["loss_scaling"] = {**d["loss_scaling"], **loss_scaling}
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(d))
    return str(path)


def test_overflowing_steps_are_skipped_and_counted(tmp_path):
    # a loss scale far too large: the scaled fp16 gradients overflow, each such step is skipped
    # and halves the scale (GradScaler's backoff), until the gradients fit
    policy = _policy_file(tmp_path, init_scale=2.0**40, growth_interval=4)
    result = Trainer(dataclasses.replace(RUN, precision=policy, steps=24)).run()
    skipped = [r["skipped"] for r in result.history]
    scales = [r["loss_scale"] for r in result.history]
    assert result.skipped_steps == sum(skipped) >= 5 and result.steps_done == 24
    assert skipped[0] and scales[1] == scales[0] / 2
    for a, b, s in zip(scales, scales[1:], skipped):
        assert b == (a / 2 if s else a) or b == 2 * a  # back off on overflow, grow every 4 clean
    assert np.isfinite(result.final_val_loss) and result.stopped is None


@pytest.mark.parametrize("policy", list(PRESETS))
def test_every_preset_trains(policy):
    result = Trainer(dataclasses.replace(RUN, precision=policy, lr=3e-3)).run()
    assert result.stopped is None and np.isfinite(result.final_val_loss)
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    assert ("loss_scale" in result.history[0]) == (policy == "amp_fp16")


@pytest.mark.parametrize("policy", ["amp_fp16", "fp8_hybrid"])
def test_resume_restores_scaler_and_delayed_scaling(tmp_path, policy):
    cfg = dataclasses.replace(RUN, precision=policy)
    straight = Trainer(cfg).run()
    first = Trainer(cfg)
    first.run(until=3)
    first.save(tmp_path / "c.npz")
    resumed = Trainer.resume(tmp_path / "c.npz", cfg).run()
    assert resumed.history == straight.history


def test_bad_precision_configs_are_refused(tmp_path):
    with pytest.raises(ValueError, match="precision must be one of"):
        dataclasses.replace(RUN, precision="fp64")
    with pytest.raises(ValueError, match=r"missing.json. does not exist"):
        dataclasses.replace(RUN, precision=str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        dataclasses.replace(RUN, precision=str(tmp_path / "bad.json"))
    low_acc = get_policy("amp_bf16").replace(name="acc", accumulate="bfloat16")
    (tmp_path / "acc.json").write_text(low_acc.to_json())
    with pytest.raises(ValueError, match="accumulates its matrix multiplies in float32"):
        dataclasses.replace(RUN, precision=str(tmp_path / "acc.json"))
    with pytest.raises(ValueError, match=r"needs model.dtype float32"):
        dataclasses.replace(RUN, precision="amp_bf16",
                            model=dataclasses.replace(MODEL, dtype="float64"))


def test_inline_json_policy_is_the_file_policy(tmp_path):
    # a policy given as its JSON object travels inside the config (sweep workers need no file):
    # amp_fp16 with the loss scaler off trains as the same policy read from a file
    no_scaling = get_policy("amp_fp16").replace(name="fp16_no_scaling", loss_scaling=None)
    (tmp_path / "p.json").write_text(no_scaling.to_json())
    inline = Trainer(dataclasses.replace(RUN, precision=no_scaling.to_json(indent=None))).run()
    from_file = Trainer(dataclasses.replace(RUN, precision=str(tmp_path / "p.json"))).run()
    assert inline.history == from_file.history
    assert "loss_scale" not in inline.history[0] and inline.stopped is None
    with pytest.raises(ValueError, match="inline JSON policy"):
        dataclasses.replace(RUN, precision='{"name": "x"}')
