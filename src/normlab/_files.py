"""The one home for files: atomic writes, JSON with one convention, and path checks.

Every file normlab writes goes through :func:`atomic_write` (or :func:`atomic_write_file`, for a
writer that takes a file name):

* the bytes go to a unique temporary file beside the target, are flushed and fsync'ed, and are
  renamed over the target in one step: a reader sees the old file or the new one, never half of
  one, and a failure leaves the old file and no temporary file behind;
* a new file gets the mode ``0o666`` less the umask (as ``open`` would give it); a replaced file
  keeps its mode;
* a target that is a symbolic link is written through: the file it points to is replaced and the
  link stays;
* a target that exists and is not a regular file (a directory, a device, a FIFO, a socket) is
  refused with a ``ValueError``; it is never replaced.

JSON (:func:`dumps_json`, :func:`write_json`, :func:`read_json`) has one convention for numbers
JSON cannot hold: a non-finite float is written as the string ``"inf"``, ``"-inf"`` or ``"nan"``
(NumPy scalars and arrays become Python numbers and lists), and :func:`number` reads such a value
back. One writer differs: ``TrainResult.to_dict`` writes a non-finite figure as null
(``jsonable(..., null_nonfinite=True)``), as the pinned runs recorded it; :func:`finite` reads a
figure of either form as a float, or None where it is not a finite number. :func:`read_json`
refuses a file that is missing, not a regular file, over a size cap or not valid JSON, naming
the file.

Path checks run before any work starts: :func:`check_output_path` (the folder exists, the target
is new or a regular file), :func:`check_input_file` (an existing regular file of bounded size, so
that reading it ends) and :func:`check_distinct` (no output is one of the inputs, or another
output, compared after resolving symbolic links).
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

PathLike = str | os.PathLike

# Inputs read whole (JSON, TOML specs) are capped so that a huge or endless file cannot hang a run.
MAX_TEXT_BYTES = 64 * 2**20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output_path(path: PathLike, *, what: str = "output") -> Path:
    """``path`` resolved, after checking that it can be written: its folder exists and it is new or
    a regular file (a symbolic link counts as the file it points to). Raises ``ValueError`` naming
    ``what`` (e.g. ``"--json"``) otherwise. Writes nothing."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path, got {type(path).__name__}")
    if str(path) == "":
        raise ValueError(f"{what} must be a file path, got an empty string")
    target = Path(path).expanduser().resolve()  # follows symbolic links (written through)
    if target.exists():
        mode = target.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{what}: {str(path)!r} is {_kind(mode)}; expected a file path")
    folder = target.parent
    if not folder.is_dir():
        raise ValueError(f"{what}: folder {str(folder)!r} of {str(path)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{what}: folder {str(folder)!r} is not writable")
    return target


def check_output_dir(path: PathLike, *, what: str = "output folder") -> Path:
    """``path`` resolved, after checking that files can be written under it: it is a writable
    directory, or it does not exist yet and its nearest existing ancestor is a writable directory
    (so that it can be created). Raises ``ValueError`` naming ``what`` (e.g. ``"--out"``)
    otherwise. Creates nothing."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path, got {type(path).__name__}")
    if str(path) == "":
        raise ValueError(f"{what} must be a folder path, got an empty string")
    target = Path(path).expanduser().resolve()
    probe = target
    while not probe.exists():
        probe = probe.parent
    mode = probe.stat().st_mode
    if not stat.S_ISDIR(mode):
        where = "" if probe == target else f" (its ancestor {str(probe)!r})"
        raise ValueError(f"{what}: {str(path)!r}{where} is {_kind(mode)}; expected a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{what}: {str(probe)!r} is not writable")
    return target


def check_input_file(path: PathLike, *, what: str = "input", max_bytes: int | None = None) -> Path:
    """``path`` resolved, after checking that it is an existing, readable regular file (not a
    directory, FIFO or device, whose reading might never end), at most ``max_bytes`` long."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path, got {type(path).__name__}")
    source = Path(path).expanduser()
    if not source.exists():
        raise ValueError(f"{what}: {str(path)!r} does not exist")
    source = source.resolve()
    st = source.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what}: {str(path)!r} is {_kind(st.st_mode)}; expected a regular file")
    if not os.access(source, os.R_OK):
        raise ValueError(f"{what}: {str(path)!r} is not readable")
    if max_bytes is not None and st.st_size > max_bytes:
        raise ValueError(f"{what}: {str(path)!r} has {st.st_size} bytes; "
                         f"at most {max_bytes} are read")
    return source


