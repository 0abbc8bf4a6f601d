"""``normlab train``: train the decoder-only model from the command line.

Every field of ``GPTConfig`` and ``TrainConfig`` is a flag (``--n-layers``, ``--qk-norm``, ...,
with the short aliases ``--depth``, ``--width``, ``--heads``, ``--batch``, ``--seq``), its help the
field's comment in the dataclass and its default the dataclass's. An inconsistent combination is
refused with the config's message before anything runs. The progress bar shows the loss and
tokens per second; ``--json PATH`` writes the config, the per-step metrics and the summary
(``final_val_loss`` and ``entropy_floor`` at the top level); the last line printed is the
validation loss against the entropy floor. Exit status: 0 when every step ran, 1 when the run
stopped early (divergence), 2 for bad input.

Every argument is checked before the model is built, and a refusal is one line naming the flag
(exit status 2): an output (``--json``, ``--checkpoint``) must be a new file or a regular file in
an existing folder, and no output may name an input (``--data-path``, ``--resume``, a
``--precision`` policy file) or the other output; ``--data-path`` must be a regular text file of
bounded size (``--data-path`` alone implies ``--data file``; with another ``--data`` it is refused);
a flag the run would not read is refused (``--vocab-size`` where the corpus sets the vocabulary,
``--markov-order`` without ``--data markov``, ``--momentum`` without ``--optimizer sgd``, ...: see
``normlab.train.config.READ_ONLY_WITH``); the run's memory estimate (``normlab.train.budget``) must
fit the machine. An existing ``--checkpoint`` file is replaced only
by the run it holds (``--resume`` of the same file) or with ``--overwrite``, and a run that stops
early never writes its checkpoint: the file keeps the last state that can be resumed. A
``--resume`` of a run that already did its ``--steps`` says so and writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...train import Trainer
    from ...train.config import TrainConfig

ALIASES = {"n_layers": ["--depth"], "d_model": ["--width"], "n_heads": ["--heads"],
           "batch_size": ["--batch"], "seq_len": ["--seq"]}
# the nested config; float64 is for checks, not training runs
NOT_FLAGS = frozenset({"model", "dtype"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ...models import GPTConfig
    from ...train.config import TrainConfig, default_model
    from ..arguments import add_config_arguments

    add_config_arguments(p.add_argument_group("model"), GPTConfig, prefix="model.", flag_prefix="",
                         defaults=default_model(), skip=NOT_FLAGS, aliases=ALIASES)
    add_config_arguments(p.add_argument_group("training"), TrainConfig, skip=NOT_FLAGS,
                         aliases=ALIASES)
    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="PATH",
                     help="write the config, per-step metrics and summary "
                     "to PATH as JSON (written atomically)")
    out.add_argument("--checkpoint", metavar="PATH", help="save the run to PATH (.npz) at the end "
                     "and every --checkpoint-every steps")
    out.add_argument("--checkpoint-every", type=int, metavar="N", default=None,
                     help="checkpoint interval in steps (needs --checkpoint)")
    out.add_argument("--resume", metavar="PATH", help="continue the run saved in PATH; flags given "
                     "must match it (only --steps may change)")
    out.add_argument("--overwrite", action="store_true", help="let a fresh run replace an existing "
                     "--checkpoint file (by default only a resume of that file does)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace,
                     base: TrainConfig | None = None) -> TrainConfig:
    """A TrainConfig: ``base`` (default: the defaults) with every flag that was given."""
    from ...train.config import TrainConfig
    from ..arguments import config_overrides

    base = TrainConfig() if base is None else base
    return base.with_overrides(config_overrides(args))


def flag(field: str) -> str:
    """The flag of a config field: ``model.n_layers`` -> ``--n-layers``, ``lr`` -> ``--lr``."""
    return "--" + field.removeprefix("model.").replace("_", "-")


def _config_error(exc: Exception) -> str:
    """A config's message with its field written as the flag (``config: lr must ...`` ->
    ``--lr must ...``)."""
    from ...models import GPTConfig
    from ...train.config import TrainConfig

    text = str(exc).removeprefix("config: ")
    names = ({f.name for f in dataclasses.fields(TrainConfig)}
             | {f.name for f in dataclasses.fields(GPTConfig)})
    head = re.match(r"(\w+)", text)
    if head and head.group(1) in names:
        return flag(head.group(1)) + text[len(head.group(1)):]
    return text


def _check_data_flags(args: argparse.Namespace) -> None:
    """``--data-path`` alone means ``--data file`` (said on stderr); with another ``--data`` it
    is refused."""
    from ..arguments import OVERRIDE
    from ..cli import UsageError

    data = getattr(args, OVERRIDE + "data")
    if getattr(args, OVERRIDE + "data_path") is not None:
        if data is None:
            data = "file"  # said once every check has passed (a refusal stays one line)
            setattr(args, OVERRIDE + "data", data)
            args.data_implied = True
        elif data != "file":
            raise UsageError(f"--data-path is read only with --data file; got --data {data} "
                             f"(drop --data-path, or give --data file)")


def _check_unread(args: argparse.Namespace, cfg: TrainConfig) -> None:
    """Refuse a flag the run would not read (``train.config.READ_ONLY_WITH``: ``--markov-order``
    without ``--data markov``, ``--momentum`` without ``--optimizer sgd``, ...): silently ignoring
    it would run something other than what was asked."""
    from ...train.config import unread_fields
    from ..arguments import config_overrides
    from ..cli import UsageError

    deciders = {name: getattr(cfg, name) for name in ("data", "schedule", "optimizer")}
    for name, rule in unread_fields(config_overrides(args), deciders):
        given, decider, value = flag(name), flag(rule.decider), deciders[rule.decider]
        if rule.note:
            raise UsageError(f"{given}: with {decider} {value} {rule.note}; drop {given}")
        raise UsageError(f"{given} is read only with {decider} {' or '.join(rule.values)}; got "
                         f"{decider} {value} (drop {given}, or give {decider} {rule.values[0]})")


def _is_file(text: str) -> bool:
    """Whether ``text`` names an existing file (False for a JSON object or a name too long)."""
    from pathlib import Path

    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _check_paths(args: argparse.Namespace, cfg: TrainConfig) -> None:
    """Outputs writable and distinct from every input; an existing checkpoint replaced only by
    its own run or with --overwrite."""
    from pathlib import Path

    from ..._files import check_distinct, check_output_path
    from ..cli import UsageError

    outputs = {"--json": args.json, "--checkpoint": args.checkpoint}
    try:
        for name, path in outputs.items():
            if path is not None:
                check_output_path(path, what=name)
        inputs = {"--data-path": cfg.data_path if cfg.data == "file" else None,
                  "--precision": cfg.precision if _is_file(cfg.precision) else None}
        check_distinct(outputs, inputs)
        check_distinct({"--json": args.json}, {"--resume": args.resume})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.checkpoint is not None and Path(args.checkpoint).exists() and not args.overwrite:
        same = (args.resume is not None
                and Path(args.resume).resolve() == Path(args.checkpoint).resolve())
        if not same:
            raise UsageError(f"--checkpoint {args.checkpoint}: the file exists (another run's "
                             f"checkpoint, or another file); --resume {args.checkpoint} continues "
                             f"that run, --overwrite replaces it")


def _build(args: argparse.Namespace) -> tuple[Trainer | None, str | None]:
    """The checked config and the trainer (a fresh one, or the one saved in --resume); a
    UsageError naming the flag for anything that cannot run. Returns (trainer, None) or (None,
    message) when a resume has nothing to do."""
    from ..._files import check_input_file
    from ...train import CheckpointError
    from ...train.budget import MemoryBudgetError, check_memory
    from ...train.data import MAX_TEXT_BYTES
    from ...train.trainer import same_run
    from ..cli import UsageError

    if args.checkpoint_every is not None and (args.checkpoint is None or args.checkpoint_every < 1):
        raise UsageError("--checkpoint-every needs --checkpoint PATH and N >= 1")
    _check_data_flags(args)
    saved, step = _saved_run(args)
    try:
        cfg = config_from_args(args, saved)
    except (TypeError, ValueError) as exc:
        raise UsageError(_config_error(exc)) from None
    _check_unread(args, cfg)
    if cfg.data == "file":
        assert cfg.data_path is not None  # TrainConfig refuses data='file' without one
        try:
            check_input_file(cfg.data_path, what="--data-path", max_bytes=MAX_TEXT_BYTES)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    _check_paths(args, cfg)
    if saved is not None:
        try:
            cfg = same_run(saved, cfg, args.resume)
        except CheckpointError as exc:
            raise UsageError(f"--resume: {exc}") from None
    if saved is not None and step >= cfg.steps:
        if step > cfg.steps:
            raise UsageError(f"--steps {cfg.steps}: the run in {args.resume} is at step {step} "
                             f"already; give --steps above {step} to train on")
        return None, (f"normlab train: nothing to do: the run in {args.resume} finished its "
                      f"{step} steps; give --steps above {step} to train on")
    try:
        check_memory(cfg, flag=flag)
    except MemoryBudgetError as exc:
        raise UsageError(str(exc)) from None
    return _trainer(args, cfg), None


def _saved_run(args: argparse.Namespace) -> tuple[TrainConfig | None, int]:
    """The config and step of the run in ``--resume`` ((None, 0) without one)."""
    from ...train import CheckpointError
    from ...train import checkpoint as ckpt
    from ...train.config import TrainConfig
    from ..cli import UsageError

    if args.resume is None:
        return None, 0
    try:
        _, meta = ckpt.load(args.resume)
        step = ckpt.check_run(meta, args.resume)
        return TrainConfig.from_dict(meta["config"]), step
    except CheckpointError as exc:
        raise UsageError(f"--resume: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--resume: checkpoint {args.resume!r}: its config is not valid "
                         f"({exc})") from None


def _trainer(args: argparse.Namespace, cfg: TrainConfig) -> Trainer:
    """A fresh trainer, or the one saved in ``--resume``; a UsageError naming the flag."""
    from ...train import CheckpointError, Trainer
    from ..cli import UsageError

    try:
        if args.resume is not None:
            return Trainer.resume(args.resume, cfg)
        return Trainer(cfg)
    except CheckpointError as exc:
        raise UsageError(f"--resume: {exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a corpus shorter than --seq-len
        text = _config_error(exc)
        source, _, rest = text.partition(": ")  # a corpus names itself pydoc or file:NAME
        if source == "pydoc" or (source.startswith("file:") and cfg.data == "file"):
            given = "--data pydoc" if source == "pydoc" else f"--data-path {cfg.data_path}"
            text = f"{given}: {rest}"
        raise UsageError(text) from None


def main(args: argparse.Namespace) -> int:
    from ..._files import write_json
    from ..progress import reporter

    trainer, nothing = _build(args)
    if getattr(args, "data_implied", False):
        print("normlab train: --data-path implies --data file", file=sys.stderr)
    if trainer is None:
        print(nothing, file=sys.stderr)
        return 0
    cfg = trainer.config
    m = cfg.model
    print(f"normlab train: {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, "
          f"{m.placement}-{m.norm}, {trainer.model.num_parameters():,} parameters; "
          f"data {cfg.data} "
          f"(V = {m.vocab_size}), {cfg.steps} steps of {cfg.batch_size} x {m.seq_len} tokens, "
          f"{cfg.optimizer} lr {cfg.lr:g} {cfg.schedule}, precision {cfg.precision}",
          file=sys.stderr)
    run = {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every}
    try:
        if args.quiet:
            result = trainer.run(**run)
        else:
            with reporter(1, "train") as rep:
                result = trainer.run(progress=rep.start("train"), **run)
                rep.finish("train",
                           f"{result.steps_done} steps, {result.tokens_per_s:,.0f} tokens/s")
    except (OSError, ValueError) as exc:  # checked before training; the disk can still refuse
        if not _is_write_error(exc, args.checkpoint):
            raise
        print(f"normlab train: --checkpoint {args.checkpoint}: cannot be written "
              f"({exc.strerror or exc if isinstance(exc, OSError) else exc}); the run stopped at "
              f"step {trainer.step}, the file keeps what it held", file=sys.stderr)
        return 1
    failed = False
    if args.json is not None:
        try:
            write_json(args.json, result.to_dict(), what="--json", indent=1)
        except (OSError, ValueError) as exc:
            failed = True
            print(f"normlab train: --json {args.json}: cannot be written "
                  f"({exc.strerror or exc if isinstance(exc, OSError) else exc})", file=sys.stderr)
    if result.stopped is not None and args.checkpoint is not None:
        print(f"normlab train: the run stopped early; {args.checkpoint} was not written (it keeps "
              f"what it held)", file=sys.stderr)
    print(result.summary())
    return 0 if result.stopped is None and not failed else 1


def _is_write_error(exc: Exception, checkpoint: str | None) -> bool:
    """Whether ``exc`` came from writing the checkpoint (an OSError, or normlab._files' refusal of
    a target that stopped being a regular file), not from training."""
    if checkpoint is None:
        return False
    if isinstance(exc, OSError):
        return True
    return str(exc).startswith("checkpoint:")
