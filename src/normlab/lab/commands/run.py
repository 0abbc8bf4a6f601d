"""``normlab run NAME``: run one experiment, write ``result.json`` and its figures."""

from __future__ import annotations

import argparse

from .experiment import add_size_arguments

DEFAULT_OUT = "runs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the experiment (see `normlab list`)")
    add_size_arguments(p)
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"output folder; files go to OUT/NAME/ (default {DEFAULT_OUT}/)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: the config's)")
    p.add_argument("--cache", action="store_true",
                   help="reuse a finished result in OUT/NAME/ with the same configuration")
    add_executor_arguments(p)


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """``--workers`` / ``--ray``: where the training experiments run their sweeps (as in
    ``normlab sweep``); the numbers do not depend on it."""
    p.add_argument("--workers", type=int, metavar="N", default=None,
                   help="processes of the training experiments' sweep pool (default: one per core)")
    p.add_argument("--ray", metavar="auto|ADDRESS|local", default=None,
                   help="run the training experiments' sweeps as Ray tasks: 'auto' joins the "
                   "running cluster, ADDRESS (HOST:PORT) that one, 'local' starts a private "
                   "instance; needs normlab[ray]")


def executor_of(args: argparse.Namespace) -> str:
    """The executor name (``RunOptions.executor``) that ``--workers`` and ``--ray`` ask for."""
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"--workers must be >= 1; got {args.workers}")
    if args.ray is not None:
        if args.workers is not None:
            raise SystemExit("--workers sizes the local pool; on Ray the cluster's CPUs do")
        return f"ray:{args.ray}"
    return "pool" if args.workers is None else f"pool:{args.workers}"


def main(args: argparse.Namespace) -> int:
    from .experiment import load, run_experiment
    from .progress import reporter

    try:
        load(args.name)  # a clear error for an unknown name before anything starts
    except KeyError as exc:
        print(exc.args[0])
        return 2
    with reporter(1, "run") as rep:
        cb = rep.start(args.name)
        o = run_experiment(args.name, size=args.size, seed=args.seed, out_dir=args.out,
                           progress=cb, use_cache=args.cache, executor=executor_of(args))
        rep.finish(args.name, o.result.verdict)
    r = o.result
    print(f"\n{r.title}: {r.verdict}\n  claim:     {r.claim}\n  published: {r.published}\n"
          f"  measured:  {r.measured}")
    for c in r.checks:
        print(f"  [{c.status:>5}] {c.claim}: {c.measured}  (rule: {c.rule})")
    print(f"\nwrote {o.out_dir / 'result.json'} and {len(r.figures)} figure(s)"
          f" ({'cached' if o.reused else f'{r.wall_s:.2f} s'})")
    return 0
