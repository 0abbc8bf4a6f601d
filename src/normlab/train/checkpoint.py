"""Checkpoints as plain ``.npz`` archives (no pickle), written atomically.

A checkpoint holds named arrays plus one JSON document (``__meta__``, stored as a unicode array:
the format tag, the config, the step, generator states, the history). It is written with
``normlab._files.atomic_write``: a temporary file in the same directory, flushed to disk, then
renamed over the target in one step (a crash leaves the old file or the new one, never half of
one, and no temporary file behind; the mode follows the umask or the replaced file's).

Loading refuses, with the reason, a file that is missing, not a readable archive (truncated,
corrupt: zip's CRC check), without the format tag, or of another format version.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from .._files import atomic_write

FORMAT = "normlab-checkpoint/1"
META_KEY = "__meta__"


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
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}  # reads every member: CRC-checked
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
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
    return arrays, meta
