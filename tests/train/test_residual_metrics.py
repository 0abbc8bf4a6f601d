"""The residual stream's per-block max |x| (recorded every step, beside its RMS) and, with
``eval_headroom``, its precision headroom at every evaluation: the fractions outside each
format's range, as ``models.inspect.tensor_stats`` counts them."""

import dataclasses
import json

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.precision.headroom import HEADROOM_FORMATS as FORMATS
from normlab.precision.headroom import tensor_stats
from normlab.train import TrainConfig, Trainer, train
from normlab.train.probes import observe
from normlab.train.trainer import residual_headroom

MODEL = GPTConfig(vocab_size=8, seq_len=12, n_layers=3, d_model=16, n_heads=2)
TINY = TrainConfig(model=MODEL, steps=6, batch_size=4, warmup=2, eval_interval=3,
                   eval_batches=2, lr=1e-2)


def test_residual_stream_is_what_the_metrics_summarize():
    model = GPT(MODEL, rng=np.random.default_rng(0))
    idx = np.random.default_rng(1).integers(0, 8, size=(2, 12))
    stream = model.residual_stream(idx)
    assert model.blocks[0].attn.branch._cache is None  # released
    with observe(model, "residual_stats") as seen:
        model.logits(idx)
    assert len(stream) == MODEL.n_layers
    for x, rms, amax in zip(stream, seen["residual_rms"], seen["residual_max"]):
        assert x.shape == (2, 12, 16)
        assert amax == float(np.max(np.abs(x)))
        assert rms == pytest.approx(float(np.sqrt(np.mean(x.astype(np.float64) ** 2))), rel=1e-6)
        assert amax >= rms > 0


def test_residual_max_is_recorded_every_step_and_nan_propagates():
    result = train(TINY)
    for record in result.history:
        assert len(record["residual_max"]) == MODEL.n_layers
        assert all(m >= r for m, r in zip(record["residual_max"], record["residual_rms"]))
    assert all("headroom" not in e for e in result.evals)  # off by default
    model = GPT(MODEL, rng=np.random.default_rng(0))
    model.wte.params["weight"][3, 0] = np.nan
    with observe(model, "residual_stats") as seen:
        model.logits(np.full((1, 4), 3))
    assert np.isnan(seen["residual_max"]).all()  # a blow-up is not hidden as a max


def test_eval_headroom_is_recorded_at_every_evaluation():
    t = Trainer(dataclasses.replace(TINY, eval_headroom=True))
    result = t.run()
    assert [e["step"] for e in result.evals] == [3, 6]
    for e in result.evals:
        assert len(e["headroom"]) == MODEL.n_layers
        for layer in e["headroom"]:
            assert set(layer["formats"]) == set(FORMATS)
            for f in layer["formats"].values():
                assert all(0.0 <= f[k] <= 1.0 for k in ("overflow", "flush", "subnormal"))
    json.dumps(result.to_dict(), allow_nan=False)
    x = t.val[0][0]
    stream = t.model.residual_stream(x)
    again = residual_headroom(t.model, x)
    for s, layer in zip(stream, again):  # the same numbers as tensor_stats of the stream
        full = tensor_stats(s)
        assert layer["amax"] == full["amax"] and layer["rms"] == full["rms"]
        assert layer["nonfinite"] == 0.0
        assert layer["formats"]["float16"] == full["formats"]["float16/none"]
    assert again == result.evals[-1]["headroom"]  # the trainer measured the final model


def test_headroom_sees_values_past_a_formats_range():
    model = GPT(MODEL, rng=np.random.default_rng(0))
    model.wte.params["weight"][5] = 1000.0  # token 5 writes 1000 into every channel
    idx = np.array([[5, 1, 2, 3]])
    layers = residual_headroom(model, idx)
    first = layers[0]["formats"]
    assert first["float8_e4m3fn"]["overflow"] == pytest.approx(0.25, abs=0.05)  # 1 token of 4
    assert first["float8_e5m2"]["overflow"] == 0.0  # its largest finite value is 57344
    assert first["bfloat16"] == {"overflow": 0.0, "flush": 0.0, "subnormal": 0.0}
    assert layers[0]["nonfinite"] == 0.0
    model.wte.params["weight"][6] = np.inf  # a blow-up: non-finite values from token 6 on
    last = residual_headroom(model, np.array([[1, 2, 3, 6]]))
    assert all(0.0 < layer["nonfinite"] <= 1.0 for layer in last)
    assert all(np.isfinite(layer["amax"]) for layer in last)  # counted apart, not as a max


def test_eval_headroom_must_be_a_flag():
    with pytest.raises(TypeError, match="eval_headroom"):
        dataclasses.replace(TINY, eval_headroom=1)
