"""Loading and saving checkpoints: ``load_hf`` (every file checked, the config checked against
what is stored and against the memory available before anything is allocated, weights as private
memory maps) and ``save_hf`` (the whole checkpoint written beside the old one and switched into
place in one step)."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ... import _checks as ck
from ... import _memory
from ..._files import check_output_dir, check_output_path, read_json
from ..config import GPTConfig
from ..gpt import GPT, ROPE_ROWS
from . import families as fam
from .safetensors import MappedFiles, Tensor, read_header

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _read_json(path: Path, what: str) -> dict:
    doc = read_json(path, what=what)
    if not isinstance(doc, dict):  # a damaged file: a ValueError, as every refusal of one
        raise ValueError(
            f"{what}: {str(path)!r} must hold a JSON object; got "
                         f"{type(doc).__name__}")
    return doc


def _shard_names(root: Path) -> dict[str, str]:
    """The index's weight map, after checking that it is an object of tensor -> shard file
    and that every shard is a plain file name of the checkpoint folder (no absolute path, no
    folder, no ``..``, no link that leaves it)."""
    index = _read_json(root / INDEX_FILE, str(root / INDEX_FILE))
    wmap = index.get("weight_map")
    where = f"{root / INDEX_FILE}: weight_map"
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        raise ValueError(f"{where} must be an object of tensor name -> shard file name")
    inside = root.resolve()
    for shard in sorted(set(wmap.values())):
        if shard in ("", ".", "..") or "/" in shard or "\\" in shard or os.path.isabs(shard):
            raise ValueError(f"{where} names the shard {shard!r}: a shard must be a plain file "
                             f"name inside the checkpoint folder")
        target = (root / shard).resolve()
        if target.parent != inside:
            raise ValueError(f"{where} names the shard {shard!r}, a link to {str(target)!r} "
                             f"outside the checkpoint folder")
        if not (root / shard).is_file():
            raise ValueError(f"{INDEX_FILE} lists missing shards: {[str(root / shard)]}")
    return wmap


def checkpoint_files(path: str | os.PathLike) -> tuple[dict, list[Path]]:
    """``(config.json as a dict, the weight files)`` of a checkpoint directory, with a clear
    error for a path that is not one (JSON and index checked; see ``_shard_names``)."""
    hf, files, _ = _checkpoint(path)
    return hf, files


def _checkpoint(path: str | os.PathLike) -> tuple[dict, list[Path], dict | None]:
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"path {str(root)!r} is not a checkpoint directory (expected a folder "
                         f"with {CONFIG_FILE} and {WEIGHTS_FILE} or {INDEX_FILE})")
    if not (root / CONFIG_FILE).is_file():
        raise ValueError(f"path {str(root)!r} has no {CONFIG_FILE}: not a transformers "
                         f"checkpoint")
    hf = _read_json(root / CONFIG_FILE, str(root / CONFIG_FILE))
    if (root / WEIGHTS_FILE).is_file():
        return hf, [root / WEIGHTS_FILE], None
    if (root / INDEX_FILE).is_file():
        wmap = _shard_names(root)
        return hf, [root / f for f in sorted(set(wmap.values()))], wmap
    raise ValueError(f"path {str(root)!r} has neither {WEIGHTS_FILE} nor {INDEX_FILE} "
                     f"(PyTorch .bin checkpoints are not read: save them as safetensors)")


def _stored(files: list[Path], wmap: dict | None) -> dict[str, Tensor]:
    """Every tensor of the checked files; each named once across shards, where the index
    says."""
    stored: dict[str, Tensor] = {}
    for f in files:
        for name, t in read_header(f).items():
            if name in stored:
                raise ValueError(f"tensor {name!r} is stored twice: in {stored[name].file.name} "
                                 f"and in {f.name}")
            stored[name] = t
    if wmap is not None:
        for name in sorted(set(wmap) | set(stored)):
            held = stored[name].file.name if name in stored else None
            if wmap.get(name) != held:
                raise ValueError(f"{INDEX_FILE}: weight_map puts tensor {name!r} in "
                                 f"{wmap.get(name)!r}; the shards' headers have it in {held!r}")
    return stored


def _check_sizes(config: GPTConfig, stored: dict[str, Tensor], family: str) -> None:
    """The config's sizes against the memory available and the stored tensors, before a layout
    is listed or an array allocated (nothing here grows with the config's sizes)."""
    check_memory(config, family)
    rec = fam.record(family)
    pre = f"{rec.prefix}{rec.layers}."
    layers = sorted({int(n[len(pre):].split(".", 1)[0]) for n in stored
                     if n.startswith(pre) and n[len(pre):].split(".", 1)[0].isdigit()})
    if len(layers) != config.n_layers or layers != list(range(len(layers))):
        held = f"layers 0..{layers[-1]}" if layers else "no layers"
        raise ValueError(f"{family}: {rec.layers_key} = {config.n_layers} but the checkpoint "
                         f"stores {held}")
    emb = fam.embedding_name(family)
    if emb in stored and stored[emb].shape != (config.vocab_size, config.d_model):
        raise ValueError(f"{family}: tensor {emb} has shape {stored[emb].shape}; vocab_size "
                         f"and the hidden size say {(config.vocab_size, config.d_model)}")


# the sizes of the memory estimate: parameter_count's name -> GPTConfig's field
_SIZES = {"L": "n_layers", "C": "d_model", "F": "d_ff", "V": "vocab_size", "T": "seq_len",
          "D": "d_head", "H": "n_heads", "K": "n_kv_heads"}


def model_bytes(config: GPTConfig, **sizes: int) -> int:
    """The bytes ``GPT.empty(config)`` holds once its parameters are set: the parameters
    (``_memory.parameter_count``, the sizes overridden by ``sizes``) and, with RoPE, its cos and
    sin tables of at most ``gpt.ROPE_ROWS`` positions and their float64 temporaries (a RoPE model
    holds no table of all ``seq_len`` positions)."""
    c = config
    n = dict(V=c.vocab_size, T=c.seq_len, L=c.n_layers, C=c.d_model, H=c.n_heads, K=c.kv_heads,
             D=c.head_dim, F=c.hidden) | sizes
    itemsize = np.dtype(c.dtype).itemsize
    params = _memory.parameter_count(**n, gated=c.activation in ("swiglu", "geglu"),
                                     learned=c.positions == "learned", tied=c.tie_embeddings)
    rope = 0 if c.positions == "learned" else min(n["T"], ROPE_ROWS) * n["D"] * (itemsize + 16)
    return params * itemsize + rope


def check_memory(config: GPTConfig, family: str, *, available: int | None = None) -> int:
    """``model_bytes(config)``, or a ``MemoryBudgetError`` naming the ``config.json`` field that
    lowers it most when it exceeds ``available`` bytes (default: the memory available now)."""
    need = model_bytes(config)
    avail = _memory.available_memory() if available is None else available
    if avail is None or need <= avail:
        return need
    rec = fam.record(family)
    keys = {field: key for key, field in rec.mapped.items() if field in _SIZES.values()}
    drop = {keys[f]: need - model_bytes(config, **{n: 1}) for n, f in _SIZES.items() if f in keys}
    key = max(drop, key=lambda k: drop[k])
    value = getattr(config, {"d_ff": "hidden", "d_head": "head_dim", "n_kv_heads": "kv_heads"}
                    .get(rec.mapped[key], rec.mapped[key]))
    raise _memory.MemoryBudgetError(
        f"{family}: {key} = {value}: the model needs about {_memory.format_bytes(need)} of "
        f"memory, more than the {_memory.format_bytes(avail)} available; lower {key} (sizes: "
        f"vocab_size {config.vocab_size}, hidden {config.d_model}, intermediate "
        f"{config.hidden}, layers {config.n_layers}, positions {config.seq_len})", field=key)


def load_hf(path: str | os.PathLike, *, dtype: str = "float32", mmap_weights: bool = True,
            allow_nonfinite: bool = False) -> GPT:
    """The ``GPT`` of a transformers checkpoint directory (``config.json`` and
    ``model.safetensors``, or shards with ``model.safetensors.index.json``) of one of
    ``FAMILIES``; weights stored in float32, float16 or bfloat16 come in as ``dtype`` ("float32"
    or "float64"). The model is in eval mode (dropout off), as ``from_pretrained`` leaves it.

    With ``mmap_weights`` (the default) a parameter stored in one tensor of its dtype (not
    stacked; a transposed one as a transposed view) is a private memory map of the file: read
    from disk when first used, written (by training) into private memory, never into the file.
    The others, and all of them with ``mmap_weights=False``, are copied into memory.

    Before anything is mapped, every file is checked (``safetensors``: the format's rules;
    shards plain names inside the folder, each tensor stored once, where the index says), and
    the config's fields checked against the family's record (``families``: every field mapped,
    or ignored with its assumed value, or bookkeeping) and typed, and its sizes checked against
    the memory available (``check_memory``: a ``MemoryBudgetError`` naming the field to lower)
    and the stored tensors. A weight that is NaN or infinite is refused, naming the tensor,
    unless ``allow_nonfinite`` (to load a damaged model for inspection). The model remembers its
    family (``model.hf_family``): ``save_hf`` writes it back as that family.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    ck.choice(dtype, "dtype", ("float32", "float64"))
    ck.flag(mmap_weights, "mmap_weights")
    ck.flag(allow_nonfinite, "allow_nonfinite")
    hf, files, wmap = _checkpoint(path)
    stored = _stored(files, wmap)
    config = fam.config_from_hf(hf, dtype)
    family = hf["model_type"]
    _check_sizes(config, stored, family)
    lookup = fam.short_names(stored, family)
    layout = fam.layout(config, family)
    missing = [fam.hf_name(family, p) for e in layout for p in e.parts if p not in lookup]
    if missing:
        raise ValueError(f"{family}: the checkpoint lacks tensors {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")
    used = {lookup[p] for e in layout for p in e.parts}
    extra = sorted(n for n in stored if n not in used and not fam.ignorable(family, n, config))
    if extra:
        raise ValueError(f"{family}: tensors {extra[:5]} are not supported (no parameter of the "
                         f"config takes them)")
    # not flattened: a flat buffer would copy every mapped weight and touch a gradient buffer
    # of the model's size (Module.flatten can still be called before training it)
    model = GPT.empty(config)
    maps = MappedFiles(files)
    views, copies = _plan(layout, model.parameters(), stored, lookup, maps, mmap_weights, family)
    if not allow_nonfinite:
        _refuse_nonfinite(maps, stored)
    model.replace_parameters(views)
    _copy_all(maps, copies)
    model.eval()
    model.mapped_parameters = tuple(views)
    model.hf_family = family
    return model


def _plan(layout: list, params: dict, stored: dict[str, Tensor], lookup: dict[str, str],
          maps: MappedFiles, mmap_weights: bool, family: str) -> tuple[dict, list]:
    """(the parameters that become views of the maps, the (parameter, tensors, transposed)
    copies), after checking every stored shape against the model's."""
    views, copies = {}, []
    for e in layout:
        p = params[e.ours]
        ts = [stored[lookup[part]] for part in e.parts]
        want = [p.shape[::-1] if e.transpose else p.shape] if not e.rows else \
            [(rows, *p.shape[1:]) for rows in e.rows]
        for part, t, w in zip(e.parts, ts, want):
            if t.shape != tuple(w):
                raise ValueError(f"{family}: tensor {lookup[part]} has shape {t.shape}; the "
                                 f"config needs {tuple(w)}")
        if mmap_weights and len(ts) == 1 and ts[0].dtype == p.dtype:
            view = maps.view(ts[0])  # backed by the file; Conv1D's (in, out) read as its transpose
            views[e.ours] = view.T if e.transpose else view  # (shape of p)
        else:
            copies.append((p, ts, e.transpose))
    return views, copies


def _refuse_nonfinite(maps: MappedFiles, stored: dict[str, Tensor], chunk: int = 2**20) -> None:
    """A ValueError naming the first tensor with a NaN or infinite value (read in chunks, each
    range's pages released after it is read: no more memory than a chunk)."""
    for name, t in stored.items():
        flat = maps.view(t).reshape(-1)
        for i in range(0, flat.size, chunk):
            part = flat[i:i + chunk]
            if t.dtype.itemsize == 2 and t.dtype != np.float16:  # bfloat16: exact in float32
                part = part.astype(np.float32)
            finite = np.isfinite(part)
            if not finite.all():
                bad = int(np.flatnonzero(~finite)[0]) + i
                raise ValueError(f"tensor {name!r} in {t.file.name} holds a non-finite value "
                                 f"(element {bad}: {flat[bad]}); load_hf(..., "
                                 f"allow_nonfinite=True) loads it for inspection")
        maps.release(t)


def _copy_all(maps: MappedFiles, copies: list) -> None:
    def copy(job: Any) -> None:
        p, ts, transpose = job
        r0 = 0
        for t in ts:
            _copy(p[r0:r0 + t.shape[-1 if transpose else 0]], maps.view(t), transpose)
            r0 += t.shape[-1 if transpose else 0]
            maps.release(t)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # NumPy copies drop the GIL
        list(pool.map(copy, sorted(copies, key=lambda j: -j[0].size)))


def _copy(dst: np.ndarray, src: np.ndarray, transpose: bool, tile: int = 64) -> None:
    """``dst[...] = src`` (``src.T`` with ``transpose``), converting the dtype; a transposed copy
    goes tile by tile so that both sides stay in cache."""
    if not transpose:
        dst[...] = src
        return
    R, C = src.shape  # dst is (C, R)
    for i in range(0, R, tile):
        for j in range(0, C, tile):
            dst[j:j + tile, i:i + tile] = src[i:i + tile, j:j + tile].T


def save_hf(model: GPT, path: str | os.PathLike, *, family: str | None = None,
            dtype: str = "float32", max_shard_bytes: int | None = None) -> Path:
    """Write ``model`` as a transformers checkpoint in the directory ``path`` (created):
    ``config.json`` and ``model.safetensors`` in ``dtype`` ("float32", "float16" or
    "bfloat16"), or shards of at most ``max_shard_bytes`` with ``model.safetensors.index.json``.
    ``family`` defaults to the family the model was loaded as (``load_hf`` sets
    ``model.hf_family``), else to the one ``family_of`` finds; a family the model cannot be
    written as is refused by name before anything is written. ``from_pretrained`` loads the
    result.

    The checkpoint is replaced whole or not at all: every file is written into a fresh folder
    beside ``path`` and fsync'ed, the other files of ``path`` (a tokenizer, a README) are linked
    into it, and the two folders are exchanged in one step (``renameat2(RENAME_EXCHANGE)``;
    where the OS lacks it, two renames). A save that fails or is killed before the exchange
    leaves the old checkpoint as it was. A replaced file keeps its mode; a model memory-mapped
    from the old files keeps reading them. A path that is not a folder, or a file of the
    checkpoint's that is not a regular file (a FIFO, a folder), is refused with a ValueError
    before anything is written."""
    _check_save_arguments(model, path, dtype, max_shard_bytes)
    try:
        from safetensors.numpy import save_file
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("save_hf writes with the safetensors library: "
                          "pip install 'normlab[hf]'") from e
    import ml_dtypes

    config = model.config
    family = fam.writable_family(config, model.hf_family if family is None else family)
    hf = fam.hf_config(config, family)
    hf["dtype"] = dtype
    np_dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    tensors = {k: np.ascontiguousarray(v, dtype=np_dtype)
               for k, v in fam.to_hf_tensors(model.parameters(), config, family).items()}
    root = check_output_dir(path, what="save_hf path")
    shards = list(_shards(tensors, max_shard_bytes))
    names = ([WEIGHTS_FILE] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    if root.is_dir():  # every file it writes or removes is new or a regular file: checked first
        for name in (*names, WEIGHTS_FILE, INDEX_FILE, CONFIG_FILE):
            check_output_path(root / name, what=f"save_hf: {name}")
    root.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".saving", dir=root.parent))
    try:
        files = {name: (lambda f, s=shard: save_file(s, f, metadata={"format": "pt"}))
                 for name, shard in zip(names, shards)}
        if len(shards) > 1:
            index = {"metadata": {"total_size": sum(v.nbytes for v in tensors.values())},
                     "weight_map": {k: n for n, sh in zip(names, shards) for k in sh}}
            files[INDEX_FILE] = _json_writer(json.dumps(index, indent=2) + "\n")
        files[CONFIG_FILE] = _json_writer(json.dumps(hf, indent=2, sort_keys=True) + "\n")
        for name, write in files.items():  # the config last
            _write_durably(new / name, write, root / name)
        _carry_over(root, new, set(files))
        _fsync_dir(new)
        _switch(new, root)
    finally:
        shutil.rmtree(new, ignore_errors=True)  # the old checkpoint after the exchange
    _fsync_dir(root.parent)
    return root


