"""``normlab run NAME``: run one experiment, write ``result.json`` and its figures.

Every field of the experiment's ``Config`` is a flag after NAME (``normlab run dropout --draws
5000``; a training experiment's recipe as ``--base.steps 100``, ``--base.model.d-model 64``);
``normlab run NAME --help`` lists them with their comments and defaults. Every argument is checked
before anything runs or is written: a bad one is one line naming the flag, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any

from ..arguments import add_output_arguments, add_size_arguments
from ..sweep.executors import add_executor_arguments

DEFAULT_OUT = "runs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the experiment (see `normlab list`)")
    p.add_argument("fields", nargs=argparse.REMAINDER, metavar="--FIELD VALUE",
                   help="any field of the experiment's config (normlab run NAME --help lists "
                   "them), and the flags below")
    _add_common(p)


def _add_common(p: argparse.ArgumentParser) -> None:
    add_size_arguments(p)
    add_output_arguments(p, DEFAULT_OUT, "output folder; files go to OUT/NAME/")
    p.add_argument("--cache", action="store_true",
                   help="reuse a finished result in OUT/NAME/ with the same configuration")
    add_executor_arguments(p)


def parse(args: argparse.Namespace) -> tuple[ModuleType, argparse.Namespace, Any]:
    """The experiment module, the checked arguments (the flags after NAME parsed against the
    experiment's config) and its Config. Raises UsageError before anything runs."""
    from ..arguments import (
        add_config_arguments,
        check_output_arguments,
        check_output_files,
        config_overrides,
    )
    from ..cache import RESULT_FILE
    from ..cli import ArgumentParser, UsageError
    from ..running import load

    try:
        module = load(args.name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    p = ArgumentParser(prog=f"normlab run {module.CARD.name}",
                       description=f"{module.CARD.title}. {module.CARD.method}")
    _add_common(p)
    add_config_arguments(p.add_argument_group("the experiment's config"), module.Config,
                         skip=frozenset({"seed"}))  # --seed above
    p.set_defaults(**{k: v for k, v in vars(args).items() if k != "fields"})
    full = p.parse_args(args.fields)
    full.seed = check_output_arguments(full)
    check_output_files(full.out, [f"{module.CARD.name}/{RESULT_FILE}"])
    return module, full, checked_config(module, full.size, full.seed, config_overrides(full))


def checked_config(module: ModuleType, size: str, seed: int | None,
                   overrides: dict[str, Any]) -> Any:
    """The configured Config, its refusal (a field's check) turned into a UsageError that names
    the flags given."""
    from ..arguments import flag_of
    from ..cli import UsageError
    from ..configs import configure

    try:
        config = configure(module, size, seed, overrides)
    except (TypeError, ValueError) as exc:
        given = ", ".join(flag_of(k) for k in overrides)
        raise UsageError(f"{exc}" + (f" (flags given: {given})" if given else "")) from None
    check_training_memory(config)
    return config


def check_training_memory(config: Any) -> None:
    """A training experiment's recipe (each ``TrainConfig`` field of its config, ``base``) must fit
    the machine's memory (``normlab.train.budget``), checked before anything runs: a UsageError
    naming the flag to lower (``--base.steps``), not a failure once the sweep starts."""
    import dataclasses

    from ...train import TrainConfig
    from ...train.budget import MemoryBudgetError, check_memory
    from ..arguments import flag_of
    from ..cli import UsageError

    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, TrainConfig):
            try:
                def flag(field: str, at: str = f.name) -> str:
                    return flag_of(f"{at}.{field}")

                check_memory(value, flag=flag)
            except MemoryBudgetError as exc:
                raise UsageError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    from ..arguments import config_overrides, make_output_dir
    from ..progress import reporter
    from ..running import run_experiment
    from ..sweep.executors import executor_from_args

    module, args, _ = parse(args)
    executor = executor_from_args(args)
    make_output_dir(args.out)
    name = module.CARD.name
    with reporter(1, "run") as rep:
        cb = rep.start(name)
        try:
            o = run_experiment(name, size=args.size, seed=args.seed,
                               overrides=config_overrides(args), out_dir=args.out, progress=cb,
                               use_cache=args.cache, executor=executor)
        except (ValueError, TypeError, ArithmeticError, MemoryError, RuntimeError) as exc:
            rep.finish(name, "failed")  # a value the checks let through, refused while measuring
            print(f"normlab run {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        rep.finish(name, o.result.verdict)
    r = o.result
    assert o.out_dir is not None  # run_experiment was given out_dir
    print(f"\n{r.title}: {r.verdict}\n  claim:     {r.claim}\n  published: {r.published}\n"
          f"  measured:  {r.measured}")
    for c in r.checks:
        print(f"  [{c.status:>5}] {c.claim}: {c.measured}  (rule: {c.rule})")
    print(f"\nwrote {o.out_dir / 'result.json'} and {len(r.figures)} figure(s)"
          f" ({'cached' if o.reused else f'{r.wall_s:.2f} s'})")
    return 0
