"""The lab's framework: what an experiment returns, how its verdict is decided, how it is run and
cached.

An experiment is a module in ``normlab.lab.experiments`` with

* ``NAME`` (the CLI name, with hyphens), ``TITLE`` and ``CITATION``;
* ``Config``: a frozen dataclass, a comment per field, with a ``seed`` field; its defaults are the
  ``quick`` size, and ``SIZES = {"tiny": {...}, "quick": {}, "full": {...}}`` holds the overrides
  of each size (``tiny`` runs in seconds and is what the tests use);
* ``run(config, progress) -> Result``: pure and seeded, it returns data and writes nothing;
* ``plot(result, out_dir) -> list[str]``: writes PNG figures from ``result.data`` and returns
  their file names.

A :class:`Result` carries the claim with its citation, the published figure, our setting, what was
measured, and a list of :class:`Check` rows (claim, published, measured, rule, pass). The verdict
is computed from the checks by one stated rule, :data:`VERDICT_RULE`; no experiment sets its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

import numpy as np

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED)

VERDICT_RULE = (
    "reproduced when every counted check passes; partly reproduced when at least one passes but "
    "not all; not reproduced when none passes. Rows marked 'shown' (a documented difference from "
    "the paper, or a number with no published counterpart) are reported but not counted."
)

SIZES = ("tiny", "quick", "full")
RESULT_FILE = "result.json"


# ---- results ---------------------------------------------------------------------------------
@dataclass
class Check:
    """One row of the side-by-side table: a claim, the paper's number, ours, and the rule."""

    claim: str  # what is claimed, in one line
    published: str  # the paper's number or figure, as text ("-" when the paper gives none)
    measured: str  # our number(s), as text
    rule: str  # the pass rule, stated in terms of the numbers
    passed: bool | None  # True / False; None = shown but not counted (documented difference)
    source: str = ""  # citation and provenance tag, e.g. "Xiong et al. 2020, Lemma 2 [V]"
    note: str = ""  # a known difference from the paper, or what the number means

    @property
    def status(self) -> str:
        return "shown" if self.passed is None else ("pass" if self.passed else "FAIL")


def verdict_of(checks: list[Check]) -> str:
    """The verdict by :data:`VERDICT_RULE`."""
    counted = [c.passed for c in checks if c.passed is not None]
    if not counted:
        raise ValueError("a Result needs at least one counted check (passed True or False)")
    if all(counted):
        return REPRODUCED
    return PARTLY if any(counted) else NOT_REPRODUCED


@dataclass
class Result:
    """What an experiment returns: claims, numbers, checks, the data behind the plots."""

    name: str  # the experiment's CLI name
    title: str  # a human title
    claim: str  # the headline claim, one or two sentences
    citation: str  # the papers (and chapter) the claim comes from
    published: str  # the headline published number or figure, as text
    setting: str  # our setting: sizes, seeds, dtypes
    measured: str  # the headline measured numbers, as text
    checks: list[Check]  # the side-by-side rows; the verdict is computed from them
    explanation: str = ""  # a short paragraph for the report
    notes: list[str] = field(default_factory=list)  # known differences, knobs tried
    data: dict[str, Any] = field(default_factory=dict)  # numbers for the plots (JSON-able)
    config: dict[str, Any] = field(default_factory=dict)  # filled in by the runner
    size: str = ""  # tiny / quick / full, filled in by the runner
    wall_s: float = 0.0  # seconds run() took, filled in by the runner
    figures: list[str] = field(default_factory=list)  # PNG file names next to result.json
    cache_key: str = ""  # filled in by the runner
    verdict_rule: str = VERDICT_RULE

    @property
    def verdict(self) -> str:
        return verdict_of(self.checks)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["verdict"] = self.verdict
        return jsonable(d)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Result":
        d = dict(d)
        d.pop("verdict", None)
        d["checks"] = [Check(**c) for c in d.get("checks", [])]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def jsonable(obj: Any) -> Any:
    """Numpy scalars and arrays to Python numbers and lists; non-finite floats to strings."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else repr(v)  # 'inf', '-inf', 'nan'
    return obj


def num(v: Any) -> float:
    """A number stored by :func:`jsonable` back to a float ('inf' -> inf)."""
    return float(v)


def fmt(x: float, digits: int = 3) -> str:
    """A number for a table: 3 significant digits, scientific outside [1e-3, 1e5)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return repr(x) if not math.isfinite(x) else "0"
    if 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}g}"
    return f"{x:.{max(digits - 1, 0)}e}"


# ---- progress --------------------------------------------------------------------------------
class Progress(Protocol):
    def __call__(self, done: float, total: float, note: str = "") -> None: ...


def null_progress(done: float, total: float, note: str = "") -> None:
    """A progress callback that does nothing (the default for ``run``)."""


# ---- how training experiments run their sweeps ----------------------------------------------
EXECUTORS = ("pool", "pool:N", "serial", "ray:auto", "ray:local", "ray:HOST:PORT")


@dataclass(frozen=True)
class RunOptions:
    """How an experiment's training runs are executed. Never part of its result or cache key:
    every run is seeded, and each executor gives the same numbers."""

    executor: str = "pool"  # where sweeps run: pool (a worker per core), pool:N, serial, ray:ADDRESS
    store: Path | None = None  # root of the experiment's sweep stores (finished runs are reused
    #                            by a rerun); None: a temporary directory, removed afterwards

    def __post_init__(self) -> None:
        check_executor(self.executor)


