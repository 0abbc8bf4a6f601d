"""Sweep specs: a TOML file that names a base config and what to vary, read and checked whole
before anything runs.

A spec has four parts, each optional but not all empty::

    seeds = [0, 1, 2]              # repeats: the training seed of every point (default: base's)

    [base]                         # any TrainConfig field; the rest keep TrainConfig's defaults
    steps = 300
    warmup = 30
    [base.model]                   # any GPTConfig field (the model nested in the config)
    n_layers = 4
    d_model = 64

    [grid]                         # field -> list of values; the Cartesian product of the lists
    lr = [1e-3, 3e-3, 1e-2]
    model.placement = ["pre", "post"]     # model fields dotted (or in a [grid.model] table)

    [random]                       # a random search, crossed with the grid
    samples = 8                    # how many draws
    seed = 0                       # the sampler's seed (training seeds come from `seeds`)
    warmup = [0, 30, 100]                  # a list: uniform choice among its values
    lr = { log_uniform = [1e-4, 1e-1] }    # also uniform = [lo, hi], int_uniform = [lo, hi]

The points are grid x random draws x seeds, the grid's first field varying slowest and the seed
fastest. TOML has no null: an optional field (``grad_clip``, ``model.d_ff``, ...) takes the
string ``"none"``. Integers are accepted where a float is expected (``lr = 1`` is ``1.0``) and
stored as floats, so ``1`` and ``1.0`` are the same point.

Every value is checked for its type (by the dataclass field's annotation) and then through
``TrainConfig`` / ``GPTConfig`` construction: each grid value and distribution bound on the base
config alone, then every point. A bad spec raises :class:`SpecError`, whose message starts with
where the value stands (``grid.model.n_heads[1]``) and whose ``field`` names the field. A field
that none of the points reads (``markov_order`` where every point trains on a corpus, ``momentum``
where every point uses AdamW: ``train.config.READ_ONLY_WITH``) is refused, as it would be ignored.

A spec is bounded before anything is listed: the number of points (grid cells x random draws x
seeds, counted without listing them, :attr:`SweepSpec.size`) may be at most ``max_points``
(:data:`MAX_POINTS` unless the caller lifts it; ``normlab sweep --max-points``), and a
``data_path`` must name an existing regular text file (of at most the trainer's size cap), checked
once per distinct path. The spec file itself must be a regular file of at most
:data:`MAX_SPEC_BYTES` (a FIFO or device is refused unread).

A point's identity is a stable hash of the fields of its config that differ from their defaults
(:func:`run_id`, :func:`normlab.lab.identity.run_id`): rerunning the same spec maps every point to
the same store directory, editing a spec leaves the points that did not change where they were,
and a field added to the config later (with a default) moves no point.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...models import GPTConfig
from ...train.config import TrainConfig
from .. import identity

SPEC_KEYS = ("seeds", "base", "grid", "random")
RANDOM_KEYS = ("samples", "seed")  # the search's own keys in [random]; the rest are fields
DISTRIBUTIONS = ("choice", "uniform", "log_uniform", "int_uniform")
MAX_POINTS = 1000  # points a spec may have unless the caller lifts the cap
MAX_SPEC_BYTES = 2**20  # a spec file's size cap


class SpecError(ValueError):
    """A sweep spec that cannot be run; ``field`` is the field (or spec key) at fault."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


# ---- fields ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Field:
    name: str  # "lr", "model.placement"
    kind: type  # bool, int, float or str
    optional: bool  # None allowed (written "none" in TOML)


def _fields() -> dict[str, _Field]:
    """Every sweepable field: TrainConfig's, and GPTConfig's as ``model.<name>``."""
    out: dict[str, _Field] = {}
    for cls, prefix in ((TrainConfig, ""), (GPTConfig, "model.")):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "model" and cls is TrainConfig:
                continue
            args = typing.get_args(hints[f.name])
            optional = type(None) in args
            kind = next((t for t in args if t is not type(None)), hints[f.name])
            out[prefix + f.name] = _Field(prefix + f.name, kind, optional)
    return out


FIELDS: dict[str, _Field] = _fields()
_KIND_TEXT = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def short_name(name: str) -> str:
    """A field's name for labels: ``model.placement`` -> ``placement``."""
    return name.removeprefix("model.")


