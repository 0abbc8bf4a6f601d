"""Checkpoint loading validates what it reads (every tensor, every metadata value, the
optimizer's and the precision policy's state), each refusal naming the tensor or key; a stopped
run never writes a checkpoint; the writer keeps a replaced file's mode and refuses non-regular
targets."""

import dataclasses
import json
import os
import stat

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    with pytest.raises(
        CheckpointError, match=f"{name} is float32 \\(3, 3\\); the config's model has"
    ):
        Trainer.resume(_write(tmp_path / "a.npz", bad, meta))
    bad = {**arrays, name: arrays[name].astype(np.float64)}
    with pytest.raises(CheckpointError, match=f"{name} is float64"):
        Trainer.resume(_write(tmp_path / "b.npz", bad, meta))


@pytest.mark.parametrize("change,message", [
    (lambda m: m.pop("config"), "lacks the metadata config"),
    (lambda m: m.pop("data_rng"), "lacks the metadata data_rng"),
    (lambda m: m.update(step=-1), "step must be an integer >= 0; got -1"),
    (lambda m: m.update(step="2"), "step must be an integer >= 0"),
    (lambda m: m.update(step=3), "its step is 3 but its history holds 2 step records"),
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
    with pytest.raises(CheckpointError, match=r"single .npy array, not an .npz archive"):
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
        with pytest.raises(ValueError, match=r"checkpoint: .* is a FIFO"):
            ckpt.save(tmp_path / "f", {"a": np.arange(3)}, {})
        assert stat.S_ISFIFO((tmp_path / "f").stat().st_mode)


# ---- every metadata value and the precision state, fed wrong kinds and values ----------------
WRONG = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                  st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
                  st.lists(st.integers(-2, 2), max_size=3),
                  st.dictionaries(st.sampled_from(["step", "val_loss", "scale", "state", "x"]),
                                  st.integers(-2, 2), max_size=2))


def _saved(tmp_path_factory, precision):
    path = tmp_path_factory.mktemp("ck") / f"{precision}.npz"
    t = Trainer(dataclasses.replace(CFG, precision=precision))
    t.run(until=2)
    t.save(path)
    return ckpt.load(path)


@pytest.fixture(scope="module")
def saved_amp(tmp_path_factory):
    """A checkpoint of a run with a dynamic loss scaler (amp_fp16), after 2 steps."""
    return _saved(tmp_path_factory, "amp_fp16")


@pytest.fixture(scope="module")
def saved_fp8(tmp_path_factory):
    """A checkpoint of a run with delayed scaling (fp8_hybrid), after 2 steps."""
    return _saved(tmp_path_factory, "fp8_hybrid")


def _paths(meta, prefix=()):
    """Every (key path) into the metadata's nested objects and lists, but the config's."""
    for key, value in (meta.items() if isinstance(meta, dict) else enumerate(meta)):
        if prefix == () and key in ("config", "format"):
            continue
        yield prefix + (key,)
        if isinstance(value, (dict, list)):
            yield from _paths(value, prefix + (key,))


def _set(meta, path, value):
    for key in path[:-1]:
        meta = meta[key]
    meta[path[-1]] = value


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), value=WRONG, which=st.sampled_from(["fp32", "amp_fp16", "fp8_hybrid"]))
def test_any_metadata_value_is_refused_naming_it_or_resumes(tmp_path_factory, saved, saved_amp,
                                                             saved_fp8, data, value, which):
    arrays, meta = {"fp32": saved, "amp_fp16": saved_amp, "fp8_hybrid": saved_fp8}[which]
    meta = json.loads(json.dumps(meta))
    path = data.draw(st.sampled_from(sorted(_paths(meta), key=str)))
    _set(meta, path, value)
    file = _write(tmp_path_factory.mktemp("m") / "m.npz", arrays, meta)
    try:
        t = Trainer.resume(file)
    except CheckpointError as exc:
        named = [str(k) for k in path if not isinstance(k, int)] or [path[0]]
        assert any(n in str(exc) for n in named), (path, value, str(exc))
        return
    t.run(until=3)  # what is accepted trains on


