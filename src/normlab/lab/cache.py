"""What a cached measurement is keyed by, and reading it back.

An experiment's result in ``OUT/<name>/result.json`` is keyed by :func:`cache_key` (its
configuration, its own source and notes, and the code of the whole package as it computes); its
training runs in ``OUT/<name>/sweep/<training hash>/`` by the code a training run executes
(:func:`training_hash`), so a change to what measures, judges or draws reads the finished runs
back.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from .._files import read_json
from . import codebase, identity
from .configs import config_dict, notes_of
from .contract import Result

RESULT_FILE = "result.json"


def cache_key(module: ModuleType, config: Any) -> str:
    """A hash of the configuration, the experiment's source and notes (as text: the card's
    words are in the result), and the code of the whole normlab package (:func:`package_hash`):
    a change to what any of it computes measures the experiment again; an edit to prose
    outside the experiment does not."""
    h = hashlib.sha256()
    h.update(json.dumps(config_dict(config), sort_keys=True).encode())
    h.update(inspect.getsource(module).encode())
    h.update(notes_of(module).encode())
    h.update(package_hash().encode())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def package_hash() -> str:
    """A hash of every module of the installed normlab package as it computes (each module's
    syntax tree without docstrings or comments: :func:`normlab.lab.codebase.code_hash`)."""
    return codebase.code_hash(codebase.modules())


def training_hash() -> str:
    """The key of an experiment's sweep store: :func:`normlab.lab.identity.training_hash`, the
    code a training run executes."""
    return identity.training_hash()


def read_cached(exp_dir: Path, key: str | None) -> Result | None:
    """The result in ``exp_dir`` (None when missing, damaged, or of another cache key; any key
    when ``key`` is None)."""
    path = exp_dir / RESULT_FILE
    if not path.is_file():
        return None
    try:
        result = Result.from_json(read_json(path, what="cached result"))
    except (ValueError, TypeError, KeyError):
        return None
    return result if key is None or result.cache_key == key else None