def _unknown(name: str, where: str) -> SpecError:
    close = difflib.get_close_matches(name, list(FIELDS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return SpecError(f"{where}: unknown field {name!r}{hint}; a spec sets TrainConfig fields and "
                     f"model.<GPTConfig field>", field=name)


def _coerce(name: str, value: Any, where: str) -> Any:
    """``value`` for field ``name`` in its Python type, or a SpecError naming it."""
    f = FIELDS.get(name)
    if f is None:
        raise _unknown(name, where)
    if f.optional and isinstance(value, str) and value.lower() == "none":
        return None
    if typing.get_origin(f.kind) is tuple:  # e.g. model.window_layers: a list of integers
        if not (isinstance(value, (list, tuple))
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            raise SpecError(f"{where}: {name} must be a list of integers"
                            + (' or "none"' if f.optional else "") + f"; got {value!r}", field=name)
        return tuple(value)
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str)}[f.kind]
    if not ok(value):
        what = _KIND_TEXT[f.kind] + (' or "none"' if f.optional else "")
        raise SpecError(f"{where}: {name} must be {what}; got {value!r} ({type(value).__name__})",
                        field=name)
    if f.kind is float:
        value = float(value)
        if not math.isfinite(value):
            raise SpecError(f"{where}: {name} must be finite; got {value!r}", field=name)
    return value


def _flatten(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``{"lr": v, "model": {"norm": w}}`` -> ``{"lr": v, "model.norm": w}`` (keys checked)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key == "model" and isinstance(value, Mapping):
            for k, v in value.items():
                out["model." + k] = v
        elif key == "model":
            raise SpecError(f"{where}.model: give model fields as model.<name> (a table); "
                            f"got {value!r}", field="model")
        else:
            out[key] = value
    for key in out:
        if key not in FIELDS:
            raise _unknown(key, where)
    return out


def _config(values: Mapping[str, Any]) -> TrainConfig:
    """The TrainConfig of TrainConfig's defaults with ``values`` (flat names) set."""
    train = {k: v for k, v in values.items() if not k.startswith("model.")}
    model = {k[len("model."):]: v for k, v in values.items() if k.startswith("model.")}
    base = TrainConfig()
    return dataclasses.replace(base, model=dataclasses.replace(base.model, **model), **train)


def _checked(values: Mapping[str, Any], where: str, name: str | None) -> TrainConfig:
    try:
        return _config(values)
    except (TypeError, ValueError) as exc:
        text = str(exc).removeprefix("config: ")
        raise SpecError(f"{where}: {text}", field=name) from None


# ---- random search ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Distribution:
    """One field's distribution in a random search."""

    kind: str  # choice, uniform, log_uniform, int_uniform
    values: tuple  # choice: the values; the others: (lo, hi), int_uniform inclusive

    def sample(self, rng: Any) -> Any:
        """One draw with ``rng`` (a ``np.random.Generator``)."""
        if self.kind == "choice":
            return self.values[int(rng.integers(len(self.values)))]
        lo, hi = self.values
        if self.kind == "uniform":
            return float(rng.uniform(lo, hi))
        if self.kind == "log_uniform":
            return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        return int(rng.integers(lo, hi + 1))


@dataclass(frozen=True)
class RandomSearch:
    """``samples`` draws of every field's distribution, from ``np.random.default_rng(seed)``."""

    samples: int
    seed: int
    fields: dict[str, Distribution]

    def draws(self) -> list[dict[str, Any]]:
        import numpy as np

        rng = np.random.default_rng(self.seed)
        names = sorted(self.fields)  # a fixed order: the draws do not depend on the file's order
        return [{n: self.fields[n].sample(rng) for n in names} for _ in range(self.samples)]


def _distribution(name: str, spec: Any, where: str) -> Distribution:
    f = FIELDS[name]
    if isinstance(spec, list):
        spec = {"choice": spec}
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        raise SpecError(f"{where}: a random field is a list of values or one of "
                        f"{{ {' | '.join(d + ' = [...]' for d in DISTRIBUTIONS)} }}; got {spec!r}",
                        field=name)
    (kind, values), = spec.items()
    if not isinstance(values, list) or not values:
        raise SpecError(f"{where}.{kind}: needs a non-empty list; got {values!r}", field=name)
    if kind == "choice":
        return Distribution(kind, tuple(_coerce(name, v, f"{where}[{i}]")
                                        for i, v in enumerate(values)))
    if len(values) != 2:
        raise SpecError(f"{where}.{kind}: needs [lo, hi]; got {values!r}", field=name)
    if kind == "int_uniform":
        if f.kind not in (int, float):
            raise SpecError(f"{where}: {name} is not numeric; use a list of values", field=name)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise SpecError(f"{where}.{kind}: bounds must be integers; got {values!r}", field=name)
    elif f.kind is not float:
        raise SpecError(f"{where}: {name} is {_KIND_TEXT[f.kind]} field; {kind} draws real numbers "
                        f"(use int_uniform or a list of values)", field=name)
    lo, hi = (_coerce(name, v, f"{where}.{kind}") for v in values)
    if not lo < hi:
        raise SpecError(f"{where}.{kind}: needs lo < hi; got {values!r}", field=name)
    if kind == "log_uniform" and lo <= 0:
        raise SpecError(f"{where}.{kind}: needs 0 < lo; got {values!r}", field=name)
    if kind == "int_uniform" and f.kind is float:
        return Distribution(kind, (int(lo), int(hi)))
    return Distribution(kind, (lo, hi))


# ---- the spec --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One run of a sweep: its identity, its config, and the values the spec varied for it."""

    id: str  # run_id(config): the name of its store directory
    config: TrainConfig
    varied: dict[str, Any] = field(default_factory=dict)  # field -> value, in the spec's order


def run_id(config: TrainConfig) -> str:
    """A stable hash of the config's fields that differ from their defaults
    (:func:`normlab.lab.identity.run_id`): the same run gives the same id in any process, on any
    machine, from any spec, before and after a field is added to the config."""
    return identity.run_id(config)


def make_points(configs: Iterable[TrainConfig | Point]) -> list[Point]:
    """Points for configs given directly (the Python API); duplicates are dropped, order kept.
    ``varied`` is the fields whose values differ across the configs."""
    items = list(configs)
    for i, c in enumerate(items):
        if not isinstance(c, (TrainConfig, Point)):
            raise TypeError(f"points[{i}] must be a TrainConfig or a Point; got {type(c).__name__}")
    if all(isinstance(c, Point) for c in items):
        return _unique(items)  # type: ignore[arg-type]  # all() has checked each is a Point
    cfgs = [c.config if isinstance(c, Point) else c for c in items]
    flat = [_flat(c) for c in cfgs]
    names = [n for n in FIELDS if len({json.dumps(f[n]) for f in flat}) > 1]
    return _unique([Point(run_id(c), c, {n: f[n] for n in names}) for c, f in zip(cfgs, flat)])


def _flat(config: TrainConfig) -> dict[str, Any]:
    d = config.to_dict()
    d.setdefault("probes", list(config.probes))  # to_dict leaves out the default probes
    model = d.pop("model")
    return {**d, **{"model." + k: v for k, v in model.items()}}


def _unique(points: list[Point]) -> list[Point]:
    seen: set[str] = set()
    out = []
    for p in points:
        if p.id not in seen:
            seen.add(p.id)
            out.append(p)
    return out


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: the base values, the grid, the random search and the seeds."""

    base: dict[str, Any]  # flat field -> value (model fields as model.<name>)
    grid: dict[str, tuple]  # flat field -> values, in the spec's order
    random: RandomSearch | None
    seeds: tuple[int, ...] | None  # None: every point keeps base's seed
    source: str = "<spec>"  # the file it came from

    @property
    def size(self) -> int:
        """How many points the spec lists before duplicates are dropped (computed, not listed)."""
        n = math.prod(len(v) for v in self.grid.values())
        n *= self.random.samples if self.random else 1
        return n * (len(self.seeds) if self.seeds is not None else 1)

    def points(self) -> list[Point]:
        """Every point, checked; duplicates (equal configs) appear once."""
        names = list(self.grid)
        cells = list(itertools.product(*self.grid.values())) if names else [()]
        draws = ([{k: _coerce(k, v, f"{self.source}: random.{k}") for k, v in d.items()}
                  for d in self.random.draws()] if self.random else [{}])  # int draws of floats
        seeds = self.seeds if self.seeds is not None else (None,)
        out = []
        for cell in cells:
            for draw in draws:
                for seed in seeds:
                    varied = {**dict(zip(names, cell)), **draw}
                    if seed is not None:
                        varied["seed"] = seed
                    where = f"{self.source}: point " + ", ".join(
                        f"{k}={v!r}" for k, v in varied.items())
                    config = _checked({**self.base, **varied}, where, None)
                    out.append(Point(run_id(config), config, varied))
        return _unique(out)


def _check_data_paths(base: Mapping[str, Any], grid: Mapping[str, tuple],
                      random: RandomSearch | None, source: str) -> None:
    """Every ``data_path`` the spec names must be an existing regular text file (of bounded
    size): checked once each, before any point is listed or dispatched."""
    from ..._files import check_input_file
    from ...train.data import MAX_TEXT_BYTES

    paths = {base.get("data_path")} | set(grid.get("data_path", ()))
    if random is not None and "data_path" in random.fields:
        paths |= set(random.fields["data_path"].values)
    for path in sorted(p for p in paths if p is not None):
        try:
            check_input_file(path, what="data_path", max_bytes=MAX_TEXT_BYTES)
        except ValueError as exc:
            raise SpecError(f"{source}: {exc}", field="data_path") from None


def _check_unread(base: Mapping[str, Any], grid: Mapping[str, tuple],
                  random: RandomSearch | None, source: str) -> None:
    """Refuse a field the spec sets that none of its points reads (``train.config.READ_ONLY_WITH``:
    ``markov_order`` where every point trains on a corpus, ``momentum`` where every point uses
    AdamW, ...): it would be silently ignored."""
    from ...train.config import READ_ONLY_WITH, unread_fields

    defaults = TrainConfig()
    deciders = {}
    for name in {rule.decider for rule in READ_ONLY_WITH.values()}:
        values = {base.get(name, getattr(defaults, name))}
        if name in grid:
            values = set(grid[name])
        elif random is not None and name in random.fields:
            values = set(random.fields[name].values)
        deciders[name] = values
    given = {**{n: "base" for n in base}, **{n: "grid" for n in grid},
             **{n: "random" for n in (random.fields if random is not None else {})}}
    for name, rule in unread_fields(given, deciders):
        taken = ", ".join(repr(v) for v in sorted(deciders[rule.decider]))
        why = f" ({rule.note})" if rule.note else ""
        raise SpecError(f"{source}: {given[name]}.{name} is read only with {rule.decider} = "
                        f"{' or '.join(repr(v) for v in rule.values)}; the spec's points have "
                        f"{rule.decider} = {taken}{why}: drop {name}", field=name)


def parse_spec(data: Mapping[str, Any], source: str = "<spec>", *,
               max_points: int | None = MAX_POINTS) -> SweepSpec:
    """A checked :class:`SweepSpec` from a parsed TOML document (a dict), or a SpecError.
    ``max_points``: the most points the spec may have (None: no cap)."""
    if max_points is not None and (isinstance(max_points, bool) or not isinstance(max_points, int)
                                   or max_points < 1):
        raise ValueError(f"max_points must be an integer >= 1 or None; got {max_points!r}")
    _check_keys(data, source)
    # base: every value typed, then the whole base config constructed
    base = {n: _coerce(n, v, f"{source}: base.{n}")
            for n, v in _flatten(data.get("base", {}), f"{source}: base").items()}
    _checked(base, f"{source}: base", None)
    seeds = _parse_seeds(data["seeds"], base, source) if "seeds" in data else None
    grid = _parse_grid(data["grid"], base, source) if "grid" in data else {}
    if "seed" in grid and seeds is not None:
        raise SpecError(f"{source}: the seed is swept twice (seeds and grid.seed); keep one",
                        field="seed")
    random = _parse_random(data["random"], base, grid, source) if "random" in data else None
    if not grid and random is None and seeds is None:
        raise SpecError(f"{source}: nothing to sweep; give a [grid], a [random] search or seeds",
                        field="grid")
    spec = SweepSpec(base, grid, random, seeds, source)
    if max_points is not None and spec.size > max_points:
        raise SpecError(f"{source}: the spec has {spec.size:,} points (grid x random.samples x "
                        f"seeds), more than the cap of {max_points:,}; lift the cap to run them "
                        f"(normlab sweep --max-points {spec.size})", field="random.samples"
                        if random is not None and random.samples > max_points else "grid")
    _check_unread(base, grid, random, source)
    _check_data_paths(base, grid, random, source)
    return spec


def _check_keys(data: Any, source: str) -> None:
    """The spec is a table of known keys, and its sections are tables."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: a spec is a TOML table; got {type(data).__name__}")
    for key in data:
        if key not in SPEC_KEYS:
            close = difflib.get_close_matches(key, SPEC_KEYS + tuple(FIELDS), n=1)
            hint = ""
            if close and close[0] in FIELDS:
                hint = f" (fields go in [base], [grid] or [random]: {close[0]!r})"
            elif close:
                hint = f" (did you mean {close[0]!r}?)"
            raise SpecError(f"{source}: unknown key {key!r}{hint}; a spec has "
                            f"{', '.join(SPEC_KEYS)}", field=key)
    for key in ("base", "grid", "random"):
        if key in data and not isinstance(data[key], Mapping):
            raise SpecError(f"{source}: {key} must be a table ([{key}]); got {data[key]!r}",
                            field=key)


def _parse_seeds(raw: Any, base: dict, source: str) -> tuple:
    """``seeds``: a non-empty list of distinct integers, each checked on the base."""
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{source}: seeds must be a non-empty list of integers; got {raw!r}",
                        field="seeds")
    seeds = tuple(_coerce("seed", v, f"{source}: seeds[{i}]") for i, v in enumerate(raw))
    for i, s in enumerate(seeds):
        _checked({**base, "seed": s}, f"{source}: seeds[{i}]", "seed")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: seeds lists a seed twice: {list(raw)}", field="seeds")
    return seeds


