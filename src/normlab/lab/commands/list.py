"""``normlab list``: the lab's experiments, with their titles and citations."""

from __future__ import annotations

import argparse
import importlib

from ..framework import registry


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print each experiment's configuration fields")


def main(args: argparse.Namespace) -> int:
    import dataclasses

    for name, module_path in registry().items():
        module = importlib.import_module(module_path)
        print(f"{name:<26} {module.TITLE}")
        print(f"{'':<26} {module.CITATION}")
        if args.verbose:
            for f in dataclasses.fields(module.Config):
                quick = getattr(module.Config(), f.name)
                full = module.SIZES.get("full", {}).get(f.name, quick)
                print(f"{'':<28}{f.name} = {quick!r} (full: {full!r})")
    print("\nnormlab run NAME [--quick|--full] [--out DIR] [--seed N];  normlab report [--out DIR]")
    return 0
