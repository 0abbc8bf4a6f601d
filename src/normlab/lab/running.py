"""Measuring, judging and caching experiments: the registry of experiments, one measurement
in memory (:func:`evaluate`), one written with its figures and reused when cached
(:func:`run_experiment`), and a cached measurement judged again (:func:`rejudge`).

The top of the experiment machinery: it imports the experiments (by name, from the registry),
the contract, the configuration and the cache.
"""

from __future__ import annotations

import importlib
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .._files import jsonable, read_json, write_json
from . import cache, identity, register
from .cache import RESULT_FILE, read_cached
from .configs import (
    check_config,
    check_fields,
    config_dict,
    config_from_json,
    configure,
    notes_of,
    setting_of,
)
from .contract import KINDS, Progress, Result, RunContext, null_progress
from .sweep.executors import check_executor, shared_workers


def registry() -> dict[str, str]:
    """CLI name -> module path, in the report's order."""
    from .experiments import EXPERIMENTS

    return dict(EXPERIMENTS)


def load(name: str) -> ModuleType:
    """The experiment module for a CLI name (hyphens) or module name (underscores)."""
    reg = registry()
    key = str(name).replace("_", "-")
    if key not in reg:
        raise KeyError(f"no experiment named {name!r}; the lab has: {', '.join(reg)}")
    return importlib.import_module(reg[key])


def result_of(module: ModuleType, config: Any, data: dict[str, Any], size: str) -> Result:
    """The Result of a measurement: the card, the setting, the judgement of ``data`` (in its JSON
    form, so that a fresh and a cached measurement are judged alike)."""
    card = module.CARD
    data = jsonable(data)
    checks = list(module.judge(data, config))
    register.check_rows(module, checks, size)  # each row keeps to its record (lab.register)
    return Result(
        card=card, setting=setting_of(module, config, size),
        measured=module.headline(data, config), checks=checks,
        notes=notes_of(module), data=data, config=config_dict(config), size=size,
        cache_key=cache.cache_key(module, config),
        amendments=[a.to_json() for a in register.amendments(module)])


def evaluate(module: ModuleType, config: Any, ctx: RunContext | None = None,
             size: str = "quick") -> Result:
    """Measure and judge one configuration in memory (no files, no cache): the Result that
    ``normlab run`` would write, for notebooks and scripts. ``config`` from :func:`configure`."""
    data = module.measure(config, RunContext() if ctx is None else ctx)
    return result_of(module, config, data, size)


@dataclass
class Outcome:
    result: Result
    reused: bool  # True when a finished result was read from the cache
    out_dir: Path | None


def _write(result: Result, module: ModuleType, exp_dir: Path, plots: bool) -> None:
    exp_dir.mkdir(parents=True, exist_ok=True)
    if plots:
        result.figures = list(module.plot(result, exp_dir))
    write_json(exp_dir / RESULT_FILE, result.to_json(), what="result")


def run_experiment(name: str, *, size: str = "quick", seed: int | None = None,
                   overrides: dict[str, Any] | None = None,
                   out_dir: str | Path | None = None,
                   progress: Progress = null_progress, use_cache: bool = True,
                   plots: bool = True, executor: str = "pool") -> Outcome:
    """Measure one experiment (or reuse its cached result) and write ``result.json`` and figures.

    With ``out_dir``, the files go to ``out_dir/<name>/``; a finished result there with the same
    configuration and source is reused, so an interrupted report resumes where it stopped. The
    context's store is ``out_dir/<name>/sweep/<training hash>/``
    (:func:`normlab.lab.cache.training_hash`), so an interrupted training experiment keeps its
    finished runs, and so does one whose measuring or judging code changed since (stores of
    other training code, and with ``use_cache=False`` this one, are removed first).
    """
    check_executor(executor)
    module = load(name)
    config = configure(module, size, seed, overrides)
    key = cache.cache_key(module, config)
    exp_dir = None if out_dir is None else Path(out_dir) / module.CARD.name
    if exp_dir is not None and use_cache:
        cached = read_cached(exp_dir, key)
        if cached is not None:
            if plots and not all((exp_dir / f).is_file() for f in cached.figures):
                _write(cached, module, exp_dir, plots)  # a missing figure is redrawn
            return Outcome(cached, True, exp_dir)
    store = None
    if exp_dir is not None:
        store = exp_dir / "sweep" / cache.training_hash()
        if use_cache and store.parent.is_dir():  # a store of the same code under its old key
            identity.adopt_legacy_store(store)
        if store.parent.is_dir():  # stale stores: other training code, or no cache wanted
            for old in store.parent.iterdir():
                if old.is_dir() and (old != store or not use_cache):
                    shutil.rmtree(old)
    t0 = time.perf_counter()
    with shared_workers():  # an experiment's sweeps share one set of pool workers
        data = module.measure(config, RunContext(progress, executor, store))
    wall = time.perf_counter() - t0
    result = result_of(module, config, data, size)
    result.wall_s = wall
    if exp_dir is not None:
        _write(result, module, exp_dir, plots)
    return Outcome(result, False, exp_dir)


