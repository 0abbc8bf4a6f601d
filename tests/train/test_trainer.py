"""The training loop: reruns are bit-identical, resumed runs equal uninterrupted ones,
checkpoints are atomic and refused when corrupt or mismatched, divergence stops the run, metrics
are recorded."""

import dataclasses
import json
import os

import numpy as np
import pytest

from normlab.models import GPTConfig
from normlab.train import CheckpointError, TrainConfig, Trainer, train
from normlab.train import checkpoint as ckpt

TINY_MODEL = GPTConfig(vocab_size=8, seq_len=12, n_layers=2, d_model=16, n_heads=2)
TINY = TrainConfig(model=TINY_MODEL, steps=8, batch_size=4, warmup=2, eval_interval=4,
                   eval_batches=2, lr=1e-2)


def _same_history(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra == rb  # every float bit for bit


def test_reruns_are_bit_identical():
    cfg = dataclasses.replace(
        TINY, model=dataclasses.replace(TINY_MODEL, dropout=0.1, attn_dropout=0.1)
    )
    a, b = Trainer(cfg), Trainer(cfg)
    ra, rb = a.run(), b.run()
    _same_history(ra.history, rb.history)
    assert ra.final_val_loss == rb.final_val_loss
    for k, p in a.params.items():
        np.testing.assert_array_equal(p, b.params[k])
    other = Trainer(dataclasses.replace(cfg, seed=1)).run()
    assert other.history[0]["loss"] != ra.history[0]["loss"]


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_resumed_run_equals_the_uninterrupted_one(tmp_path, optimizer):
    cfg = dataclasses.replace(TINY, optimizer=optimizer,
                              model=dataclasses.replace(TINY_MODEL, dropout=0.2))
    straight = Trainer(cfg)
    full = straight.run()
    first = Trainer(cfg)
    first.run(until=3)
    path = tmp_path / "run.npz"
    first.save(path)
    resumed = Trainer.resume(path, cfg)
    assert resumed.step == 3
    result = resumed.run()
    _same_history(result.history, full.history)
    assert result.evals == full.evals
    for k, p in straight.params.items():
        np.testing.assert_array_equal(p, resumed.params[k])
    assert [f for f in os.listdir(tmp_path)] == ["run.npz"]  # no temporary files left


def test_checkpoints_hold_no_pickles(tmp_path):
    t = Trainer(TINY)
    t.run(until=2)
    t.save(tmp_path / "c.npz")
    with np.load(tmp_path / "c.npz", allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)


def test_corrupt_and_mismatched_checkpoints_are_refused(tmp_path):
    t = Trainer(TINY)
    t.run(until=2)
    good = tmp_path / "good.npz"
    t.save(good)
    data = good.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"corrupt or not an .npz"):
        Trainer.resume(tmp_path / "truncated.npz")
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF  # a bit flip inside a member: zip's CRC check fails
    (tmp_path / "flipped.npz").write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError):
        Trainer.resume(tmp_path / "flipped.npz")
    with pytest.raises(CheckpointError, match="does not exist"):
        Trainer.resume(tmp_path / "missing.npz")
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a normlab checkpoint"):
        Trainer.resume(tmp_path / "plain.npz")
    other = dataclasses.replace(TINY, lr=3e-3, model=dataclasses.replace(TINY_MODEL, d_model=32))
    with pytest.raises(CheckpointError, match=r"model.d_model, lr differ"):
        Trainer.resume(good, other)
    longer = Trainer.resume(good, dataclasses.replace(TINY, steps=12))  # only steps may change
    assert longer.config.steps == 12 and longer.step == 2


def test_checkpoint_with_wrong_format_or_shapes_is_refused(tmp_path):
    path = tmp_path / "c.npz"
    ckpt.save(path, {"param/x": np.zeros(2)}, {"config": TINY.to_dict()})
    with pytest.raises(CheckpointError, match="lacks the metadata step, history"):
        Trainer.resume(path)
    ckpt.atomic_write(
        path, lambda f: np.savez(f, __meta__=np.array(json.dumps({"format": "other/9"})))
    )
    with pytest.raises(CheckpointError, match="has format 'other/9'"):
        ckpt.load(path)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "c.npz"
    ckpt.save(path, {"a": np.arange(3)}, {})

    def boom(f):
        f.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        ckpt.atomic_write(path, boom)
    assert os.listdir(tmp_path) == ["c.npz"]
    arrays, _ = ckpt.load(path)
    np.testing.assert_array_equal(arrays["a"], np.arange(3))
    with pytest.raises(ValueError, match="does not exist"):
        ckpt.save(tmp_path / "no" / "dir.npz", {}, {})
    with pytest.raises(TypeError, match="pickle"):
        ckpt.save(tmp_path / "o.npz", {"o": np.array([{}], dtype=object)}, {})


