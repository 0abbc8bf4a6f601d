"""The ``normlab`` command: a thin argparse layer over functions.

Each subcommand lives in its own module with ``add_arguments(parser)`` and ``main(args) -> int``;
modules are imported only when their command runs, so ``normlab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import NoReturn

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("normlab.lab.commands.check", "gradient-check every op and compare it with PyTorch"),
    "list": ("normlab.lab.commands.list", "list the lab's experiments"),
    "run": ("normlab.lab.commands.run", "run one experiment: result.json and figures"),
    "report": ("normlab.lab.commands.report", "run every experiment and write one HTML report"),
    "bench": (
        "normlab.lab.commands.bench",
        "time the fused kernels against the reference, PyTorch and a copy",
    ),
    "train": (
        "normlab.lab.commands.train",
        "train the decoder-only model (any placement, norm, precision)",
    ),
    "formats": (
        "normlab.lab.commands.formats",
        "the number formats (bf16, fp16, fp8, MX fp6/fp4, E8M0) as a table",
    ),
    "inspect": (
        "normlab.lab.commands.inspect",
        "a checkpoint's norms, residual stream, attention and precision headroom",
    ),
    "sweep": (
        "normlab.lab.commands.sweep",
        "run a grid or random sweep of training runs (process pool or Ray); --summary",
    ),
}


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line raises :class:`UsageError` (printed by :func:`main` as
    one line) instead of printing the usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, command=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="normlab",
        description="normlab: normalization, residual design and numeric precision in deep "
        "Transformers, verified and measured on a CPU.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


# The lab's experiments work on small arrays: threads gain little there and, on a laptop's cores
# shared with other work, a multi-threaded BLAS or numba parallel region waits for descheduled
# workers and runs up to 10-100x slower. These commands default to one thread (set
# OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / NUMBA_NUM_THREADS to override).
_ONE_THREAD = ("run", "report", "train")


class UsageError(ValueError):
    """Bad command-line input, found before any work starts: printed as the one line
    ``normlab COMMAND: error: MESSAGE`` (the message names the flag and what it accepts), exit
    status 2, no traceback. Commands raise it from their argument checks."""

    def __init__(self, message: str, command: str | None = None):
        super().__init__(message)
        self.command = command  # "normlab run" when argparse found it; None: the running command


_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def _numba_threads_started() -> bool:
    """Whether this process already launched numba's thread pool (its size is then fixed)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return bool(getattr(parallel, "_is_initialized", False))


def main(argv: list[str] | None = None) -> int:
    first = (sys.argv[1:] if argv is None else argv)[:1]
    if first and first[0] in _ONE_THREAD:  # before NumPy and numba start their threads
        for var in _THREAD_VARS:
            if var == "NUMBA_NUM_THREADS" and _numba_threads_started():
                continue  # numba refuses a new count once its pool runs (main called in-process)
            os.environ.setdefault(var, "1")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"{exc.command or 'normlab'}: error: {exc}", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 0
    if args.command in _ONE_THREAD:  # they measure: freed temporaries reused, not page-faulted
        from .allocator import keep_freed_memory

        keep_freed_memory()
    try:
        return int(importlib.import_module(args._module).main(args) or 0)
    except UsageError as exc:
        print(f"{exc.command or 'normlab ' + args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"normlab {args.command}: interrupted (Ctrl-C){_where(exc)}; {_resume(args)}",
              file=sys.stderr)
        return 128 + signal.SIGINT  # the shell's status of a process stopped by SIGINT
    except BrokenPipeError:  # the reader went away (normlab list -v | head -1): stop quietly
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except MemoryError as exc:
        print(f"normlab {args.command}: error: out of memory{_where(exc)}: the sizes asked for "
              f"do not fit this machine (lower the size flags, e.g. the model's or --draws)",
              file=sys.stderr)
        return 1


def _where(exc: BaseException) -> str:
    """`` in normlab/x/y.py:LINE (function)``: the innermost frame of normlab's own code."""
    tb, last = exc.__traceback__, None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the normlab package
    while tb is not None:
        name = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if name.startswith(root + os.sep):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    rel = os.path.relpath(last.tb_frame.f_code.co_filename, os.path.dirname(root))
    return f" in {rel}:{last.tb_lineno} ({last.tb_frame.f_code.co_name})"


def _resume(args: argparse.Namespace) -> str:
    """How to go on after an interrupt, for the command that ran."""
    command = args.command
    if command == "train":
        ckpt = getattr(args, "checkpoint", None)
        if ckpt and os.path.isfile(ckpt):
            return (f"the last checkpoint written is in {ckpt}: normlab train --resume {ckpt} "
                    f"--checkpoint {ckpt} continues from it")
        return "no checkpoint was written yet (--checkpoint PATH saves one to resume from)"
    if command in ("report", "sweep"):
        return "finished results are kept: run the same command again to resume"
    return "nothing was written half; run the same command again"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # pragma: no cover - no real stdout
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
