"""``normlab train``: train the decoder-only model from the command line.

Every field of ``GPTConfig`` and ``TrainConfig`` is a flag (``--n-layers``, ``--qk-norm``, ...,
with the short aliases ``--depth``, ``--width``, ``--heads``, ``--batch``, ``--seq``), its help the
field's comment in the dataclass and its default the dataclass's. An inconsistent combination is
refused with the config's message before anything runs. The progress bar shows the loss and
tokens per second; ``--json PATH`` writes the config, the per-step metrics and the summary
(``final_val_loss`` and ``entropy_floor`` at the top level); the last line printed is the
validation loss against the entropy floor. Exit status: 0 when every step ran, 1 when the run
stopped early (divergence), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

ALIASES = {"n_layers": ["--depth"], "d_model": ["--width"], "n_heads": ["--heads"],
           "batch_size": ["--batch"], "seq_len": ["--seq"]}
NOT_FLAGS = {"model", "dtype"}  # the nested config; float64 is for checks, not training runs


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ...models import GPTConfig
    from ...train.config import TrainConfig, default_model
    from ..arguments import add_config_arguments

    add_config_arguments(p.add_argument_group("model"), GPTConfig, prefix="model.", flag_prefix="",
                         defaults=default_model(), skip=NOT_FLAGS, aliases=ALIASES)
    add_config_arguments(p.add_argument_group("training"), TrainConfig, skip=NOT_FLAGS,
                         aliases=ALIASES)
    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="PATH", help="write the config, per-step metrics and summary "
                     "to PATH as JSON (written atomically)")
    out.add_argument("--checkpoint", metavar="PATH", help="save the run to PATH (.npz) at the end "
                     "and every --checkpoint-every steps")
    out.add_argument("--checkpoint-every", type=int, metavar="N", default=None,
                     help="checkpoint interval in steps (needs --checkpoint)")
    out.add_argument("--resume", metavar="PATH", help="continue the run saved in PATH; flags given "
                     "must match it (only --steps may change)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace, base=None):
    """A TrainConfig: ``base`` (default: the defaults) with every flag that was given."""
    from ...train.config import TrainConfig
    from ..arguments import config_overrides

    base = TrainConfig() if base is None else base
    return base.with_overrides(config_overrides(args))


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the kernel.

    A NumPy training step allocates and frees the same few-MB temporaries again and again; by
    default glibc hands large blocks back to the kernel and every new one page-faults (about
    13,000 faults and a sixth of the step time for the benchmark's model). Returns False where
    this is not glibc (nothing changes)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 256 << 20)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..._files import write_json
    from ...train import CheckpointError, Trainer
    from ...train import checkpoint as ckpt
    from ...train.config import TrainConfig
    from ..progress import reporter

    if args.checkpoint_every is not None and (args.checkpoint is None or args.checkpoint_every < 1):
        print("normlab train: --checkpoint-every needs --checkpoint PATH and N >= 1", file=sys.stderr)
        return 2
    for flag, path in (("--json", args.json), ("--checkpoint", args.checkpoint)):
        if path is not None and not Path(path).resolve().parent.is_dir():
            print(f"normlab train: {flag} {path}: its directory does not exist", file=sys.stderr)
            return 2
    try:
        if args.resume is not None:
            arrays, meta = ckpt.load(args.resume)  # refuse a bad file before anything else
            saved = TrainConfig.from_dict(meta["config"])
            trainer = Trainer.resume(args.resume, config_from_args(args, saved))
        else:
            trainer = Trainer(config_from_args(args))
    except (CheckpointError, ValueError, TypeError, KeyError) as exc:
        print(f"normlab train: {exc}", file=sys.stderr)
        return 2
    keep_freed_memory()
    cfg = trainer.config
    m = cfg.model
    print(f"normlab train: {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, "
          f"{m.placement}-{m.norm}, {trainer.model.num_parameters():,} parameters; data {cfg.data} "
          f"(V = {m.vocab_size}), {cfg.steps} steps of {cfg.batch_size} x {m.seq_len} tokens, "
          f"{cfg.optimizer} lr {cfg.lr:g} {cfg.schedule}, precision {cfg.precision}", file=sys.stderr)
    run = dict(checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every)
    if args.quiet:
        result = trainer.run(**run)
    else:
        with reporter(1, "train") as rep:
            result = trainer.run(progress=rep.start("train"), **run)
            rep.finish("train", f"{result.steps_done} steps, {result.tokens_per_s:,.0f} tokens/s")
    if args.json is not None:
        write_json(args.json, result.to_dict(), what="--json", indent=1)
    print(result.summary())
    return 0 if result.stopped is None else 1