def check_distinct(outputs: Mapping[str, PathLike | None],
                   inputs: Mapping[str, PathLike | None] = {}) -> None:
    """Refuse an output path that is an input path or another output path (resolved, symbolic
    links followed). Keys name the arguments (``{"--json": ..., "--checkpoint": ...}``); ``None``
    values are skipped. Raises ``ValueError`` naming both arguments."""
    seen: dict[Path, str] = {}
    for name, path in inputs.items():
        if path is not None:
            seen.setdefault(Path(path).expanduser().resolve(), name)
    for name, path in outputs.items():
        if path is None:
            continue
        key = Path(path).expanduser().resolve()
        if key in seen:
            raise ValueError(f"{name} and {seen[key]} name the same file {str(path)!r}; "
                             f"an output never replaces "
                             f"{'an input' if seen[key] in inputs else 'another output'}")
        seen[key] = name


def atomic_write(path: PathLike, write: bytes | str | Callable[[Any], None], *,
                 what: str = "output") -> Path:
    """Write ``path`` atomically and return it (resolved).

    ``write`` is the content (``bytes``, or ``str`` written as UTF-8) or a function that writes
    into the binary file object it is given (``lambda f: np.savez(f, **arrays)``). See the module
    docstring for the guarantees (fsync, mode, links written through, non-regular targets refused).
    """
    def fill(f: IO[bytes], tmp: str) -> None:
        if isinstance(write, str):
            f.write(write.encode("utf-8"))
        elif isinstance(write, (bytes, bytearray, memoryview)):
            f.write(write)
        else:
            write(f)

    return _replace(path, fill, what)


def atomic_write_file(path: PathLike, write: Callable[[str], None], *,
                      what: str = "output") -> Path:
    """:func:`atomic_write` for a writer that takes a file name (``safetensors``' ``save_file``):
    ``write(name)`` writes the file ``name`` (a unique temporary file beside ``path``), which then
    replaces ``path`` with the same guarantees."""
    def fill(f: IO[bytes], tmp: str) -> None:
        f.close()
        write(tmp)

    return _replace(path, fill, what)


def _replace(path: PathLike, fill: Callable[[Any, str], None], what: str) -> Path:
    target = check_output_path(path, what=what)
    existing = target.stat().st_mode if target.exists() else None
    mode = stat.S_IMODE(existing) if existing is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f, tmp)
        with open(tmp, "rb+") as f:
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return target
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return target


# ---- JSON ------------------------------------------------------------------------------------
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def jsonable(obj: Any, *, null_nonfinite: bool = False) -> Any:
    """``obj`` with NumPy scalars and arrays as Python numbers and lists, tuples as lists, keys as
    strings, and non-finite floats as the strings ``'inf'``, ``'-inf'``, ``'nan'`` (the one
    convention), or as None with ``null_nonfinite`` (``TrainResult.to_dict`` only: the pinned
    runs, ``tests/train/data/pinned_runs.json``, were recorded so)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v, null_nonfinite=null_nonfinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, null_nonfinite=null_nonfinite) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), null_nonfinite=null_nonfinite)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isfinite(v):
            return v
        return None if null_nonfinite else repr(v)  # 'inf', '-inf', 'nan'
    return obj


def finite(value: Any) -> float | None:
    """A figure as a float, or None where it is not a finite number: None (null, as a result
    written by ``TrainResult.to_dict`` holds it), :func:`jsonable`'s strings ``'inf'``,
    ``'-inf'``, ``'nan'``, a non-finite float, or anything that is not a number (a bool
    included). The one reader of the lab's figures that may be missing (a diverged run's)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def number(value: Any) -> float:
    """A number written by :func:`jsonable` back to a float (``'inf'`` -> inf). Raises
    ``ValueError`` for anything else (a damaged file's string or null where a number belongs)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        if value in _NONFINITE:
            return _NONFINITE[value]
        raise ValueError(f"expected a number, got the string {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    raise ValueError(f"expected a number, got {type(value).__name__}")


def dumps_json(obj: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """``obj`` as JSON text by the module's convention (strict JSON: no bare NaN or Infinity)."""
    return json.dumps(jsonable(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)


def write_json(path: PathLike, obj: Any, *, what: str = "output", indent: int | None = 2) -> Path:
    """Write ``obj`` to ``path`` as JSON (:func:`dumps_json`), atomically."""
    text = dumps_json(obj, indent=indent)  # serialize first: a failure touches no file
    return atomic_write(path, text + "\n", what=what)


def read_json(path: PathLike, *, what: str = "JSON file", max_bytes: int = MAX_TEXT_BYTES) -> Any:
    """The JSON document in ``path``; ``ValueError`` naming the file when it is missing, not a
    regular file, larger than ``max_bytes`` or not valid JSON. Non-finite strings stay strings:
    read numbers with :func:`number`."""
    source = check_input_file(path, what=what, max_bytes=max_bytes)
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: {str(path)!r} is not valid JSON ({exc})") from None
