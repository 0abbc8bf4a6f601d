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
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a checkpoint directory (config.json + model.safetensors or shards)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", type=Path, help="a UTF-8 text file, tokenized with PATH/tokenizer.json")
    src.add_argument("--tokens", type=Path, help="a .npy file of 1-D integer token ids")
    p.add_argument("--seq", type=int, default=None,
                   help="tokens measured (default: the model's seq_len, at most 256)")
    p.add_argument("--policies", nargs="*", default=None,
                   help="precision presets to run (default: all but fp32)")
    p.add_argument("--out", type=Path, default=Path("normlab-inspect"), help="output directory")
    p.add_argument("--json", action="store_true", help="also print the JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def tokens_of(args: argparse.Namespace):
    """The token ids of ``--tokens`` or of ``--text`` through the checkpoint's tokenizer.json."""
    import numpy as np

    if args.tokens is not None:
        if not args.tokens.is_file():
            raise ValueError(f"--tokens {args.tokens}: no such file")
        ids = np.load(args.tokens, allow_pickle=False)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"--tokens must hold a 1-D integer array; got {ids.dtype} {ids.shape}")
        return ids
    if not args.text.is_file():
        raise ValueError(f"--text {args.text}: no such file")
    tok = Path(args.path) / "tokenizer.json"
    if not tok.is_file():
        raise ValueError(f"{args.path} has no tokenizer.json: pass token ids with --tokens FILE.npy")
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("--text needs the tokenizers library: pip install 'normlab[hf]'") from e
    return np.asarray(Tokenizer.from_file(str(tok)).encode(args.text.read_text()).ids, np.int64)


def main(args: argparse.Namespace) -> int:
    import json

    from ...models import load_hf
    from ...models.inspect import inspect_model
    from ...precision import PRESETS
    from ..inspect_page import render
    from ..progress import reporter

    policies = tuple(p for p in PRESETS if p != "fp32") if args.policies is None else tuple(args.policies)
    name = Path(args.path).resolve().name
    try:
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
        print(f"error: {exc}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1)
    (args.out / "inspect.json").write_text(text + "\n")
    (args.out / "inspect.html").write_text(render(result, name))
    if args.json:
        print(text)
    else:
        print(f"wrote {args.out / 'inspect.html'} and {args.out / 'inspect.json'}")
    return 0