def test_divergence_stops_the_run_and_says_why():
    cfg = dataclasses.replace(TINY, optimizer="sgd", lr=500.0, momentum=0.0, grad_clip=None,
                              warmup=0, steps=30, weight_decay=0.0)
    result = train(cfg)
    assert result.stopped is not None and result.steps_done < 30
    assert "exploded" in result.stopped or "non-finite" in result.stopped
    assert "stopped early" in result.summary()
    json.dumps(result.to_dict(), allow_nan=False)  # strict JSON even after a blow-up


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("field", ["lr", "weight_decay"])
def test_a_step_beyond_float32s_range_stops_the_run_without_a_warning(field):
    """AdamW's lr / (1 - beta1) or lr x weight decay above float32's largest value rounds to
    inf (as NumPy rounds it): the parameters overflow, the run stops with that reason, and
    nothing is printed."""
    big = {"lr": {"lr": 1e38, "warmup": 0}, "weight_decay": {"weight_decay": 1e300}}[field]
    result = train(dataclasses.replace(TINY, grad_clip=None, steps=5, **big))
    assert result.stopped is not None and result.steps_done < 5
    assert "non-finite" in result.stopped or "exploded" in result.stopped


def test_metrics_are_recorded_every_step():
    result = train(dataclasses.replace(TINY, steps=4))
    L = TINY_MODEL.n_layers
    for record in result.history:
        for key in ("layer_grad_norm", "layer_update_rms", "residual_rms", "max_attn_logit"):
            assert len(record[key]) == L and all(np.isfinite(record[key])), key
        assert record["grad_norm"] > 0 and not record["skipped"]
        assert (record["update_rms"] > 0) == (record["lr"] > 0)  # cosine ends at lr 0
        assert np.isfinite(record["log_z"])
    d = result.to_dict()
    assert list(d)[:2] == ["final_val_loss", "entropy_floor"]
    assert d["entropy_floor"] == pytest.approx(result.entropy_floor) and d["config"]["steps"] == 4
    assert result.evals[-1]["step"] == 4 and d["final_val_loss"] == result.evals[-1]["val_loss"]


def test_training_learns_the_markov_source():
    cfg = dataclasses.replace(TINY, steps=80, eval_interval=80, lr=2e-2, markov_order=1)
    result = train(cfg)
    first = result.history[0]["nll"]
    assert first > 1.9  # about ln 8 at init
    assert result.final_val_loss < first - 0.4
    assert result.final_val_loss > result.entropy_floor - 0.05  # nothing beats the floor


def test_text_data_sets_the_vocabulary(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    cfg = dataclasses.replace(TINY, data="file", data_path=str(path), steps=2)
    t = Trainer(cfg)
    assert t.config.model.vocab_size == len(set(path.read_text()))
    result = t.run()
    assert result.entropy_floor is None and "no known entropy floor" in result.summary()


@pytest.mark.parametrize("kw,message", [
    ({"lr": 0.0}, "lr must be a finite number > 0"),
    ({"lr": -1e-3}, "lr must be a finite number > 0"),
    ({"steps": 0}, "steps must be an integer >= 1"),
    ({"data": "shakespeare"}, "data must be one of"),
    ({"data": "file"}, "needs data_path"),
    ({"optimizer": "lion"}, "optimizer must be one of"),
    ({"schedule": "step"}, "schedule must be one of"),
    ({"precision": "fp64"}, "precision must be one of"),
    ({"batch_size": 0}, "batch_size must be an integer >= 1"),
    ({"grad_clip": 0.0}, "grad_clip must be a finite number > 0"),
])
def test_inconsistent_configs_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TINY, **kw)


def test_config_round_trip():
    assert TrainConfig.from_dict(TINY.to_dict()) == TINY
    with pytest.raises(ValueError, match="unknown training fields"):
        TrainConfig.from_dict({**TINY.to_dict(), "epochs": 3})
