"""Checkpoints as plain ``.npz`` archives (no pickle), written atomically.

A checkpoint holds named arrays plus one JSON document (``__meta__``, stored as a unicode array:
the format tag, the config, the step, generator states, the history). It is written with
:func:`normlab._files.atomic_write`: a crash leaves the old file or the new one, never half of one,
and no temporary file behind; a replaced file keeps its mode; a target that is not a regular file
is refused.

Loading refuses, with the reason, a file that is missing or not a regular file, not a readable
``.npz`` archive (a ``.npy`` array, truncated, corrupt: zip's CRC check), without the format tag,
or of another format version. It then checks the arrays of a training run's layout, each named:
``param/<name>`` and ``opt/<name>/<moment>`` are finite floating-point arrays, the optimizer's
second moments (``opt/*/v``) are non-negative, and ``opt/t`` is one integer >= 0.

Old names still load: checkpoints written before the norms named their gain and bias ``weight``
and ``bias`` (LayerNorm's, DyT's and BatchNorm's were ``gamma`` and ``beta``) have their
``param/<module>.gamma`` and ``opt/<module>.gamma/<moment>`` arrays (and ``beta``) renamed on load
(:data:`LEGACY_NAMES`, :func:`rename_legacy`), as transformers' loader maps ``LayerNorm.gamma`` to
``LayerNorm.weight``.
:func:`check_run` checks every value of the metadata a resumable run needs
(:data:`RUN_META_KEYS`: the step, one history record per step, the evaluations, the counters, the
generator states, the precision state), naming the key; ``Trainer.resume`` then checks the arrays
against the config's model (names, shapes, dtypes) and the optimizer's step count against the
steps that updated the weights.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import TypeGuard

import numpy as np

from .._files import atomic_write, check_input_file

FORMAT = "normlab-checkpoint/1"
META_KEY = "__meta__"
# What Trainer.save writes and Trainer.resume reads.
RUN_META_KEYS = ("config", "step", "history", "evals", "skipped", "stopped", "first_loss",
                 "train_time", "data_rng", "dropout_rng", "precision")


# A norm parameter's old name -> its name now (the last component of the dotted name).
LEGACY_NAMES = {"gamma": "weight", "beta": "bias"}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used, and why."""


def _renamed(key: str) -> str:
    """``key`` with a norm parameter's old name replaced (``param/a.gamma`` -> ``param/a.weight``,
    ``opt/a.beta/m`` -> ``opt/a.bias/m``); other keys unchanged."""
    if key.startswith("param/"):
        kind, name, moment = "param/", key[len("param/"):], ""
    elif key.startswith("opt/") and "/" in key[len("opt/"):]:
        name, _, moment = key[len("opt/"):].rpartition("/")
        kind, moment = "opt/", "/" + moment
    else:
        return key
    module, dot, last = name.rpartition(".")
    if not dot or last not in LEGACY_NAMES:
        return key
    return f"{kind}{module}.{LEGACY_NAMES[last]}{moment}"


def rename_legacy(arrays: dict[str, np.ndarray], path: str | Path = "<checkpoint>"
                  ) -> dict[str, np.ndarray]:
    """``arrays`` with the old names of norm parameters mapped to the new ones
    (:data:`LEGACY_NAMES`), in the same order; a checkpoint holding both names of one parameter
    is refused, naming both."""
    out: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        new = _renamed(key)
        if new in out or (new != key and new in arrays):
            raise CheckpointError(f"checkpoint {str(path)!r} holds both {key} and {new} (the old "
                                  f"and the new name of one norm parameter)")
        out[new] = value
    return out


