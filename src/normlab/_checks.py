"""Dtype rules and argument checks shared by every op.

The rules (docs/architecture.md, "Contracts"):

* float64 inputs are computed in float64, float32 in float32;
* every lower format NumPy or ml_dtypes knows (float16, bfloat16, float8_*, float6_*, float4_*)
  is computed in float32 and the result is rounded back once, to the input's dtype;
* statistics and parameter gradients are kept in at least float32.

Bad arguments raise ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, wrong
value) with a message that names the argument and says what is accepted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from numbers import Real
from typing import Any, Literal, TypeVar, overload

import ml_dtypes
import numpy as np

Array = np.ndarray
_T = TypeVar("_T")

_ML_DTYPES_FLOATS = frozenset(
    np.dtype(getattr(ml_dtypes, name))
    for name in (
        "bfloat16",
        "float8_e3m4",
        "float8_e4m3",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3b11fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float6_e2m3fn",
        "float6_e3m2fn",
        "float4_e2m1fn",
    )
    if hasattr(ml_dtypes, name)
)


def is_float_dtype(dtype: Any) -> bool:
    """True for NumPy's real floating dtypes and ml_dtypes' low-precision floats."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _ML_DTYPES_FLOATS


def compute_dtype(dtype: Any) -> np.dtype:
    """The dtype an op computes in: float64 for float64 (and wider), float32 for everything else."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize >= 8:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def float_array(x: Any, name: str) -> Array:
    """``x`` as a floating ndarray (no copy if it already is one), or a TypeError naming ``name``.

    Python floats and nested lists of floats are accepted and become float64; integer, boolean,
    complex, string and object data are refused, as silently treating them as floats hides bugs.
    """
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(
                f"{name} must be a floating-point array; got {type(x).__name__}"
            ) from exc
    if not is_float_dtype(arr.dtype):
        raise TypeError(
            f"{name} must be a floating-point array (float64, float32, float16, bfloat16, "
            f"float8_*, ...); got dtype {arr.dtype}"
        )
    return arr


def at_least_nd(x: Array, name: str, ndim: int) -> None:
    if x.ndim < ndim:
        raise ValueError(f"{name} must have at least {ndim} dimension(s); got shape {x.shape}")


@overload
def param(p: Any, name: str, width: int, *, allow_none: Literal[False] = False) -> Array: ...
@overload
def param(p: Any, name: str, width: int, *, allow_none: bool) -> Array | None: ...
def param(p: Any, name: str, width: int, *, allow_none: bool = False) -> Array | None:
    """Check a per-feature parameter: a float array of shape ``(width,)``."""
    if p is None:
        if allow_none:
            return None
        raise TypeError(f"{name} must be a floating-point array of shape ({width},); got None")
    p = float_array(p, name)
    if p.shape != (width,):
        raise ValueError(
            f"{name} must have shape ({width},) to match the last axis of x; got {p.shape}"
        )
    return p


def scalar_param(p: Any, name: str) -> Array:
    """Check a learned scalar: a float array with one element (shape () or (1,))."""
    p = float_array(p, name)
    if p.size != 1 or p.ndim > 1:
        raise ValueError(f"{name} must be a scalar array of shape () or (1,); got {p.shape}")
    return p


def integer(value: Any, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (not a bool) in [lo, hi]: a TypeError for another kind, a ValueError outside."""
    what = "an integer" + _bounds(lo, hi, "[", "]")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be {what}; got {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {what}; got {value!r}")
    return value


def real(value: Any, name: str, *, lo: float | None = None, hi: float | None = None,
         lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite real number (not a bool) with lo <= value <= hi (``lo_open`` / ``hi_open``: strict
    bounds): a TypeError for another kind, a ValueError for a value outside or not finite."""
    what = "a finite number" + _bounds(lo, hi, "(" if lo_open else "[", ")" if hi_open else "]")
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (Real, np.floating, np.integer)
    ):
        raise TypeError(f"{name} must be {what}; got {value!r}")
    value = float(value)
    bad = not math.isfinite(value)
    bad |= lo is not None and (value <= lo if lo_open else value < lo)
    bad |= hi is not None and (value >= hi if hi_open else value > hi)
    if bad:
        raise ValueError(f"{name} must be {what}; got {value!r}")
    return value


def _bounds(lo: Any, hi: Any, left: str, right: str) -> str:
    if lo is not None and hi is not None:
        return f" in {left}{lo}, {hi}{right}"
    if lo is not None:
        return f" {'>' if left == '(' else '>='} {lo}"
    return "" if hi is None else f" {'<' if right == ')' else '<='} {hi}"


def choice(value: Any, name: str, options: Any) -> Any:
    """One of ``options`` (compared with ==): a TypeError for a value of another kind than the
    options, a ValueError for an unknown one; the message lists the options."""
    options = tuple(options)
    if type(value) is str and value in options:  # the common case, decided at once
        return value
    listed = ", ".join(repr(o) for o in options)
    kinds = tuple({type(o) for o in options})
    if not isinstance(value, kinds) or isinstance(value, bool) != any(
        isinstance(o, bool) for o in options
    ):
        raise TypeError(f"{name} must be one of {listed}; got {value!r}")
    if value not in options:
        raise ValueError(
            f"{name} must be one of {listed}; got {value!r}" + _did_you_mean(value, options)
        )
    return value


def known_keys(keys: Any, allowed: Any, what: str) -> None:
    """Refuse a key that is not in ``allowed`` with a ValueError naming it, the closest known one
    (a did-you-mean) and the list of known ones; ``what`` names the kind of key ("field of
    TrainConfig")."""
    allowed = list(allowed)
    for key in keys:
        if key not in allowed:
            raise ValueError(f"unknown {what} {key!r}{_did_you_mean(key, allowed)}; known: "
                             f"{', '.join(map(str, allowed))}")


def dataclass_from(cls: type[_T], data: Any, unknown: str,
                   **convert: Callable[[Any], Any]) -> _T:
    """``cls(**data)`` for the dataclass ``cls``, from a mapping of its fields (a config's
    ``to_dict``, an object read from JSON): keys that are not fields of ``cls`` are refused
    first, all of them at once, with a ValueError ``"{unknown} [keys]; known: fields"``
    (``unknown`` says what they are: ``"config: unknown model fields"``); ``convert[key]`` maps
    that key's value before the call (a nested config from its dict). A missing key takes the
    field's default; the dataclass checks the values."""
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a mapping of {cls.__name__}'s fields; got "
                        f"{type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    extra = sorted(str(k) for k in data if k not in names)
    if extra:
        raise ValueError(f"{unknown} {extra}; known: {', '.join(names)}")
    return cls(**{k: convert[k](v) if k in convert else v for k, v in data.items()})


def _did_you_mean(value: Any, options: Any) -> str:
    import difflib

    close = difflib.get_close_matches(str(value), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def positive(value: Any, name: str) -> float:
    """A finite real number > 0 (eps, a scale, a soft-cap)."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number > 0; got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return value


def probability(value: Any, name: str) -> float:
    """A drop probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number in [0, 1); got {value!r}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1); got {value!r}")
    return value


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def generator(rng: Any, name: str = "rng") -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{name} must be a numpy.random.Generator (np.random.default_rng(seed)); "
            f"got {type(rng).__name__}"
        )
    return rng


def same_shape(a: Array, a_name: str, shape: tuple[int, ...], what: str) -> None:
    if a.shape != tuple(shape):
        raise ValueError(f"{a_name} must have shape {tuple(shape)} ({what}); got {a.shape}")


def reduce_rows(a: Array) -> Array:
    """Sum over every axis but the last: the reduction of every per-feature parameter gradient.

    Accumulated in float64 (NumPy sums a column sequentially, so a float32 accumulator would lose
    about log2(rows) bits); the caller rounds the result to the gradient's dtype once.
    """
    return a.reshape(-1, a.shape[-1]).sum(axis=0, dtype=np.float64)


def out_cast(a: Array, dtype: np.dtype) -> Array:
    """Round ``a`` once to ``dtype`` (no copy when it already has it)."""
    return a.astype(dtype, copy=False)


def cache(value: Any, kind: type, op: str) -> None:
    """Refuse a backward's cache that is not the ``kind`` NamedTuple that ``op``'s forward returns
    (the cache of another op would fail later with an unpacking error that names nothing)."""
    if not isinstance(value, kind):
        raise TypeError(f"cache must be the {kind.__name__} that {op}_forward returns; "
                        f"got {type(value).__name__}")
