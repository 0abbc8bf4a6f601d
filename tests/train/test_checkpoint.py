"""Checkpoint loading validates what it reads, each refusal naming the tensor or key; a stopped run
never writes a checkpoint; the writer keeps a replaced file's mode and refuses non-regular targets."""

import dataclasses
import json
import os
import stat

import numpy as np
import pytest

from normlab.models import GPTConfig
from normlab.train import CheckpointError, TrainConfig, Trainer
from normlab.train import checkpoint as ckpt

MODEL = GPTConfig(vocab_size=8, seq_len=8, n_layers=1, d_model=16, n_heads=2)
CFG = TrainConfig(model=MODEL, steps=4, batch_size=2, warmup=1, eval_interval=2, eval_batches=1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real checkpoint after 2 of 4 steps: (arrays, meta)."""
    path = tmp_path_factory.mktemp("ck") / "run.npz"
    t = Trainer(CFG)
    t.run(until=2)
    t.save(path)
    return ckpt.load(path)


def _write(path, arrays, meta):
    ckpt.save(path, arrays, {k: v for k, v in meta.items() if k != "format"})
    return path


def _first(arrays, prefix, suffix=""):
    return next(k for k in arrays if k.startswith(prefix) and k.endswith(suffix))


@pytest.mark.parametrize("change,message", [
    (lambda a: a.__setitem__(_first(a, "param/"), a[_first(a, "param/")].astype(np.int64)),
     "has dtype int64; parameters and optimizer state are floating-point"),
    (lambda a: a[_first(a, "param/")].flat.__setitem__(0, np.nan), "non-finite values"),
    (lambda a: a[_first(a, "opt/", "/m")].flat.__setitem__(1, np.inf), "non-finite values"),
    (lambda a: a[_first(a, "opt/", "/v")].flat.__setitem__(0, -1.0), "negative values"),
    (lambda a: a.__setitem__("opt/t", np.array(-3)), "opt/t .* must be one integer >= 0"),
    (lambda a: a.__setitem__("opt/t", np.array(2.0)), "opt/t .* must be one integer >= 0"),
])
def test_bad_tensors_are_refused_by_name(tmp_path, saved, change, message):
    arrays, meta = saved
    arrays = {k: v.copy() for k, v in arrays.items()}
    change(arrays)
    path = _write(tmp_path / "bad.npz", arrays, meta)
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match=message) as info:
        Trainer.resume(path)
    named = [k for k in arrays if k in str(info.value)]
    assert named, "the message names the tensor"
    assert path.read_bytes() == before


def test_a_wrong_shape_or_dtype_is_refused_against_the_model(tmp_path, saved):
    arrays, meta = saved
    name = _first(arrays, "param/", "weight")
    bad = {**arrays, name: np.zeros((3, 3), np.float32)}
    with pytest.raises(CheckpointError, match=f"{name} is float32 \\(3, 3\\); the config's model has"):
        Trainer.resume(_write(tmp_path / "a.npz", bad, meta))
    bad = {**arrays, name: arrays[name].astype(np.float64)}
    with pytest.raises(CheckpointError, match=f"{name} is float64"):
        Trainer.resume(_write(tmp_path / "b.npz", bad, meta))


@pytest.mark.parametrize("change,message", [
    (lambda m: m.pop("config"), "lacks the metadata config"),
    (lambda m: m.pop("data_rng"), "lacks the metadata data_rng"),
    (lambda m: m.update(step=-1), "step must be an integer >= 0; got -1"),
    (lambda m: m.update(step="2"), "step must be an integer >= 0"),
    (lambda m: m.update(step=3), "its step is 3 but it holds 2 step records"),
    (lambda m: m.update(config="x"), "its config must be a JSON object"),
    (lambda m: m.update(history={}), "its history must be a list"),
])
def test_bad_metadata_is_refused_by_key(tmp_path, saved, change, message):
    arrays, meta = saved
    meta = json.loads(json.dumps(meta))
    change(meta)
    with pytest.raises(CheckpointError, match=message):
        Trainer.resume(_write(tmp_path / "m.npz", arrays, meta))


def test_a_saved_step_beyond_steps_is_refused(tmp_path, saved):
    arrays, meta = saved
    path = _write(tmp_path / "c.npz", arrays, meta)
    with pytest.raises(CheckpointError, match="at step 2, beyond steps = 1"):
        Trainer.resume(path, dataclasses.replace(CFG, steps=1))
    assert Trainer.resume(path, CFG).step == 2


def test_non_archives_are_refused_with_the_reason(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3))
    with pytest.raises(CheckpointError, match="single .npy array, not an .npz archive"):
        ckpt.load(tmp_path / "x.npy")
    with pytest.raises(CheckpointError, match="is a directory; expected a regular file"):
        ckpt.load(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(CheckpointError, match="is a FIFO"):
            ckpt.load(tmp_path / "fifo")  # refused unread: never blocks


def test_a_run_that_stops_never_writes_its_checkpoint(tmp_path):
    path = tmp_path / "good.npz"
    Trainer(CFG).run(checkpoint=path)
    good = path.read_bytes()
    wild = dataclasses.replace(CFG, optimizer="sgd", lr=500.0, momentum=0.0, grad_clip=None,
                               warmup=0, steps=30, weight_decay=0.0, schedule="constant")
    t = Trainer(wild)
    result = t.run(checkpoint=path)
    assert result.stopped is not None
    assert path.read_bytes() == good  # the good checkpoint is still there, byte for byte
    with pytest.raises(CheckpointError, match="the run stopped"):
        t.save(tmp_path / "other.npz")
    assert not (tmp_path / "other.npz").exists()
    # saved every step: the file holds the last step before the blow-up, and resumes
    every = tmp_path / "every.npz"
    result = Trainer(wild).run(checkpoint=every, checkpoint_every=1)
    _, meta = ckpt.load(every)
    assert meta["stopped"] is None and meta["step"] == result.steps_done - 1
    assert Trainer.resume(every).step == result.steps_done - 1


def test_the_writer_keeps_a_replaced_files_mode_and_refuses_a_fifo(tmp_path):
    path = tmp_path / "c.npz"
    ckpt.save(path, {"a": np.arange(3)}, {})
    os.chmod(path, 0o644)
    ckpt.save(path, {"a": np.arange(4)}, {})
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "f")
        with pytest.raises(ValueError, match="checkpoint: .* is a FIFO"):
            ckpt.save(tmp_path / "f", {"a": np.arange(3)}, {})
        assert stat.S_ISFIFO((tmp_path / "f").stat().st_mode)
