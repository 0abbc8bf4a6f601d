"""Command-line arguments shared by the lab's commands: the size flags, per-field flags built from
a config dataclass, and the checks every command runs on its arguments before any work starts.

Every check raises ``normlab.lab.cli.UsageError`` with the flag named and what it accepts, so a
command prints one line and exits with status 2; the checks themselves are ``normlab._checks``'
and ``normlab._files``' (one home each), given the flag's name.

    add_config_arguments(parser, Config)   # --FIELD VALUE for every field (nested: --base.steps)
    overrides = config_overrides(args)     # {"draws": 500, "base.steps": 40}
    seed = check_flag(ck.integer, args.seed, "--seed", lo=0)
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable
from typing import Any

from .cli import UsageError

OVERRIDE = "config:"  # the dest prefix of per-field flags (the rest is the dotted field name)


def check_flag(check: Callable[..., Any], value: Any, flag: str, **bounds: Any) -> Any:
    """``check(value, flag, **bounds)`` (a ``normlab._checks`` check, or a ``normlab._files`` one
    wrapped to take the flag as its name) with its TypeError or ValueError turned into a
    UsageError; returns the checked value."""
    if value is None:
        return None
    try:
        return check(value, flag, **bounds)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def add_size_arguments(p: argparse.ArgumentParser) -> None:
    """``--quick`` (the default) / ``--full`` / ``--tiny``, stored as ``args.size``: the size
    flags of ``normlab run`` and ``normlab report``."""
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="the quick sizes (default: minutes on a laptop)")
    size.add_argument("--full", dest="size", action="store_const", const="full",
                      help="the full sizes (closer to the papers' settings; much longer)")
    size.add_argument("--tiny", dest="size", action="store_const", const="tiny",
                      help="the tiny sizes (seconds; a smoke test, numbers are noisy)")
    p.set_defaults(size="quick")


def add_output_arguments(p: argparse.ArgumentParser, default_out: str, what: str) -> None:
    """``--out`` and ``--seed``, as ``normlab run`` and ``normlab report`` take them."""
    p.add_argument("--out", default=default_out, help=f"{what} (default {default_out}/)")
    p.add_argument("--seed", default=None, metavar="N",
                   help="random seed, an integer >= 0 (default: each config's)")


def check_output_arguments(args: argparse.Namespace) -> int | None:
    """Check ``--out`` (a writable folder, or one that can be created) and ``--seed`` (an integer
    >= 0); returns the seed. Writes nothing."""
    from .. import _checks as ck
    from .._files import check_output_dir

    check_flag(lambda path, flag: check_output_dir(path, what=flag), args.out, "--out")
    if args.seed is None:
        return None
    text = str(args.seed).strip()
    value = int(text) if text.lstrip("-").isdigit() else text
    return check_flag(ck.integer, value, "--seed", lo=0)


def check_output_files(out: Any, names: Any, *, what: str = "--out") -> None:
    """Check the files a command will write under its checked ``--out`` folder: each of ``names``
    (``"report.html"``, ``"dropout/result.json"``) must have a folder that is one or can be made,
    and be new or a regular file (a FIFO, device or folder in its place is refused, as
    ``normlab._files.atomic_write`` would refuse it after the work). Writes nothing."""
    from pathlib import Path

    from .._files import check_output_dir, check_output_path

    for name in names:
        target = Path(out) / name
        where = f"{what} ({name})"
        check_flag(lambda path, flag: check_output_dir(path, what=flag), target.parent, where)
        if target.parent.is_dir():
            check_flag(lambda path, flag: check_output_path(path, what=flag), target, where)


def make_output_dir(path: Any) -> None:
    """Create the checked ``--out`` folder (called once every argument is checked); a folder the
    system refuses to create is a UsageError, before any work."""
    from pathlib import Path

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create {str(path)!r}: {exc.strerror or exc}") from None


# ---- per-field flags from a config dataclass ------------------------------------------------
def add_config_arguments(group: Any, cls: Any, *, prefix: str = "", flag_prefix: str | None = None,
                         defaults: Any = None, skip: frozenset[str] = frozenset(),
                         aliases: dict | None = None) -> None:
    """A flag ``--PREFIXNAME`` for every field of the dataclass ``cls`` (underscores as hyphens;
    a nested dataclass's fields as ``--outer.inner``), its help the field's comment and its
    default the dataclass's (``defaults``: an instance to show instead). Given values land in
    ``args`` under ``config:PREFIXNAME`` (see :func:`config_overrides`); ``flag_prefix`` (default
    ``prefix``) is what the flags themselves start with, ``aliases`` maps a field to more
    flags."""
    from ..train.config import field_infos

    defaults = cls() if defaults is None else defaults
    flag_prefix = prefix if flag_prefix is None else flag_prefix
    for info in field_infos(cls):
        if info.name in skip:
            continue
        default = getattr(defaults, info.name)
        if dataclasses.is_dataclass(info.type):
            add_config_arguments(group, info.type, prefix=f"{prefix}{info.name}.",
                                 flag_prefix=f"{flag_prefix}{info.name}.", defaults=default)
            continue
        names = [f"--{flag_prefix}{info.name.replace('_', '-')}",
                 *(aliases or {}).get(info.name, [])]
        kw = _flag_kwargs(info.type, info.optional)
        group.add_argument(*names, dest=OVERRIDE + prefix + info.name, default=None,
                           help=f"{info.comment or info.name} (default: {default})", **kw)


def _flag_kwargs(kind: Any, optional: bool) -> dict[str, Any]:
    """argparse keywords for a field type: bool a --x/--no-x pair, tuple[X, ...] one or more
    values, ``X | None`` also the word none."""
    if kind is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        return {"nargs": "+", "type": _parser(args[0], False), "metavar": _metavar(args[0])}
    return {"type": _parser(kind, optional),
            "metavar": _metavar(kind) + ("|none" if optional else "")}


def _metavar(kind: Any) -> str:
    if typing.get_origin(kind) is tuple:
        return "x".join(_metavar(a) for a in typing.get_args(kind))
    return getattr(kind, "__name__", "VALUE").upper()


def _parser(kind: Any, optional: bool) -> Callable[[str], Any]:
    """Text to a value of ``kind``: int, float, str, or a fixed tuple written ``AxB``."""
    if typing.get_origin(kind) is tuple:
        parts = [_parser(a, False) for a in typing.get_args(kind)]

        def parse(text: str) -> Any:
            items = text.replace(",", "x").split("x")
            if len(items) != len(parts):
                raise ValueError(text)
            return tuple(p(i) for p, i in zip(parts, items))
    else:
        def parse(text: str) -> Any:
            return kind(text)

    def parse_optional(text: str) -> Any:
        return None if optional and text.lower() == "none" else parse(text)

    parse_optional.__name__ = _metavar(kind).lower()  # argparse's "invalid int value" names it
    return parse_optional


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The per-field flags that were given: dotted field name -> value (lists as tuples)."""
    out = {}
    for key, value in vars(args).items():
        if key.startswith(OVERRIDE) and value is not None:
            out[key[len(OVERRIDE):]] = tuple(value) if isinstance(value, list) else value
    return out


def flag_of(field: str) -> str:
    """The flag of a dotted field name: ``base.batch_size`` -> ``--base.batch-size``."""
    head, _, last = field.rpartition(".")
    return f"--{head + '.' if head else ''}{last.replace('_', '-')}"