def check_executor(spec: Any) -> str:
    """Refuse an executor name that is not one of :data:`EXECUTORS` (with N >= 1)."""
    ok = isinstance(spec, str) and (
        spec in ("pool", "serial")
        or (spec.startswith("pool:") and spec[5:].isdigit() and int(spec[5:]) >= 1)
        or (spec.startswith("ray:") and len(spec) > 4))
    if not ok:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {spec!r}")
    return spec


_OPTIONS: contextvars.ContextVar[RunOptions] = contextvars.ContextVar(
    "normlab_run_options", default=RunOptions())


def run_options() -> RunOptions:
    """The options of the experiment running now (the defaults outside :func:`run_experiment`)."""
    return _OPTIONS.get()


@contextlib.contextmanager
def using(options: RunOptions) -> Iterator[RunOptions]:
    """Run the experiments called inside the block with ``options``."""
    token = _OPTIONS.set(options)
    try:
        yield options
    finally:
        _OPTIONS.reset(token)


# ---- the registry ----------------------------------------------------------------------------
def registry() -> dict[str, str]:
    """CLI name -> module path, in the report's order."""
    from .experiments import EXPERIMENTS

    return dict(EXPERIMENTS)


def load(name: str):
    """The experiment module for a CLI name (hyphens) or module name (underscores)."""
    reg = registry()
    key = name.replace("_", "-")
    if key not in reg:
        raise KeyError(f"no experiment named {name!r}; the lab has: {', '.join(reg)}")
    return importlib.import_module(reg[key])


def configure(module, size: str = "quick", seed: int | None = None, **overrides: Any):
    """The module's Config at a size (``tiny``, ``quick``, ``full``), with a seed and overrides."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}; got {size!r}")
    values = dict(module.SIZES.get(size, {}))
    if seed is not None:
        values["seed"] = int(seed)
    values.update(overrides)
    return dataclasses.replace(module.Config(), **values)


def cache_key(module, config) -> str:
    """A hash of the configuration, the experiment's source and the lab's shared set-ups
    (``experiments/_*.py``): editing either re-runs it. (After changing normlab's core, rerun
    with ``--no-cache``.)"""
    from .. import __version__

    h = hashlib.sha256()
    h.update(json.dumps(jsonable(dataclasses.asdict(config)), sort_keys=True).encode())
    h.update(inspect.getsource(module).encode())
    h.update(__version__.encode())
    for helper in sorted(Path(__file__).with_name("experiments").glob("_*.py")):
        h.update(helper.read_bytes())
    return h.hexdigest()[:16]


# ---- running and caching ---------------------------------------------------------------------
@dataclass
class Outcome:
    result: Result
    reused: bool  # True when a finished result was read from the cache
    out_dir: Path


def _write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, allow_nan=False))
    os.replace(tmp, path)  # a result file is either complete or absent


def read_cached(exp_dir: Path, key: str) -> Result | None:
    path = exp_dir / RESULT_FILE
    if not path.is_file():
        return None
    try:
        result = Result.from_json(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError):
        return None
    return result if result.cache_key == key else None


def run_experiment(
    name: str,
    *,
    size: str = "quick",
    seed: int | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: Progress = null_progress,
    use_cache: bool = True,
    plots: bool = True,
    executor: str = "pool",
) -> Outcome:
    """Run one experiment (or reuse its cached result) and write ``result.json`` and figures.

    With ``out_dir``, the files go to ``out_dir/<name>/``; a finished result there with the same
    configuration and source is reused, so an interrupted report resumes where it stopped.
    ``executor`` (see :class:`RunOptions`) runs a training experiment's sweep; its store is
    ``out_dir/<name>/sweep/<cache key>/``, so an interrupted experiment keeps its finished runs
    (stores of other configurations, and with ``use_cache=False`` this one, are removed first).
    """
    check_executor(executor)
    module = load(name)
    config = configure(module, size, seed)
    key = cache_key(module, config)
    exp_dir = None if out_dir is None else Path(out_dir) / module.NAME
    if exp_dir is not None and use_cache:
        cached = read_cached(exp_dir, key)
        if cached is not None:
            if plots and not all((exp_dir / f).is_file() for f in cached.figures):
                cached.figures = list(module.plot(cached, exp_dir))
                _write_json_atomic(exp_dir / RESULT_FILE, cached.to_json())
            return Outcome(cached, True, exp_dir)
    store = None
    if exp_dir is not None:
        store = exp_dir / "sweep" / key
        if store.parent.is_dir():  # stale stores: other configurations, or no cache wanted
            for old in store.parent.iterdir():
                if old.is_dir() and (old != store or not use_cache):
                    shutil.rmtree(old)
    t0 = time.perf_counter()
    with using(RunOptions(executor, store)):
        result = module.run(config, progress)
    result.wall_s = time.perf_counter() - t0
    result.data = jsonable(result.data)  # the same types fresh or read back from the cache
    result.config = jsonable(dataclasses.asdict(config))
    result.size = size
    result.cache_key = key
    if exp_dir is not None:
        exp_dir.mkdir(parents=True, exist_ok=True)
        if plots:
            result.figures = list(module.plot(result, exp_dir))
        _write_json_atomic(exp_dir / RESULT_FILE, result.to_json())
    return Outcome(result, False, exp_dir)



def add_size_arguments(p) -> None:
    """``--quick`` (the default) / ``--full`` / ``--tiny``, stored as ``args.size``: the size
    flags of ``normlab run`` and ``normlab report``."""
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="the quick sizes (default: minutes on a laptop)")
    size.add_argument("--full", dest="size", action="store_const", const="full",
                      help="the full sizes (closer to the papers' settings; much longer)")
    size.add_argument("--tiny", dest="size", action="store_const", const="tiny",
                      help="the tiny sizes (seconds; a smoke test, numbers are noisy)")
    p.set_defaults(size="quick")
