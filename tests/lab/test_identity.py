"""What identifies a stored training run (normlab.lab.identity): the code it executes, read as
syntax, over the modules a run imports; and the fields of its config that differ from their
defaults."""

import json
import shutil
import subprocess
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from normlab.lab import codebase, identity
from normlab.train.config import TrainConfig

PACKAGE = codebase.PACKAGE


def _copy(tmp_path: Path, name: str) -> Path:
    """A copy of the installed package's sources under tmp_path/name/normlab."""
    root = tmp_path / name / "normlab"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, (rel, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_prose_and_modules_no_run_imports_keep_the_training_hash(tmp_path):
    """A docstring or comment in what a run executes (train/), and any edit in a module no run
    imports (torch/), keep every stored run: the training hash is the same."""
    before = identity.training_hash(_copy(tmp_path, "before"))
    after = _copy(tmp_path, "after")
    _edit(after, "train/trainer.py", '"""', '"""A docstring edited. ')
    _edit(after, "train/config.py", "# ---- data", "# ---- data, a comment edited")
    _edit(after, "torch/emulate.py", '"""', '"""Edited. ')
    _edit(after, "torch/emulate.py", "from __future__ import annotations",
          "from __future__ import annotations\n\nEDITED = 1")
    _edit(after, "lab/experiments/warmup.py", "from __future__ import annotations",
          "from __future__ import annotations\n\nEDITED = 1")
    assert identity.training_hash(after) == before
    assert identity.legacy_training_hash(after) != identity.legacy_training_hash(
        PACKAGE)  # the earlier key was the bytes: it moved


def _bump_a_number(path: Path) -> None:
    """One character of arithmetic changed: the first number literal inside a function of the
    file, its last digit replaced."""
    import ast

    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    node = next(n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                for n in ast.walk(f) if isinstance(n, ast.Constant)
                and type(n.value) in (int, float))
    lines = text.splitlines(keepends=True)
    line = lines[node.lineno - 1]
    at = node.end_col_offset - 1
    digit = line[at]
    assert digit.isdigit(), line
    lines[node.lineno - 1] = line[:at] + str((int(digit) + 1) % 10) + line[at + 1:]
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("rel", ["kernels/norms.py", "kernels/rounding.py",
                                 "functional/layernorm.py", "precision/scaling.py",
                                 "lab/sweep/task.py"])
def test_one_character_of_what_a_run_computes_changes_the_training_hash(tmp_path, rel):
    """A kernel's arithmetic, the reference a run falls back to, the precision it trains in, the
    task that records it: one digit changed starts the store afresh."""
    before = identity.training_hash(_copy(tmp_path, "before"))
    after = _copy(tmp_path, "after")
    _bump_a_number(after / rel)
    assert identity.training_hash(after) != before


def test_the_training_modules_are_the_trainers_closure_and_not_the_report():
    mods = set(identity.training_modules())
    assert {"normlab.train.trainer", "normlab.kernels.rounding", "normlab.kernels.norms",
            "normlab.precision.policy", "normlab.lab.sweep.task",
            "normlab.lab.allocator"} <= mods
    assert not {"normlab.lab.results", "normlab.lab.framework", "normlab.lab.sweep.spec",
                "normlab.lab.experiments.warmup", "normlab.torch.emulate"} & mods


RUNTIME = """
import json, sys
from normlab.lab.sweep.task import run_points
from normlab.train.config import TrainConfig, default_model
base = dict(steps=2, warmup=1, eval_interval=2, eval_batches=1, batch_size=2)
models = [dict(n_layers=1, d_model=16, n_heads=2, seq_len=8, placement=p, norm=n, qk_norm=q,
               positions=pos, dropout=dr, activation=act)
          for p, n, q, pos, dr, act in [("pre", "layernorm", "none", "learned", 0.0, "gelu_tanh"),
                                        ("post", "rmsnorm", "rmsnorm", "rope", 0.1, "swiglu"),
                                        ("admin", "dyt", "layernorm", "learned", 0.0, "relu"),
                                        ("deepnorm", "none", "none", "learned", 0.0, "gelu")]]
configs = []
for i, m in enumerate(models):
    for prec in ("fp32", "amp_fp16", "fp8_hybrid", "mxfp8"):
        model = default_model().__class__(**{**default_model().__dict__, **m, "vocab_size": 16})
        configs.append(TrainConfig(model=model, precision=prec, seed=i, **base).to_dict())
out = run_points(configs[:2]) ; out2 = [run_points([c]) for c in configs[2:]]
bad = [p["reason"] for o in [out, *out2] for p in o["payloads"] if p["status"] == "failed"]
assert not bad, bad
print(json.dumps(sorted(m for m in sys.modules if m.startswith("normlab"))))
"""


def test_every_module_a_run_imports_is_in_the_training_hash():
    """The closure is read from the syntax tree; running a variety of training runs (norms,
    placements, QK-norm, RoPE, dropout, precisions, an ensemble) imports nothing outside it but
    what the sweep package the task sits in imports at its top (its dispatch, store and
    summaries: they record what runs compute)."""
    out = subprocess.run([sys.executable, "-c", RUNTIME], capture_output=True, text=True,
                         check=True, timeout=600)
    imported = set(json.loads(out.stdout.strip().splitlines()[-1]))
    sweep = codebase.closure(["normlab.lab.sweep"], kinds=("import",))
    missing = imported - set(identity.training_modules()) - sweep
    assert not missing, missing
    assert "normlab.lab.sweep.task" in identity.training_modules()


def test_the_defaults_every_run_id_is_relative_to_stay_as_they_were():
    """run ids leave out the fields at their defaults, so a default is part of what every id
    means: the committed record of the defaults may gain a field, never change one."""
    from normlab.models import GPTConfig
    from normlab.train.config import default_model

    pinned = json.loads((Path(__file__).parent / "data" / "config_defaults.json").read_text())
    for name, obj in (("TrainConfig", TrainConfig()), ("TrainConfig.model", default_model()),
                      ("GPTConfig", GPTConfig())):
        now = json.loads(json.dumps({f.name: getattr(obj, f.name) for f in fields(obj)
                                     if not is_dataclass(getattr(obj, f.name))}))
        changed = {k: (v, now[k]) for k, v in pinned[name].items() if k in now and now[k] != v}
        assert not changed, f"{name}: a default changed (was, now): {changed}"
        gone = sorted(set(pinned[name]) - set(now))
        assert not gone, f"{name}: fields removed: {gone}"
        new = sorted(set(now) - set(pinned[name]))
        assert not new, (f"{name}: new fields {new}: append them with their defaults to "
                         f"tests/lab/data/config_defaults.json")


def test_a_store_kept_under_the_earlier_key_of_the_same_code_is_adopted(tmp_path):
    sweep = tmp_path / "exp" / "sweep"
    old = sweep / identity.legacy_training_hash()
    (old / "runs" / "abc").mkdir(parents=True)
    new = sweep / identity.training_hash()
    assert identity.adopt_legacy_store(new)
    assert (new / "runs" / "abc").is_dir() and not old.exists()
    assert not identity.adopt_legacy_store(new)  # nothing left to adopt
    other = sweep / "0123456789abcdef"  # another code's store: never adopted
    other.mkdir()
    shutil.rmtree(new)
    assert not identity.adopt_legacy_store(new) and other.is_dir()


# ---- run ids ---------------------------------------------------------------------------------
def _pinned_configs() -> list[dict]:
    path = Path(__file__).parents[1] / "train" / "data" / "pinned_runs.json"
    return [case["config"] for case in json.loads(path.read_text()).values()]


def _lab_configs() -> list[TrainConfig]:
    """The training recipe of every training experiment, at each size."""
    from normlab.lab import framework

    out = []
    for name in framework.registry():
        module = framework.load(name)
        for size in ("tiny", "quick", "full"):
            config = framework.configure(module, size)
            out += [v for v in vars(config).values() if isinstance(v, TrainConfig)]
    return out


def test_adding_a_config_field_with_a_default_keeps_every_id():
    """A new knob (a field with a default, on the run or on the model) moves no stored run: the
    pinned runs' and every lab recipe's ids are the same under the extended configs."""
    from dataclasses import dataclass, replace

    from normlab.models import GPTConfig

    @dataclass(frozen=True)
    class WithKnob(TrainConfig):
        derf_shift: float = 0.25

    @dataclass(frozen=True)
    class ModelWithKnob(GPTConfig):
        derf_alpha: float = 0.5

    configs = [TrainConfig.from_dict(c) for c in _pinned_configs()] + _lab_configs()
    assert len(configs) > 40
    for c in configs:
        model = ModelWithKnob(**vars(c.model))
        extended = WithKnob(**{**vars(c), "model": model})
        assert identity.run_id(extended) == identity.run_id(c), c
        assert identity.run_id(replace(extended, derf_shift=0.5)) != identity.run_id(c)
        assert identity.run_id(replace(extended, model=replace(model, derf_alpha=1.0))) != \
            identity.run_id(c)


def test_a_run_id_is_the_hash_of_what_differs_from_the_defaults():
    assert identity.run_key(TrainConfig()) == {}
    c = TrainConfig(lr=3e-3).with_overrides({"model.n_layers": 6, "model.placement": "post"})
    assert identity.run_key(c) == {"lr": 3e-3, "model": {"n_layers": 6, "placement": "post"}}
    assert identity.run_id(c) == identity.run_id(TrainConfig.from_dict(c.to_dict()))
    assert len({identity.run_id(TrainConfig(seed=s)) for s in range(50)}) == 50
    assert identity.run_id(TrainConfig(probes=("logit_drift",))) != identity.run_id(
        TrainConfig())


def test_a_sweep_finds_runs_stored_under_their_earlier_ids(tmp_path, monkeypatch):
    """A store written under the earlier ids (a hash of the whole config dict) is read back, not
    trained again: each run's directory is renamed to its id now once its config.json is the
    point's; a directory whose config is another run's is left alone."""
    from _sweep_helpers import write_spec

    import normlab.train
    from normlab.lab.sweep import RunStore, SerialExecutor, run_sweep
    from normlab.lab.sweep.spec import load_spec

    points = load_spec(write_spec(tmp_path, steps=3)).points()
    first = run_sweep(points, tmp_path / "out", executor=SerialExecutor())
    runs = tmp_path / "out" / "runs"
    for p in points:  # as an earlier version left the store
        (runs / p.id).rename(runs / identity.legacy_run_id(p.config))
    stray = runs / identity.legacy_run_id(points[0].config.with_overrides({"seed": 99}))
    shutil.copytree(runs / identity.legacy_run_id(points[1].config), stray)
    trained = []
    monkeypatch.setattr(normlab.train, "train", lambda *a, **k: trained.append(a) or 1 / 0)
    monkeypatch.setattr(normlab.train, "train_ensemble",
                        lambda *a, **k: trained.append(a) or 1 / 0)
    again = run_sweep(points, tmp_path / "out", executor=SerialExecutor())
    assert not trained and all(r.reused and r.finished for r in again)
    assert [r.result for r in again] == [r.result for r in first]
    assert sorted(d.name for d in runs.iterdir()) == sorted([p.id for p in points] + [stray.name])
    events = RunStore(tmp_path / "out").events()
    assert sum(e["event"] == "rekeyed" for e in events) == len(points)
