"""``normlab list``: the lab's experiments, with their titles and citations (``--verbose``: every
config field as the flag ``normlab run NAME`` takes it, its quick and full values)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print each experiment's config fields, as flags of normlab run")


def main(args: argparse.Namespace) -> int:
    from ..arguments import flag_of
    from ..configs import configure
    from ..running import load, registry

    for name in registry():
        module = load(name)
        print(f"{name:<26} {module.CARD.title}")
        print(f"{'':<26} {module.CARD.citation}")
        if args.verbose:
            quick, full = configure(module, "quick"), configure(module, "full")
            for field, value in _leaves(quick):
                other = dict(_leaves(full))[field]
                tail = "" if other == value else f" (full: {other!r})"
                print(f"{'':<28}{flag_of(field)} {value!r}{tail}")
    print("\nnormlab run NAME [--tiny|--quick|--full] [--FIELD VALUE ...] [--out DIR] [--seed N]; "
          "normlab report [--out DIR] [--rejudge]")
    return 0


def _leaves(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of every field of a config, nested configs' fields included."""
    import dataclasses

    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", value
