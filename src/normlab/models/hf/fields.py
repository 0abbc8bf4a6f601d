"""The fields of a ``config.json``, typed and bounded before use: each reader names the family
and the field, and says what it accepts. JSON's own types are kept: a boolean is ``true`` or
``false`` (not the string ``"false"``), an integer is not ``16.0`` or ``"16"``; a missing or
``null`` optional field is its default."""

from __future__ import annotations

import math
from typing import Any

MAX_SIZE = 2**31 - 1  # no dimension of a model normlab builds is larger
_REQUIRED = object()


def _get(hf: dict, key: str, family: str, default: Any) -> Any:
    value = hf.get(key)
    if value is None:
        if default is _REQUIRED:
            raise ValueError(f"{family}: config.json lacks {key} (required)")
        return default
    return value


def integer(hf: dict, key: str, family: str, *, default: Any = _REQUIRED, lo: int = 1,
            hi: int = MAX_SIZE) -> Any:
    """``hf[key]`` as a JSON integer in [lo, hi] (``default`` when missing or null)."""
    value = _get(hf, key, family, default)
    if value is default and default is not _REQUIRED:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{family}: {key} = {value!r} must be an integer in [{lo}, {hi}]")
    return value


def real(hf: dict, key: str, family: str, *, default: Any = _REQUIRED, lo: float = 0.0,
         hi: float = math.inf, open_lo: bool = False) -> Any:
    """``hf[key]`` as a finite JSON number in [lo, hi] ((lo, hi] with ``open_lo``)."""
    value = _get(hf, key, family, default)
    if value is default and default is not _REQUIRED:
        return value
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and value <= hi and (value > lo if open_lo else value >= lo))
    if not ok:
        interval = f"{'(' if open_lo else '['}{lo}, {hi}]"
        raise ValueError(f"{family}: {key} = {value!r} must be a finite number in {interval}")
    return float(value)


def flag(hf: dict, key: str, family: str, *, default: bool) -> bool:
    """``hf[key]`` as a JSON boolean (``default`` when missing or null)."""
    value = _get(hf, key, family, default)
    if not isinstance(value, bool):
        raise ValueError(
            f"{family}: {key} = {value!r} must be true or false (a JSON boolean)")
    return value


def string(hf: dict, key: str, family: str, *, default: Any = _REQUIRED) -> Any:
    """``hf[key]`` as a JSON string."""
    value = _get(hf, key, family, default)
    if value is default and default is not _REQUIRED:
        return value
    if not isinstance(value, str):
        raise ValueError(f"{family}: {key} = {value!r} must be a string")
    return value


def mapping(hf: dict, key: str, family: str) -> dict:
    """``hf[key]`` as a JSON object ({} when missing or null)."""
    value = _get(hf, key, family, {})
    if not isinstance(value, dict):
        raise ValueError(f"{family}: {key} = {value!r} must be an object")
    return value


def string_list(hf: dict, key: str, family: str) -> list | None:
    """``hf[key]`` as a list of strings (None when missing or null)."""
    value = _get(hf, key, family, None)
    if value is not None and (not isinstance(value, list)
                              or not all(isinstance(v, str) for v in value)):
        raise ValueError(f"{family}: {key} = {value!r} must be a list of strings")
    return value


def probability(hf: dict, key: str, family: str, *, default: float) -> float:
    """``hf[key]`` as a dropout probability: a finite JSON number in [0, 1)."""
    value = _get(hf, key, family, default)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not (math.isfinite(value) and 0.0 <= value < 1.0)):
        raise ValueError(f"{family}: {key} = {value!r} must be a finite number in [0, 1)")
    return float(value)
