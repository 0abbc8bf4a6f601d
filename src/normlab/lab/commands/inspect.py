"""``normlab inspect PATH``: the lab's measurements on a transformers checkpoint (gpt2, llama,
mistral, qwen2, qwen3, gemma2, olmo2) over a text.

    normlab inspect ./my-model --text prompt.txt        # tokenized with PATH/tokenizer.json
    normlab inspect ./my-model --tokens ids.npy --json  # token ids; the JSON also on stdout

Writes ``inspect.html`` and ``inspect.json`` into ``--out``: per layer the residual stream's RMS
and max |x|, the norms' gains, the largest attention logit and the attention entropy per head,
the output log Z and mean logit; per weight, activation and gradient its amax, log2 |x|
histogram and the fractions that overflow, flush or lose precision in bf16, fp16, fp8 (E4M3,
E5M2) and MXFP8 / MXFP4 with per-tensor, delayed and MX block scaling; the loss under each
precision preset against float32 (emulated).

Every argument is checked before any work (``--out`` a folder that can be written, its two files
new or regular files that are none of the inputs, ``--text`` / ``--tokens`` regular files of
bounded size, ``--seq`` and ``--policies``); a refusal, or a checkpoint or token file that cannot
be read, is one line naming it (exit status 2). Both files are written atomically.

``--torch`` loads the checkpoint with transformers (any causal-LM family) and refuses what
normlab's own loader refuses, in one line, exit status 2: every safetensors header is read by
normlab's rules first (``normlab.models.hf.safetensors.read_header``), the config's layer count
must be the number of layers the checkpoint stores and the model must fit in the memory available
(before a module is built), and transformers' loading report must list no missing tensor and no
shape that the config contradicts (``normlab.torch.load_causal_lm``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path",
                   help="a checkpoint directory (config.json + model.safetensors or shards)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", type=Path,
                     help="a UTF-8 text file, tokenized with PATH/tokenizer.json")
    src.add_argument("--tokens", type=Path, help="a .npy file of 1-D integer token ids")
    p.add_argument("--seq", type=int, default=None,
                   help="tokens measured (default: the model's seq_len, at most 256)")
    p.add_argument("--policies", nargs="*", default=None,
                   help="precision presets to run (default: all but fp32)")
    p.add_argument("--out", type=Path, default=Path("normlab-inspect"), help="output directory")
    p.add_argument("--json", action="store_true", help="also print the JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--torch", action="store_true",
                   help="load PATH with transformers and measure the torch model itself (any "
                        "causal-LM family; needs normlab[torch]): normlab.torch.inspect")


def tokens_of(args: argparse.Namespace) -> np.ndarray:
    """The token ids of ``--tokens`` or of ``--text`` through the checkpoint's tokenizer.json
    (both checked by :func:`check_arguments`)."""
    import numpy as np

    if args.tokens is not None:
        try:
            ids = np.load(args.tokens, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"--tokens {args.tokens}: not a .npy array ({exc})") from None
        if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"--tokens must hold a 1-D integer array; got "
                             f"{getattr(ids, 'dtype', type(ids).__name__)} "
                             f"{getattr(ids, 'shape', '')}")
        return ids
    tok = Path(args.path) / "tokenizer.json"
    if not tok.is_file():
        raise ValueError(f"{args.path} has no tokenizer.json: pass token ids with "
                         f"--tokens FILE.npy")
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("--text needs the tokenizers library: pip install 'normlab[hf]'") from e
    try:
        text = args.text.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--text {args.text}: not UTF-8 text ({exc})") from None
    try:  # the library raises a bare Exception for every kind of damage
        ids = np.asarray(Tokenizer.from_file(str(tok)).encode(text).ids, np.int64)
    except Exception as exc:
        text_ = str(exc).strip()
        reason = text_.splitlines()[0][:200] if text_ else type(exc).__name__
        raise ValueError(f"{tok}: not a tokenizer the tokenizers library reads "
                         f"({reason})") from None
    if ids.size == 0:
        raise ValueError(f"--text {args.text}: the tokenizer makes no tokens of it (empty text?)")
    return ids


OUTPUTS = ("inspect.json", "inspect.html")


def check_arguments(args: argparse.Namespace) -> tuple[str, ...]:
    """Every flag before any work or output: ``--seq`` an integer >= 1, ``--policies`` presets,
    ``--text`` / ``--tokens`` a regular file of bounded size, ``--out`` a folder that can be
    written (its inspect.json and inspect.html new or regular files), and no output naming an
    input (the checkpoint's files, the tokens or text: symbolic links followed). Returns the
    policies; raises UsageError."""
    from ... import _checks as ck
    from ..._files import (
        MAX_TEXT_BYTES,
        check_distinct,
        check_input_file,
        check_output_dir,
        check_output_path,
    )
    from ...models.hf import CONFIG_FILE, INDEX_FILE, checkpoint_files
    from ...precision import PRESETS
    from ..arguments import check_flag
    from ..cli import UsageError

    check_flag(ck.integer, args.seq, "--seq", lo=1)
    default = tuple(p for p in PRESETS if p != "fp32")
    policies = default if args.policies is None else tuple(args.policies)
    for p in policies:
        check_flag(ck.choice, p, "--policies", options=PRESETS)
    flag, source = ("--tokens", args.tokens) if args.tokens is not None else ("--text", args.text)
    check_flag(lambda path, f: check_input_file(path, what=f, max_bytes=MAX_TEXT_BYTES),
               source, flag)
    out = check_flag(lambda path, f: check_output_dir(path, what=f), args.out, "--out")
    outputs = {f"--out ({name})": out / name for name in OUTPUTS}
    if out.is_dir():
        for name, path in outputs.items():
            check_flag(lambda path, f: check_output_path(path, what=f), path, name)
    try:
        _, weights = checkpoint_files(args.path)
    except (ValueError, KeyError, TypeError) as exc:  # the checkpoint is checked again as it loads
        raise UsageError(str(exc)) from None
    root = Path(args.path)
    inputs = {flag: source, **{f"PATH ({f.name})": f for f in weights}}
    for name in (CONFIG_FILE, INDEX_FILE, "tokenizer.json"):
        if (root / name).exists():
            inputs[f"PATH ({name})"] = root / name
    check_flag(lambda outs, f: check_distinct(outs, inputs), outputs, "--out")
    return policies


def main(args: argparse.Namespace) -> int:
    from ...models import load_hf
    from ...models.inspect import inspect_model
    from ..arguments import make_output_dir
    from ..cli import UsageError
    from ..progress import reporter

    policies = check_arguments(args)
    make_output_dir(args.out)
    name = Path(args.path).resolve().name
    try:
        if getattr(args, "torch", False):
            from ..._memory import available_memory
            from ...torch import inspect_checkpoint

            check_torch_checkpoint(args.path)
            result = inspect_checkpoint(args.path, tokens_of(args), seq_len=args.seq,
                                        policies=policies, available=available_memory())
            return _write(args, result, name)
        model = load_hf(args.path)
        tokens = tokens_of(args)
        if args.quiet:
            result = inspect_model(model, tokens, seq_len=args.seq, policies=policies)
        else:
            with reporter(1, "inspect") as r:
                update = r.start(name)
                result = inspect_model(model, tokens, seq_len=args.seq, policies=policies,
                                       progress=lambda step, fraction: update(fraction, 1.0, step))
                r.finish(name, f"loss {result['loss']:.4f}")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return _write(args, result, name)


_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_LAYER_NAME = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


def check_torch_checkpoint(path: str) -> None:
    """``--torch``'s checks before transformers reads anything: every safetensors header by
    normlab's rules (and a sharded checkpoint's index against them, each tensor in one shard, as
    ``normlab.models.load_hf`` reads them), and the config's layer count against the layers the
    checkpoint stores (the indices after ``layers.`` / ``h.`` / ``blocks.`` in its tensor
    names) and its number of tensors, so that a config of 10^9 layers is refused before a
    module is built. A ValueError naming the file or the field."""
    from ...models.hf.checkpoint import _checkpoint, _stored

    hf, files, wmap = _checkpoint(path)
    names = list(_stored(files, wmap))  # normlab's own reading: the index against the headers
    key = next((k for k in _LAYER_KEYS if k in hf), None)
    layers = hf.get(key) if key else None
    if not isinstance(layers, int) or isinstance(layers, bool):
        return
    held = sorted({int(m.group(1)) for n in names for m in [_LAYER_NAME.search(n)] if m})
    if held and (layers != len(held) or held != list(range(len(held)))):
        raise ValueError(f"config.json: {key} = {layers} but the checkpoint stores layers "
                         f"{held[0]}..{held[-1]}")
    if layers > 4 * max(len(names), 1):
        raise ValueError(f"config.json: {key} = {layers} but the checkpoint stores only "
                         f"{len(names)} tensors")


def _write(args: argparse.Namespace, result: dict, name: str) -> int:
    from ..._files import atomic_write, dumps_json
    from ..inspect_page import render

    text = dumps_json(result, indent=1)
    atomic_write(args.out / "inspect.json", text + "\n", what="--out (inspect.json)")
    atomic_write(args.out / "inspect.html", render(result, name), what="--out (inspect.html)")
    if args.json:
        print(text)
    else:
        print(f"wrote {args.out / 'inspect.html'} and {args.out / 'inspect.json'}")
    return 0