class DamagedResult(ValueError):
    """A cached result that cannot be judged again: not a result, a config its experiment's own
    checks refuse, or data its ``judge`` cannot read. The message names the file."""


def judge_cached(name: str, out_dir: str | Path) -> Result:
    """The cached measurement in ``out_dir/<name>/`` judged again in memory (nothing written),
    after validating it: its config through the experiment's own checks (:func:`check_fields`,
    :func:`check_config` without the budget), its data by the experiment's ``judge`` and
    ``headline`` reading it. FileNotFoundError when there is no ``result.json``; DamagedResult,
    naming the file, when one cannot be judged."""
    module = load(name)
    path = Path(out_dir) / module.CARD.name / RESULT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no cached result to judge again in {path.parent}")
    try:
        cached = Result.from_json(read_json(path, what="cached result"))
    except (ValueError, TypeError, KeyError) as exc:
        raise DamagedResult(f"{path}: not a readable result ({exc})") from None
    try:
        config = config_from_json(module.Config, cached.config)
        check_fields(config, module.Config())
        check_config(module, config, budget=False)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DamagedResult(f"{path}: its config is refused by {name}'s checks "
                            f"({type(exc).__name__}: {exc})") from None
    try:
        result = result_of(module, config, cached.data, cached.size)
    except Exception as exc:  # any failure to read the data: the schema is not the judge's
        raise DamagedResult(f"{path}: its data does not have {name}'s schema "
                            f"({type(exc).__name__}: {exc})") from None
    result.wall_s, result.figures = cached.wall_s, cached.figures
    return result


def rejudge(name: str, out_dir: str | Path) -> Outcome:
    """Judge the measurement cached in ``out_dir/<name>/`` again with the experiment's current
    ``judge`` and card, without measuring anything; rewrites ``result.json`` (figures kept).
    Raises FileNotFoundError when there is no cached result, DamagedResult (nothing written)
    when it cannot be judged (:func:`judge_cached`)."""
    result = judge_cached(name, out_dir)
    exp_dir = Path(out_dir) / load(name).CARD.name
    write_json(exp_dir / RESULT_FILE, result.to_json(), what="result")
    return Outcome(result, True, exp_dir)


# ---- the claim register as data -----------------------------------------------------------
def _config_value(module: ModuleType, size: str, name: str) -> Any:
    value: Any = configure(module, size)
    for part in name.split("."):
        value = getattr(value, part)
    return list(value) if isinstance(value, tuple) else value


def _seed_count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return len(value) if isinstance(value, list) else None


def experiment_register(module: ModuleType) -> dict[str, Any]:
    """One experiment's register: its records (each with its grid's values and its seed count
    at the quick and the full size, read from the configuration) and its amendments."""
    register.validate(module)
    gone = register.retired(module)
    out = []
    for r in register.records(module):
        row = r.to_json()
        row["retired"] = r.id in gone
        sizes: dict[str, Any] = {}
        for size in ("quick", "full"):
            values = {g: _config_value(module, size, g) for g in r.grid}
            seeds = _config_value(module, size, r.seeds) if r.seeds else None
            sizes[size] = {"grid": values, "seeds": _seed_count(seeds)}
        row["sizes"] = sizes
        out.append(row)
    return {"name": module.CARD.name, "records": out,
            "amendments": [a.to_json() for a in register.amendments(module)]}


def register_json(names: Iterable[str]) -> dict[str, Any]:
    """The register of the experiments ``names`` (CLI names): what register.json holds."""
    return {"schema": register.SCHEMA, "kinds": list(KINDS),
            "experiments": [experiment_register(load(n)) for n in names]}
