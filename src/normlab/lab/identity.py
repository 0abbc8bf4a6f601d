"""What identifies a training run's stored result: the code it executes, and what it computes.

A sweep store keeps each finished run under ``<store>/runs/<run id>/``, and the lab keeps an
experiment's store under ``<out>/<name>/sweep/<training hash>/``; both keys are made here.

* :func:`training_hash`: a hash of the code a training run executes, over the modules it imports
  (``normlab.train`` and everything it imports, lazily or by name:
  :func:`normlab.lab.codebase.closure`; and :data:`TRAINING_LAB`), each read as its syntax tree
  without docstrings or comments (:func:`normlab.lab.codebase.code_hash`). An edit to prose, or
  to a module no run imports (``normlab.torch``, the report, the experiments' judging), keeps
  every stored run; a change of one character of what a run computes starts its store afresh.
* :func:`run_key` / :func:`run_id`: a run's config as the fields that differ from their defaults
  (the model's against the default model's), hashed. A field added with a default changes no
  existing id. A default of an existing field is part of what every id means, so
  ``tests/lab/test_identity.py`` pins the defaults: changing one is refused there, with the
  reason.

The keys before these (:func:`legacy_run_id`: a hash of the whole config dict;
:func:`legacy_training_hash`: the bytes of every file of the package outside ``normlab.lab``, and
the sweep's) are still computed, so that a store made under them is found again rather than
trained again (``RunStore.read`` renames a run's directory from its legacy id, its config read
back and compared; :func:`adopt_legacy_store` renames a store whose legacy hash is the hash of
the same files now).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from . import codebase

ID_LENGTH = 16  # hex digits of sha256 kept in a run id

#: The lab's part of a training run, taken alone: the sweep task that turns a config into a run
#: and its record, and the allocator it sets. The packages above them (``normlab.lab.sweep``'s
#: dispatch, store and summaries) record what runs compute and never change it: not a run's code.
TRAINING_LAB = ("normlab.lab.sweep.task", "normlab.lab.allocator")


def training_modules(root: Path = codebase.PACKAGE) -> list[str]:
    """The modules :func:`training_hash` covers, sorted: the closure of ``normlab.train`` (the
    trainer, and with it the model, the kernels and the precision it trains in: its imports of
    every kind, and their parent packages) and :data:`TRAINING_LAB`."""
    return sorted(codebase.closure(["normlab.train"], root) | set(TRAINING_LAB))


def training_hash(root: Path = codebase.PACKAGE) -> str:
    """A hash of the code a training run executes (:func:`training_modules`, each module's
    syntax tree without docstrings). An experiment's sweep store is keyed by it, not by its
    result's cache key: a change to what the lab measures, judges or draws measures the
    experiment again from the finished runs, and a change to the code that trains starts the
    store afresh."""
    return _training_hash(root.resolve())


@functools.lru_cache(maxsize=4)
def _training_hash(root: Path) -> str:
    return codebase.code_hash(training_modules(root), root)


# ---- run ids -------------------------------------------------------------------------------
def run_key(config: Any) -> dict[str, Any]:
    """The fields of ``config`` (a ``TrainConfig``) that differ from their defaults, as JSON
    values: the model's as ``{"model": {...}}`` against the config class's default model, nested
    dataclasses the same way (a field the default object lacks against its own default); ``{}``
    for a config of defaults only."""
    return _diff(config, type(config)())


def _diff(config: Any, default: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        d = getattr(default, f.name) if hasattr(default, f.name) else _field_default(f)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            inner = _diff(v, d if dataclasses.is_dataclass(d) else type(v)())
            if inner:
                out[f.name] = inner
        elif d is _MISSING or _json(v) != _json(d):
            out[f.name] = _jsonable(v)
    return out


_MISSING = object()


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _MISSING


def _jsonable(v: Any) -> Any:
    return list(map(_jsonable, v)) if isinstance(v, (tuple, list)) else v


def _json(v: Any) -> str:
    return json.dumps(_jsonable(v), sort_keys=True, separators=(",", ":"), allow_nan=False)


def run_id(config: Any) -> str:
    """A stable hash of :func:`run_key`: the same run gives the same id in any process, on any
    machine, from any spec, and a field added later with a default leaves it as it was."""
    text = _json(run_key(config))
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


def legacy_run_id(config: Any) -> str:
    """The id an earlier version gave the run: a hash of its whole ``to_dict()``."""
    text = json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


# ---- stores made under the earlier keys ------------------------------------------------------
#: The parts of ``normlab.lab`` the earlier training hash covered, by path in the package.
_LEGACY_LAB = ("lab/__init__.py", "lab/allocator.py", "lab/sweep/")


def legacy_training_hash(root: Path = codebase.PACKAGE) -> str:
    """The store key an earlier version used: the bytes of every ``*.py``, ``*.md`` and
    ``*.json`` file of the package outside ``normlab.lab`` (and of the sweep), by path."""
    files = sorted(p for pattern in ("*.py", "*.md", "*.json") for p in root.rglob(pattern))
    h = hashlib.sha256()
    for path in files:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("lab/") and not rel.startswith(_LEGACY_LAB):
            continue
        h.update(rel.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def adopt_legacy_store(store: Path, root: Path = codebase.PACKAGE) -> bool:
    """Make ``store`` (``<sweep folder>/<training hash>``) from a store beside it that was kept
    under the earlier key of the code that is here now (:func:`legacy_training_hash`): the same
    files trained it, so it is renamed, not trained again. Returns whether one was adopted (not
    when there is none, or ``store`` exists)."""
    old, new = store.parent / legacy_training_hash(root), store
    if old == new or not old.is_dir() or new.exists():
        return False
    os.replace(old, new)
    return True


__all__ = ["ID_LENGTH", "TRAINING_LAB", "adopt_legacy_store", "legacy_run_id",
           "legacy_training_hash", "run_id", "run_key", "training_hash", "training_modules"]