def _parse_grid(section: Any, base: dict, source: str) -> dict[str, tuple]:
    """``[grid]``: a non-empty list of distinct values per field, each checked on the base."""
    grid: dict[str, tuple] = {}
    table = _flatten(section, f"{source}: grid")
    if not table:
        raise SpecError(f"{source}: [grid] is empty; give at least one field = [values]",
                        field="grid")
    for name, values in table.items():
        where = f"{source}: grid.{name}"
        if not isinstance(values, list):
            raise SpecError(f"{where}: must be a list of values; got {values!r} (a fixed value "
                            f"goes in [base])", field=name)
        if not values:
            raise SpecError(f"{where}: the list is empty; give at least one value", field=name)
        typed = tuple(_coerce(name, v, f"{where}[{i}]") for i, v in enumerate(values))
        for i, v in enumerate(typed):
            _checked({**base, name: v}, f"{where}[{i}]", name)
        if len({json.dumps(v) for v in typed}) != len(typed):
            raise SpecError(f"{where}: lists a value twice: {values!r}", field=name)
        grid[name] = typed
    return grid


def _parse_random(section: Any, base: dict, grid: dict, source: str) -> RandomSearch:
    """``[random]``: ``samples``, the sampler's ``seed`` and a distribution per field."""
    table = dict(section)
    samples, rseed = table.pop("samples", None), table.pop("seed", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        got = "it is missing" if samples is None else f"got {samples!r}"
        raise SpecError(f"{source}: random.samples (how many draws) must be an integer >= 1; "
                        f"{got}", field="random.samples")
    if isinstance(rseed, bool) or not isinstance(rseed, int) or rseed < 0:
        raise SpecError(f"{source}: random.seed (the sampler's seed) must be an integer >= 0; "
                        f"got {rseed!r}", field="random.seed")
    table = _flatten(table, f"{source}: random")
    if not table:
        raise SpecError(f"{source}: [random] draws no field; give at least one field = "
                        f"[values] or {{ log_uniform = [lo, hi] }}", field="random")
    dists = {}
    for name, spec in table.items():
        where = f"{source}: random.{name}"
        if name in grid:
            raise SpecError(f"{where}: {name} is also in [grid]; keep one", field=name)
        d = _distribution(name, spec, where)
        for v in d.values:  # the choices, or both bounds, on the base config
            _checked({**base, name: _coerce(name, v, where)}, where, name)
        dists[name] = d
    return RandomSearch(samples, rseed, dists)


def load_spec(path: str | Path, *, max_points: int | None = MAX_POINTS) -> SweepSpec:
    """Read and check the TOML spec at ``path`` (see the module's docstring), or a SpecError.
    ``max_points`` as in :func:`parse_spec`."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the backport (a dependency there)
        import tomli as tomllib
    from ..._files import check_input_file

    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no such file", field=None)
    if path.is_dir():
        raise SpecError(f"{path}: is a directory, not a spec file", field=None)
    try:
        source = check_input_file(path, what="spec", max_bytes=MAX_SPEC_BYTES)
    except ValueError as exc:
        raise SpecError(str(exc), field=None) from None
    try:
        text = source.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read it ({exc.strerror or exc})", field=None) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None
    return parse_spec(data, str(path), max_points=max_points)


__all__ = ["DISTRIBUTIONS", "FIELDS", "MAX_POINTS", "MAX_SPEC_BYTES", "Distribution", "Point",
           "RandomSearch", "SpecError", "SweepSpec", "load_spec", "make_points", "parse_spec",
           "run_id", "short_name"]