def save(path: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write ``arrays`` and the JSON-serializable ``meta`` to ``path`` atomically."""
    if META_KEY in arrays:
        raise ValueError(f"array name {META_KEY!r} is reserved")
    document = json.dumps({"format": FORMAT, **meta}, allow_nan=True)
    payload = {**{k: np.asarray(v) for k, v in arrays.items()}, META_KEY: np.array(document)}
    for k, v in payload.items():
        if v.dtype == object:
            raise TypeError(f"array {k!r} has dtype object, which would need pickle")
    # the names are the checkpoint's keys (param/..., opt/...), never savez's allow_pickle
    atomic_write(path, lambda f: np.savez(f, **payload), what="checkpoint")  # type: ignore[arg-type]


def load(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    """``(arrays, meta)`` from a checkpoint written by ``save``, or a ``CheckpointError``."""
    try:
        source = check_input_file(path, what="checkpoint")
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    try:
        archive = np.load(source, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise CheckpointError(f"checkpoint {str(path)!r} is a single .npy array, not an .npz "
                                  f"archive written by normlab")
        with archive:
            arrays = {k: archive[k] for k in archive.files}  # reads every member: CRC-checked
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not an .npz archive: "
                              f"{exc}") from None
    if META_KEY not in arrays:
        raise CheckpointError(f"checkpoint {str(path)!r} has no {META_KEY!r} record: not a "
                              f"normlab checkpoint")
    try:
        meta = json.loads(str(arrays.pop(META_KEY)))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its metadata is not valid JSON "
                              f"({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"checkpoint {str(path)!r} has format {found!r}; expected {FORMAT!r}")
    arrays = rename_legacy(arrays, path)
    check_arrays(arrays, path)
    return arrays, meta


def check_arrays(arrays: dict[str, np.ndarray], path: str | Path = "<checkpoint>") -> None:
    """Refuse, naming the array, a ``param/`` or ``opt/`` array that is not a finite float array,
    a negative second moment (``opt/*/v``) or an ``opt/t`` that is not one integer >= 0."""
    where = f"checkpoint {str(path)!r}"
    for name, value in arrays.items():
        if name == "opt/t":
            if value.shape != () or value.dtype.kind not in "iu" or int(value) < 0:
                raise CheckpointError(f"{where}: {name} (the optimizer's step count) must be one "
                                      f"integer >= 0; got {value.dtype} {value.shape} {value!r}")
            continue
        if not name.startswith(("param/", "opt/")):
            continue
        if value.dtype.kind != "f":
            raise CheckpointError(f"{where}: {name} has dtype {value.dtype}; parameters and "
                                  f"optimizer state are floating-point arrays")
        bad = value.size - int(np.count_nonzero(np.isfinite(value)))
        if bad:
            raise CheckpointError(f"{where}: {name} has {bad} non-finite values (NaN or inf); "
                                  f"a run resumes only from finite weights and state")
        second_moment = name.startswith("opt/") and name.endswith("/v")
        if second_moment and value.size and float(value.min()) < 0:
            raise CheckpointError(f"{where}: {name} (a second moment, a running mean of squared "
                                  f"gradients) has negative values (min {float(value.min()):g})")


def check_run(meta: dict, path: str | Path = "<checkpoint>") -> int:
    """The saved step, after checking every value of the metadata a resumable run needs
    (:data:`RUN_META_KEYS`), each refusal a ``CheckpointError`` naming the key:

    * ``config`` a JSON object; ``step`` an integer >= 0; ``history`` one record per step (a JSON
      object whose ``step`` is its index and whose ``lr``, ``loss`` and ``nll`` are numbers);
      ``evals`` records of a step in [1, step] (in order) and a ``val_loss`` number;
    * ``skipped`` an integer in [0, step]; ``stopped`` null or a string; ``first_loss`` a finite
      number once a step ran (null before); ``train_time`` a finite number >= 0;
    * ``data_rng`` / ``dropout_rng`` the state of a NumPy ``PCG64`` generator; ``precision`` a JSON
      object of ``scaler`` (null or an object), ``numerics`` (an object) and ``rng`` (null or a
      generator state). The scaler's and numerics' own values are checked as they are loaded.
    """
    where = f"checkpoint {str(path)!r}"
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: its metadata must be a JSON object")
    missing = [k for k in RUN_META_KEYS if k not in meta]
    if missing:
        raise CheckpointError(f"{where} lacks the metadata {', '.join(missing)}; it was not "
                              f"written by normlab's Trainer.save")
    step = meta["step"]
    if not _is_int(step) or step < 0:
        raise CheckpointError(f"{where}: its step must be an integer >= 0; got {step!r}")
    for key in ("history", "evals"):
        if not isinstance(meta[key], list):
            raise CheckpointError(f"{where}: its {key} must be a list; got "
                                  f"{type(meta[key]).__name__}")
    if len(meta["history"]) != step:
        raise CheckpointError(f"{where}: its step is {step} but its history holds "
                              f"{len(meta['history'])} step records")
    if not isinstance(meta["config"], dict):
        raise CheckpointError(f"{where}: its config must be a JSON object; got "
                              f"{type(meta['config']).__name__}")
    _check_records(meta, step, where)
    _check_counts(meta, step, where)
    for key in ("data_rng", "dropout_rng"):
        _check_generator_state(meta[key], key, where)
    precision = meta["precision"]
    if not (isinstance(precision, dict) and set(precision) <= {"scaler", "numerics", "rng"}
            and (precision.get("scaler") is None or isinstance(precision["scaler"], dict))
            and isinstance(precision.get("numerics", {}), dict)):
        raise _bad(where, "precision", "an object of scaler (null or an object), numerics (an "
                   "object) and rng", precision)
    if precision.get("rng") is not None:
        _check_generator_state(precision["rng"], "precision.rng", where)
    return step


def _bad(where: str, key: str, what: str, got: object) -> CheckpointError:
    return CheckpointError(f"{where}: its {key} must be {what}; got {_short(got)}")


def _check_records(meta: dict, step: int, where: str) -> None:
    """The history's step records and the evaluation records (``check_run``)."""
    for i, record in enumerate(meta["history"]):
        if not isinstance(record, dict) or record.get("step") != i or not _is_int(record["step"]):
            raise _bad(where, f"history[{i}]", f"a step record with step = {i}", record)
        for key in ("lr", "loss", "nll"):
            if not _is_number(record.get(key, None)):
                raise _bad(where, f"history[{i}].{key}", "a number", record.get(key))
    last = 0
    for i, record in enumerate(meta["evals"]):
        at = record.get("step") if isinstance(record, dict) else None
        if not (_is_int(at) and last <= at <= step and at >= 1):
            raise _bad(where, f"evals[{i}]",
                       f"an evaluation record with a step in [{max(last, 1)}, {step}]", record)
        if not _is_number(record.get("val_loss")):
            raise _bad(where, f"evals[{i}].val_loss", "a number", record.get("val_loss"))
        last = int(at)


def _check_counts(meta: dict, step: int, where: str) -> None:
    """``skipped``, ``stopped``, ``first_loss`` and ``train_time`` (``check_run``)."""
    skipped = meta["skipped"]
    if not _is_int(skipped) or not 0 <= skipped <= step:
        raise _bad(where, "skipped", f"an integer in [0, {step}] (the steps a loss scaler "
                   f"skipped)", skipped)
    if meta["stopped"] is not None and not isinstance(meta["stopped"], str):
        raise _bad(where, "stopped", "null or the reason the run stopped", meta["stopped"])
    first = meta["first_loss"]
    if step > 0 and not (_is_number(first) and math.isfinite(first)):
        raise _bad(where, "first_loss", "a finite number (the first step's loss)", first)
    if step == 0 and first is not None and not _is_number(first):
        raise _bad(where, "first_loss", "null or a number", first)
    t = meta["train_time"]
    if not (_is_number(t) and math.isfinite(t) and t >= 0):
        raise _bad(where, "train_time", "a finite number of seconds >= 0", t)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_generator_state(state: object, key: str, where: str) -> None:
    """Refuse a saved generator state that NumPy's PCG64 (what ``default_rng`` makes) cannot
    take."""
    try:
        # any object: NumPy's setter is the check
        np.random.default_rng().bit_generator.state = state  # type: ignore[assignment]
    except Exception as exc:  # NumPy's checks raise TypeError, ValueError or KeyError
        raise CheckpointError(f"{where}: its {key} must be the state of a NumPy PCG64 generator "
                              f"({exc}); got {_short(state)}") from None


__all__ = ["FORMAT", "LEGACY_NAMES", "META_KEY", "RUN_META_KEYS", "CheckpointError", "atomic_write",
           "check_arrays", "check_run", "load", "rename_legacy", "save"]
