"""``normlab train`` and ``normlab sweep`` fed wrong types, non-finite and extreme values for every
TrainConfig / GPTConfig field: exit status 2 with the flag (or field) named, or a run that ends
(0, or 1 when it diverged); never a traceback, never a hang, never a changed input file.

The memory budget is lowered to a few MB and every run capped at 2 steps, so that whatever is not
refused is cheap and what is too big is refused before any work."""

import dataclasses
import math
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normlab.lab.cli import main
from normlab.lab.sweep.spec import FIELDS
from normlab.models import GPTConfig
from normlab.train import TrainConfig, Trainer, budget

TINY = ["--depth", "1", "--width", "16", "--heads", "2", "--seq", "8", "--batch", "2",
        "--steps", "2", "--warmup", "1", "--eval-interval", "2", "--eval-batches", "1", "--quiet"]
BOOLS = {name for name, f in FIELDS.items() if f.kind is bool}
TEXT = st.sampled_from(["abc", "", "nan", "inf", "-inf", "1e309", "-1", "0", "1", "0.5", "2", "1e9",
                        "1000000000", "-0", "none", "None", "true", "9" * 40, "1e-320", "0x10",
                        " 3", "1_000", "3.0", "-1e-9", "4096", "65", "rope", "rmsnorm", "swiglu",
                        "copy", "pydoc", "file", "sgd", "inverse_sqrt", "amp_bf16", "{}"])
VALUES = st.one_of(TEXT, st.integers(-2**70, 2**70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))


def flag_of(field: str) -> str:
    return "--" + field.removeprefix("model.").replace("_", "-")


@pytest.fixture
def cheap(monkeypatch):
    """A few MB of memory for the budget, at most 2 steps per run, and an alarm against hangs."""
    monkeypatch.setattr(budget, "available_memory", lambda: 8 * 2**20)
    real_run = Trainer.run

    def short_run(self, until=None, **kw):
        return real_run(self, 2 if until is None else min(until, 2), **kw)

    monkeypatch.setattr(Trainer, "run", short_run)

    def hang(signum, frame):
        raise TimeoutError("the command did not end within 60 s")

    previous = signal.signal(signal.SIGALRM, hang)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _call(argv, capsys):
    signal.alarm(60)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: a value of the wrong type
        code = exc.code
    finally:
        signal.alarm(0)
    return code, capsys.readouterr()


def _names(field: str) -> tuple[str, ...]:
    bare = field.removeprefix("model.")
    return (flag_of(field), bare)


FIELD_NAMES = sorted(FIELDS)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(FIELD_NAMES), value=VALUES, data=st.data())
def test_train_flags(tmp_path_factory, cheap, capsys, field, value, data):
    d = tmp_path_factory.mktemp("train")
    corpus = d / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    before = corpus.read_bytes()
    flag = flag_of(field)
    if field in BOOLS:
        args = [data.draw(st.sampled_from([flag, "--no-" + flag[2:]]))]
    elif field == "data_path":
        args = ["--data", "file", flag, data.draw(st.sampled_from([str(corpus), str(d), value]))]
    else:
        args = [flag, value]
    targets = [d / "run.json", d] + ([corpus] if field == "data_path" else [])  # corpus: an input
    json_target = data.draw(st.sampled_from(targets))
    code, out = _call(["train", *TINY, *args, "--json", str(json_target)], capsys)
    assert "Traceback" not in out.err, out.err
    assert corpus.read_bytes() == before
    if code == 2:
        message = out.err.strip().splitlines()[-1]
        named = _names(field) + (("--json",) if json_target != d / "run.json" else ())
        assert any(n in message for n in named) or "argument " + flag in message, message
    else:
        assert code in (0, 1), out.err
        assert out.out.strip().splitlines()[-1].startswith("validation loss")


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ("nan" if math.isnan(value)
                else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


TOML_VALUES = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.sampled_from(["abc", "", "none", "1e9", "rope", "file", "copy", "sgd", "amp_fp16"]),
    st.sampled_from([0, -1, 10**9, 10**12, 2**62]), st.lists(st.integers(-3, 3), max_size=2))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(FIELD_NAMES), value=TOML_VALUES,
       where=st.sampled_from(["base", "grid"]))
def test_sweep_fields(tmp_path_factory, cheap, capsys, monkeypatch, field, value, where):
    from normlab.lab.sweep import SerialExecutor, executors

    monkeypatch.setattr(executors, "ProcessPool", lambda workers=None: SerialExecutor())
    d = tmp_path_factory.mktemp("sweep")
    base = ("[base]\nsteps = 2\nwarmup = 1\nbatch_size = 2\neval_interval = 2\neval_batches = 1\n"
            "[base.model]\nn_layers = 1\nd_model = 16\nn_heads = 2\nseq_len = 8\n")
    key = f'"{field}"' if "." in field else field
    if where == "base":
        body = f"seeds = [0, 1]\n[base]\n{key} = {_toml(value)}\n" + base.replace("[base]\n", "")
    else:
        body = base + f"[grid]\n{key} = [{_toml(value)}]\n"
    spec = d / "spec.toml"
    spec.write_text(body)
    before = spec.read_bytes()
    code, out = _call(["sweep", str(spec), "--out", str(d / "out"), "--quiet"], capsys)
    assert "Traceback" not in out.err, out.err
    assert spec.read_bytes() == before
    if code == 2:
        message = out.err.strip().splitlines()[-1]
        assert message.startswith("normlab sweep: ")
        # the field by name, the spec's syntax, or a run the memory budget cannot hold
        assert (field.removeprefix("model.") in message or "TOML" in message
                or "of memory" in message), message
    else:
        assert code == 0, out.out + out.err


