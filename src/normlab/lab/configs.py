"""An experiment's configuration: its sizes, its checks before anything runs, the setting the
report writes from it, its JSON form, and its notes.

``configure(module, size, seed, overrides)`` builds the module's ``Config`` at a size; one
validation hook, :func:`check_config`, runs before ``measure`` (and before a cached result is
judged again): the experiment's optional ``validate(config)`` and the memory budget.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType
from typing import Any

from .._files import jsonable
from .contract import SIZES
from .formatting import fmt

NOTES_DIR = Path(__file__).with_name("experiments") / "notes"


def configure(module: ModuleType, size: str = "quick", seed: int | None = None,
              overrides: dict[str, Any] | None = None) -> Any:
    """The module's Config at a size (``tiny``, ``quick``, ``full``), with a seed and
    ``overrides`` (field names; dotted names reach into a nested config)."""
    from .._checks import choice, integer
    from ..train.config import with_overrides

    choice(size, "size", SIZES)
    values = dict(module.SIZES.get(size, {}))
    if seed is not None:
        values["seed"] = integer(seed, "seed", lo=0)
    values.update(overrides or {})
    config = with_overrides(module.Config(), values)
    check_fields(config, module.Config())
    check_config(module, config)
    return config


def check_config(module: ModuleType, config: Any, *, budget: bool = True) -> None:
    """The one validation hook, run by the framework before ``measure`` (and before a cached
    result is judged again): the experiment's cross-field rules (its optional
    ``validate(config)``, raising a ValueError or TypeError that names the field), then, with
    ``budget`` (not for a result judged again: that measures nothing), the memory budget
    (:func:`check_budget`). A refusal reaches the command line like any field's."""
    validate = getattr(module, "validate", None)
    if validate is not None:
        validate(config)
    if budget:
        check_budget(module, config)


def check_budget(module: ModuleType, config: Any, *, available: int | None = None) -> None:
    """Refuse, before anything is allocated, a configuration that cannot fit the machine's memory
    (``normlab.train.budget.available_memory``; ``available`` bytes when given): the experiment's
    optional ``memory(config) -> {field: bytes}`` (an upper estimate of what each size field
    allocates at the peak) and every training recipe it holds (a ``TrainConfig`` field, by
    ``budget.check_memory``). The MemoryBudgetError names the field to lower."""
    from ..train import TrainConfig
    from ..train.budget import (
        MemoryBudgetError,
        available_memory,
        check_memory,
        format_bytes,
    )

    limit = available_memory() if available is None else available
    memory = getattr(module, "memory", None)
    if memory is not None and limit is not None:
        parts = {k: float(v) for k, v in memory(config).items()}
        total = sum(parts.values())
        if total > limit:
            field = max(parts, key=parts.__getitem__)
            raise MemoryBudgetError(
                f"{field} {getattr(config, field)}: the measurement needs about "
                f"{format_bytes(total)} of memory, more than the {format_bytes(limit)} "
                f"available; lower {field}", field=field)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, TrainConfig):
            def flag(name: str, at: str = f.name) -> str:
                return f"{at}.{name}"

            check_memory(value, available=limit, flag=flag)


def check_fields(config: Any, defaults: Any) -> None:
    """The lab's rule for an experiment's own fields, checked before anything runs: a value of
    its default's kind (an integer where the default is one, a real number, text, a non-empty
    tuple of such), finite, and positive where the default is (sizes, counts, scales, rates;
    zero allowed where the default is zero). Nested configs check themselves (TrainConfig)."""
    for f in dataclasses.fields(config):
        value, default = getattr(config, f.name), getattr(defaults, f.name)
        if default is None or dataclasses.is_dataclass(default):
            continue
        if isinstance(default, tuple):
            if not isinstance(value, tuple) or not value:
                raise TypeError(f"{f.name} must be a non-empty tuple like {default!r}; "
                                f"got {value!r}")
            for v in value:
                _check_like(v, default[0], f.name)
        else:
            _check_like(value, default, f.name)


def _check_like(value: Any, default: Any, name: str) -> None:
    from .._checks import flag, integer, real

    if isinstance(default, bool):
        flag(value, name)
    elif isinstance(default, int):
        integer(value, name, lo=1 if default >= 1 else 0)
    elif isinstance(default, float):
        real(value, name, lo=0, lo_open=default > 0)
    elif isinstance(default, tuple):  # a tuple of tuples: (rows, width) shapes
        if not isinstance(value, tuple) or len(value) != len(default):
            raise TypeError(f"{name} must hold tuples like {default!r}; got {value!r}")
        for v, d in zip(value, default):
            _check_like(v, d, name)
    elif isinstance(default, str) and (not isinstance(value, str) or not value.strip()):
        raise TypeError(f"{name} must be a non-empty string; got {value!r}")


def config_from_json(cls: type, d: dict[str, Any]) -> Any:
    """A Config rebuilt from its JSON form (``Result.config``): lists back to tuples, nested
    dicts back to their dataclasses."""
    from ..train.config import field_infos

    values = {}
    for info in field_infos(cls):
        v = d[info.name]
        if dataclasses.is_dataclass(info.type) and isinstance(v, dict):
            sub: Any = info.type  # a dataclass type (is_dataclass also admits an instance)
            v = sub.from_dict(v) if hasattr(sub, "from_dict") else config_from_json(sub, v)
        values[info.name] = _tuples(v)
    return cls(**values)


def _tuples(v: Any) -> Any:
    """JSON's lists back to the config's tuples, nested ones too."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def setting_of(module: ModuleType, config: Any, size: str) -> str:
    """Our setting, written from the config (never by hand): the card's method, then every
    field, the nested configs' fields that differ from their defaults."""
    return f"{module.CARD.method} {size} size: {_fields_text(config)}."


def _fields_text(config: Any, prefix: str = "") -> str:
    parts = []
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v):
            kind: Any = type(v)  # a config dataclass, its defaults as its constructor's
            inner = _changed_text(v, kind(), f"{prefix}{f.name}.")
            parts.append(inner)
        else:
            parts.append(f"{prefix}{f.name}={_value_text(v)}")
    return ", ".join(p for p in parts if p)


def _changed_text(config: Any, default: Any, prefix: str) -> str:
    parts = []
    for f in dataclasses.fields(config):
        v, d = getattr(config, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(v):
            parts.append(_changed_text(v, d, f"{prefix}{f.name}."))
        elif v != d:
            parts.append(f"{prefix}{f.name}={_value_text(v)}")
    return ", ".join(p for p in parts if p)


def _value_text(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_value_text(x) for x in v) + ")"
    return fmt(v, spec="g") if isinstance(v, float) else str(v)  # a setting as it was typed


def notes_of(module: ModuleType) -> str:
    """The experiment's notes (``experiments/notes/<module>.md``), '' when it has none."""
    path = NOTES_DIR / (module.__name__.rsplit(".", 1)[-1] + ".md")
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def config_dict(config: Any) -> dict[str, Any]:
    """An experiment's configuration as JSON-able data: each field that is itself a dataclass
    through its own ``to_dict`` where it has one (a ``TrainConfig`` base writes what it writes
    everywhere else), else field by field."""
    out = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            v = v.to_dict() if hasattr(v, "to_dict") else config_dict(v)
        out[f.name] = v
    return jsonable(dataclasses.asdict(config) | out)