def _check_save_arguments(model: GPT, path: object, dtype: object,
                          max_shard_bytes: object) -> None:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a normlab GPT; got {type(model).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    ck.choice(dtype, "dtype", ("float32", "float16", "bfloat16"))
    if max_shard_bytes is not None:
        ck.integer(max_shard_bytes, "max_shard_bytes", lo=1)


def _json_writer(text: str) -> Callable[..., None]:
    def write(name: str) -> None:
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)

    return write


def _write_durably(target: Path, write: Callable[..., None], old: Path) -> None:
    """``write(target)``, then the mode of the file it replaces (or 0o666 less the umask), and
    fsync."""
    write(str(target))
    umask = os.umask(0)
    os.umask(umask)
    mode = stat.S_IMODE(old.stat().st_mode) if old.is_file() else 0o666 & ~umask
    with open(target, "rb+") as f:
        os.fchmod(f.fileno(), mode)
        os.fsync(f.fileno())


_SHARD = re.compile(r"^model-\d{5}-of-\d{5}\.safetensors$")


def _carry_over(root: Path, new: Path, written: set[str]) -> None:
    """Link (or copy) into ``new`` what ``root`` holds besides the checkpoint's own files, and
    give ``new`` the folder's mode."""
    umask = os.umask(0)
    os.umask(umask)
    if not root.is_dir():
        os.chmod(new, 0o777 & ~umask)
        return
    os.chmod(new, stat.S_IMODE(root.stat().st_mode))
    for entry in os.scandir(root):
        if (entry.name in written or entry.name in (WEIGHTS_FILE, INDEX_FILE)
                or _SHARD.match(entry.name)):
            continue  # the old checkpoint's own files: replaced or dropped
        src, dst = Path(entry.path), new / entry.name
        if entry.is_dir(follow_symlinks=False):
            shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(src, dst)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - a platform without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux's renameat2); False where the OS or
    the file system cannot."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:  # pragma: no cover - not Linux
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:  # pragma: no cover - an old C library
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not supported here
        return False
    raise OSError(err, f"save_hf: exchanging {str(a)!r} and {str(b)!r}: {os.strerror(err)}")


def _switch(new: Path, root: Path) -> None:
    """Put the folder ``new`` at ``root``; the old folder (if any) ends at ``new``."""
    if not root.exists():
        os.rename(new, root)
        new.mkdir()  # rmtree's target: an empty folder
        return
    if _exchange(new, root):
        return
    aside = new.with_suffix(".old")  # pragma: no cover - only where renameat2 is missing
    os.rename(root, aside)  # pragma: no cover
    os.rename(new, root)  # pragma: no cover
    os.rename(aside, new)  # pragma: no cover

def _shards(tensors: dict[str, np.ndarray], limit: int | None) -> Iterator[dict[str, np.ndarray]]:
    """Consecutive groups of tensors of at most ``limit`` bytes (a larger tensor alone)."""
    if limit is None:
        yield tensors
        return
    shard: dict[str, np.ndarray] = {}
    size = 0
    for k, v in tensors.items():
        if shard and size + v.nbytes > limit:
            yield shard
            shard, size = {}, 0
        shard[k] = v
        size += v.nbytes
    if shard:
        yield shard
