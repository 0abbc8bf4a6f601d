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
:func:`check_run` checks the metadata a resumable run needs (:data:`RUN_META_KEYS`, a step that
is an integer >= 0 with one history record per step).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from .._files import atomic_write, check_input_file

FORMAT = "normlab-checkpoint/1"
META_KEY = "__meta__"
# What Trainer.save writes and Trainer.resume reads.
RUN_META_KEYS = ("config", "step", "history", "evals", "skipped", "stopped", "first_loss",
                 "train_time", "data_rng", "dropout_rng", "precision")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used, and why."""


def save(path: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write ``arrays`` and the JSON-serializable ``meta`` to ``path`` atomically."""
    if META_KEY in arrays:
        raise ValueError(f"array name {META_KEY!r} is reserved")
    document = json.dumps({"format": FORMAT, **meta}, allow_nan=True)
    payload = {**{k: np.asarray(v) for k, v in arrays.items()}, META_KEY: np.array(document)}
    for k, v in payload.items():
        if v.dtype == object:
            raise TypeError(f"array {k!r} has dtype object, which would need pickle")
    atomic_write(path, lambda f: np.savez(f, **payload), what="checkpoint")


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
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not an .npz archive: {exc}") from None
    if META_KEY not in arrays:
        raise CheckpointError(f"checkpoint {str(path)!r} has no {META_KEY!r} record: not a normlab checkpoint")
    try:
        meta = json.loads(str(arrays.pop(META_KEY)))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its metadata is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"checkpoint {str(path)!r} has format {found!r}; expected {FORMAT!r}")
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
        if name.startswith("opt/") and name.endswith("/v") and value.size and float(value.min()) < 0:
            raise CheckpointError(f"{where}: {name} (a second moment, a running mean of squared "
                                  f"gradients) has negative values (min {float(value.min()):g})")


def check_run(meta: dict, path: str | Path = "<checkpoint>") -> int:
    """The saved step, after checking that ``meta`` has every key of :data:`RUN_META_KEYS`, a step
    that is an integer >= 0 and one history record per step; a ``CheckpointError`` otherwise."""
    where = f"checkpoint {str(path)!r}"
    missing = [k for k in RUN_META_KEYS if k not in meta]
    if missing:
        raise CheckpointError(f"{where} lacks the metadata {', '.join(missing)}; it was not written "
                              f"by normlab's Trainer.save")
    step = meta["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"{where}: its step must be an integer >= 0; got {step!r}")
    for key in ("history", "evals"):
        if not isinstance(meta[key], list):
            raise CheckpointError(f"{where}: its {key} must be a list; got {type(meta[key]).__name__}")
    if len(meta["history"]) != step:
        raise CheckpointError(f"{where}: its step is {step} but it holds {len(meta['history'])} "
                              f"step records")
    if not isinstance(meta["config"], dict):
        raise CheckpointError(f"{where}: its config must be a JSON object; got "
                              f"{type(meta['config']).__name__}")
    return step


__all__ = ["FORMAT", "META_KEY", "RUN_META_KEYS", "CheckpointError", "atomic_write", "check_arrays",
           "check_run", "load", "save"]
