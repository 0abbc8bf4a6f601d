"""The safetensors format, read by normlab: the header checked in full before a byte of data is
mapped, then private (copy-on-write) memory maps of the data.

A file is 8 bytes (little-endian u64: the header's length N), N bytes of a JSON object, then the
data section. The rules enforced here are those of the format's own library (``safetensors``,
whose verdict the tests compare with on damaged files), plus a few it leaves open:

* N at most ``MAX_HEADER_BYTES`` (the library's limit) and inside the file; the header UTF-8
  JSON object (spaces around it allowed, as the library pads with them);
* the header a JSON object without repeated keys (the library keeps the last; normlab refuses);
* ``__metadata__``, when present, an object of strings;
* every other entry an object with exactly ``dtype`` (one normlab reads: F64, F32, F16, BF16),
  ``shape`` (a list of non-negative integers) and ``data_offsets`` (two integers
  ``0 <= start <= stop``);
* ``stop - start`` equal to the element count times the dtype's size;
* the ranges, sorted by start, contiguous: the first starts at 0, each starts where the one
  before stops, the last stops at the end of the data section (no gaps, no overlaps, nothing
  past the end).

Each refusal is a ``SafetensorsError`` (a ``ValueError``) naming the file, the tensor and the
rule. The header is parsed here rather than by ``safetensors.safe_open`` because normlab maps
the data privately, releases each range after its copy and reads bfloat16 through ml_dtypes.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's limit on N
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
_ENTRY_KEYS = ("data_offsets", "dtype", "shape")


class SafetensorsError(ValueError):
    """A file that breaks a rule of the format: the message names the file, tensor and rule."""


class Tensor(NamedTuple):
    """One tensor of a checked file: where its bytes are."""

    file: Path
    dtype: np.dtype  # numpy dtype of the stored values
    shape: tuple[int, ...]
    start: int  # byte offset in the file
    stop: int


def numpy_dtype(code: str) -> np.dtype:
    """The NumPy dtype of a safetensors dtype code normlab reads (bfloat16 via ml_dtypes)."""
    if DTYPES[code] == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPES[code])


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError(f"the key {k!r} appears twice")
        out[k] = v
    return out


def _header_json(path: Path, size: int) -> tuple[dict, int]:
    """The parsed header and its length N."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path}: not a safetensors file (shorter than the 8 bytes "
                                   f"of its header length)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path}: header length {n} is over the format's limit of "
                                   f"{MAX_HEADER_BYTES} bytes")
        if 8 + n > size:
            raise SafetensorsError(f"{path}: header length {n} runs past the end of the file "
                                   f"({size} bytes): truncated or not a safetensors file")
        raw = f.read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SafetensorsError(f"{path}: the header is not UTF-8 ({exc.reason} at byte "
                               f"{exc.start})") from None
    if not text.lstrip(" \t\r\n").startswith("{"):
        raise SafetensorsError(f"{path}: the header is not a JSON object (its first "
                               f"character is not '{{'): not a safetensors file")
    try:
        header = json.loads(text, object_pairs_hook=_no_repeats)
    except SafetensorsError as exc:
        raise SafetensorsError(f"{path}: the header is not valid: {exc}") from None
    except ValueError as exc:
        raise SafetensorsError(f"{path}: the header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):  # pragma: no cover - '{' guarantees an object
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    return header, n


def _check_metadata(path: Path, meta: Any) -> None:
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError(f"{path}: __metadata__ must be an object of strings; got "
                               f"{json.dumps(meta)[:80]}")


def _entry(path: Path, name: str, spec: Any) -> tuple[np.dtype, tuple[int, ...], int, int]:
    """(dtype, shape, start, stop) of one header entry, every field checked."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(spec, dict):
        raise SafetensorsError(f"{where}: the entry must be an object with {_ENTRY_KEYS}")
    if tuple(sorted(spec)) != _ENTRY_KEYS:
        missing = sorted(set(_ENTRY_KEYS) - set(spec))
        extra = sorted(set(spec) - set(_ENTRY_KEYS))
        raise SafetensorsError(f"{where}: the entry must have exactly {_ENTRY_KEYS} "
                               f"(missing {missing}, unexpected {extra})")
    code, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(code, str) or code not in DTYPES:
        raise SafetensorsError(f"{where}: dtype {code!r} is not one normlab reads "
                               f"({', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative integers; "
                               f"got {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(_is_int(o) and o >= 0 for o in offsets)):
        raise SafetensorsError(f"{where}: data_offsets must be two non-negative integers "
                               f"[start, stop]; got {offsets!r}")
    start, stop = offsets
    if start > stop:
        raise SafetensorsError(f"{where}: data_offsets start {start} > stop {stop}")
    dtype = numpy_dtype(code)
    nbytes = math.prod(shape) * dtype.itemsize
    if stop - start != nbytes:
        raise SafetensorsError(f"{where}: data_offsets span {stop - start} bytes; {code} of "
                               f"shape {shape} is {nbytes} bytes")
    return dtype, tuple(shape), start, stop


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_header(path: str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of the safetensors file ``path``, by name, after every rule of the module's
    docstring holds; a ``SafetensorsError`` naming the file, tensor and rule otherwise."""
    path = Path(path)
    size = os.path.getsize(path)
    header, n = _header_json(path, size)
    data_bytes = size - 8 - n
    out: dict[str, Tensor] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            _check_metadata(path, spec)
            continue
        dtype, shape, start, stop = _entry(path, name, spec)
        out[name] = Tensor(path, dtype, shape, 8 + n + start, 8 + n + stop)
    end = 0
    for name, t in sorted(out.items(), key=lambda kv: (kv[1].start, kv[1].stop)):
        start, stop = t.start - 8 - n, t.stop - 8 - n
        if start != end:
            what = "overlaps the tensor before it" if start < end else "leaves a gap before it"
            raise SafetensorsError(f"{path}: tensor {name!r}: data_offsets [{start}, {stop}] "
                                   f"{what} (ranges must be contiguous; the previous stops at "
                                   f"{end})")
        end = stop
    if end != data_bytes:
        what = ("past the end of the file: truncated" if end > data_bytes
                else "short of the end of the file: bytes no tensor owns")
        raise SafetensorsError(f"{path}: the tensors' data stops at byte {end} of a data "
                               f"section of {data_bytes} bytes ({what})")
    return out


class MappedFiles:
    """Private (copy-on-write) memory maps of the weight files: ``view`` is a tensor without a
    copy, writable without touching the file; ``release`` hands the pages of a tensor that has
    been copied elsewhere back to the OS (only while no view of the file has been written)."""

    def __init__(self, files: list[Path]):
        self.maps: dict[Path, mmap.mmap] = {}
        for f in files:
            with open(f, "rb") as fh:
                self.maps[f] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)

    def view(self, t: Tensor) -> np.ndarray:
        count = math.prod(t.shape)
        if count == 0:
            return np.zeros(t.shape, t.dtype)
        return np.frombuffer(self.maps[t.file], t.dtype, count, t.start).reshape(t.shape)

    def release(self, t: Tensor) -> None:
        if hasattr(mmap, "MADV_DONTNEED"):
            page = mmap.PAGESIZE
            start = t.start // page * page
            if t.stop > start:
                self.maps[t.file].madvise(mmap.MADV_DONTNEED, start, t.stop - start)