@pytest.mark.parametrize(
    "path,value,message",
    [
        (
            ("precision", "scaler", "scale"),
            -1.0,
            "loss scaler state: scale must be a finite number >= 0",
        ),
        (("precision", "scaler", "scale"), "x", "loss scaler state: scale"),
        (("precision", "scaler", "growth_factor"), 0.5, "growth_factor must be in"),
        (("precision", "scaler", "skipped"), 99, "loss scaler state: skipped"),
        (("precision",), "garbage", "its precision must be an object"),
        (("first_loss",), None, "its first_loss must be a finite number"),
        (("first_loss",), "x", "its first_loss must be a finite number"),
        (
            ("data_rng",),
            {"bit_generator": "PCG64", "state": "x"},
            "its data_rng must be the state of",
        ),
        (("skipped",), 5, "its skipped must be an integer in \\[0, 2\\]"),
        (("train_time",), -1, "its train_time must be a finite number"),
        (("history", 1), 1, "its history\\[1\\] must be a step record with step = 1"),
        (
            ("evals",),
            [{"step": 9, "val_loss": 1.0}],
            "its evals\\[0\\] must be an evaluation record",
        ),
    ],
)
def test_bad_run_state_is_refused_by_key(tmp_path, saved_amp, path, value, message):
    arrays, meta = saved_amp
    meta = json.loads(json.dumps(meta))
    _set(meta, path, value)
    with pytest.raises(CheckpointError, match=message):
        Trainer.resume(_write(tmp_path / "s.npz", arrays, meta))


def test_delayed_scaling_state_is_checked_by_name(tmp_path, saved_fp8):
    arrays, meta = saved_fp8
    meta = json.loads(json.dumps(meta))
    name = next(iter(meta["precision"]["numerics"]))
    meta["precision"]["numerics"][name]["amax_history"] = [-1.0]
    with pytest.raises(CheckpointError, match=f"numerics state '{name}': amax_history must be"):
        Trainer.resume(_write(tmp_path / "n.npz", arrays, meta))
    meta["precision"]["numerics"][name] = {"scale": 0.0, "amax_history": []}
    with pytest.raises(CheckpointError, match=f"numerics state '{name}': scale must be a finite"):
        Trainer.resume(_write(tmp_path / "n.npz", arrays, meta))


def test_optimizer_state_of_another_dtype_or_step_count_is_refused(tmp_path, saved):
    arrays, meta = saved
    m = _first(arrays, "opt/", "/m")
    bad = {**arrays, m: arrays[m].astype(np.float16)}
    with pytest.raises(CheckpointError, match=f"{m[4:]} is float16 .*; expected float32"):
        Trainer.resume(_write(tmp_path / "d.npz", bad, meta))
    bad = {**arrays, "opt/t": np.array(7)}
    with pytest.raises(CheckpointError, match=r"opt/t .* is 7; the run made 2 updates"):
        Trainer.resume(_write(tmp_path / "t.npz", bad, meta))


def _old_names(key: str) -> str:
    """The name a norm parameter had before norms named their gain and bias weight and bias."""
    for new, old in ((".weight", ".gamma"), (".bias", ".beta")):
        for module in ("norm", "norm_out", "norm_f"):
            if f"{module}{new}" in key and (key.startswith(("param/", "opt/"))):
                return key.replace(f"{module}{new}", f"{module}{old}")
    return key


def test_a_checkpoint_with_the_old_norm_names_still_loads(tmp_path):
    cfg = dataclasses.replace(CFG, model=dataclasses.replace(MODEL, bias=True))
    t = Trainer(cfg)
    t.run(until=2)
    new = tmp_path / "new.npz"
    t.save(new)
    arrays, meta = ckpt.load(new)
    old = {_old_names(k): v for k, v in arrays.items()}
    renamed = [k for k in old if k not in arrays]
    assert {"param/norm_f.gamma", "param/norm_f.beta", "param/blocks.0.attn.norm.gamma",
            "opt/blocks.0.mlp.norm.beta/v"} <= set(renamed)
    path = _write(tmp_path / "old.npz", old, meta)
    loaded, _ = ckpt.load(path)
    assert list(loaded) == list(arrays)  # the new names, in the saved order
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k], v)
    resumed = Trainer.resume(path)
    for k, v in t.params.items():
        np.testing.assert_array_equal(resumed.params[k], v)
    t.run()
    resumed.run()
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in t.history]
    both = dict(old, **{"param/norm_f.weight": arrays["param/norm_f.weight"]})
    with pytest.raises(CheckpointError, match=r"both param/norm_f.gamma and param/norm_f.weight"):
        ckpt.load(_write(tmp_path / "both.npz", both, meta))