PY_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**80, 2**80),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                      st.lists(st.integers(), max_size=2),
                      st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
                      st.just(object()), st.just(b"x"), st.just(1j))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELD_NAMES), value=PY_VALUES)
def test_config_fields_refuse_with_a_value_or_type_error_naming_them(field, value):
    base = TrainConfig(model=GPTConfig(vocab_size=16, seq_len=8, n_layers=1, d_model=16, n_heads=2))
    try:
        if field.startswith("model."):
            cfg = dataclasses.replace(base,
                                      model=dataclasses.replace(base.model, **{field[6:]: value}))
        else:
            cfg = dataclasses.replace(base, **{field: value})
    except (TypeError, ValueError) as exc:
        message = str(exc)
        assert field.removeprefix("model.") in message or "data_path" in message, message
        return
    budget.estimate(cfg)  # whatever is accepted can be sized


# ---- the file flags of normlab train: outputs, inputs and checkpoints, each naming any path ----
PATHS = ("new", "other", "corpus", "corpus-link", "good", "damaged", "npy", "dir", "fifo",
         "/dev/null", "nodir", "policy")
FILE_FLAGS = ("--json", "--checkpoint", "--resume", "--data-path", "--precision")


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    """A real checkpoint of the TINY run after 1 of its 2 steps (its path)."""
    path = tmp_path_factory.mktemp("good") / "good.npz"
    assert main(["train", *TINY, "--steps", "1", "--checkpoint", str(path)]) == 0
    return path


def _layout(d, good) -> dict:
    import os

    import numpy as np

    paths = {"new": d / "new.out", "other": d / "other.txt", "corpus": d / "corpus.txt",
             "corpus-link": d / "link.txt", "good": d / "good.npz", "damaged": d / "damaged.npz",
             "npy": d / "x.npy", "dir": d / "adir", "fifo": d / "fifo", "/dev/null": "/dev/null",
             "nodir": d / "nodir" / "x.out", "policy": d / "policy.json"}
    paths["other"].write_text("another file")
    paths["corpus"].write_text("the quick brown fox jumps over the lazy dog. " * 20)
    paths["corpus-link"].symlink_to(paths["corpus"])
    paths["good"].write_bytes(good.read_bytes())
    paths["damaged"].write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    np.save(paths["npy"], np.zeros(3))
    paths["dir"].mkdir()
    os.mkfifo(paths["fifo"])
    paths["policy"].write_text('{"name": "p", "compute": "bfloat16"}')
    return paths


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(flags=st.dictionaries(st.sampled_from(FILE_FLAGS), st.sampled_from(PATHS), min_size=1,
                             max_size=3),
       overwrite=st.booleans(), every=st.sampled_from([None, "0", "1", "x"]))
def test_train_file_flags(tmp_path_factory, cheap, capsys, good_checkpoint, flags, overwrite,
                          every):
    d = tmp_path_factory.mktemp("files")
    paths = _layout(d, good_checkpoint)
    files = {k: p for k, p in paths.items()
             if k not in ("dir", "fifo", "/dev/null", "nodir", "new")}
    before = {k: p.read_bytes() for k, p in files.items()}
    argv = ["train", *TINY]
    for flag, where in flags.items():
        argv += [flag, str(paths[where])]
    argv += ((["--overwrite"] if overwrite else [])
             + ([] if every is None else ["--checkpoint-every", every]))
    code, out = _call(argv, capsys)
    assert "Traceback" not in out.err, out.err
    if code == 2:
        message = out.err.strip().splitlines()[-1]
        assert message.startswith("normlab") and ": error: " in message, message
        assert any(f in message for f in (*flags, "--checkpoint-every", "argument")), message
    else:
        assert code in (0, 1), out.err
    # what may change (links followed): the --json target, and the --checkpoint target when it
    # is replaced with --overwrite or is the file being resumed
    ckpt = flags.get("--checkpoint")
    may = {flags.get("--json")} if code != 2 else set()
    if code != 2 and ckpt is not None and (overwrite or flags.get("--resume") == ckpt):
        may.add(ckpt)
    may = {Path(paths[k]).resolve() for k in may if k is not None}
    for k, data in before.items():
        if files[k].resolve() not in may:
            assert files[k].read_bytes() == data, (k, argv, out.err)
    assert paths["corpus-link"].is_symlink()
