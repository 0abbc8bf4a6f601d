"""One ensemble step (normlab.train.Ensemble.train_step) broken down by phase: exclusive time per
phase from a timer wrapped around the modules' forward and backward, the attention kernels, the
loss, the members' updates, their records and their data.

    python benchmarks/profile_ensemble.py [--shape lab] [--members 8] [--steps 10] [--repeats 5]
                                          [--compare SRC_DIR SRC_DIR ...]

The step is benchmarks/train_ensemble.py's (``--shape``: its ``SHAPES``, seeds 0..M-1). One thread
(OpenBLAS, numba), and a malloc that keeps freed memory, as ``normlab train`` sets it. Each round
runs ``--steps`` steps; every phase's figure is the median over ``--repeats`` rounds, in ms per
member-step: ``other`` is the timed round less its phases (the ensemble's and the trainers'
Python, stacking the batches, the timer's own cost), and ``total`` the median round without the
timer (measured in the same rounds, alternating). ``--clock cpu`` (the default) times with the
process's CPU time, as benchmarks/train_ensemble.py's ``--clock cpu``.

``--compare A B``: one child process per source folder (``PYTHONPATH=A/src``, e.g. a git worktree
of an older commit and this checkout), run alternately for ``--repeats`` rounds each, the tables
printed side by side: the same machine at the same time. Phases a version does not have (the
softmax kernel that a fused attention kernel no longer calls) read 0 there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PHASES = (
    "linear products",  # nn.Linear forward and backward (the stacked products, numerics hooks)
    "attention core",  # CausalSelfAttention less its linears and kernels: products, glue
    "attention softmax",  # the (capped, causal) softmax kernel where attention calls it apart
    "attention kernels",  # the compiled attention calls (kernels.attention_lanes), where present
    "norms",  # LayerNorm / RMSNorm modules
    "activation (GELU)",  # MLP less its linears
    "residual glue",  # Residual less its children: the adds, dropout's identity, numerics
    "embeddings",  # Embedding modules forward and backward
    "loss, head glue",  # GPT.forward / backward less their children (cross-entropy, stacking)
    "members' updates",  # Trainer.finish_step: unscale, norms, clipping, AdamW, the scaler
    "records, probes",  # Trainer.forward_record (the loss record, probes' forward measures)
    "data",  # Trainer.next_batch
)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="lab")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="steps per round")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu",
                   help="this process's CPU time (process_time: on a shared, loaded machine, the "
                        "time the step had a core; the default) or wall time (perf_counter)")
    p.add_argument("--compare", nargs="+", metavar="SRC_DIR",
                   help="source folders (each with src/normlab) profiled alternately")
    p.add_argument("--child-rounds", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


class PhaseTimer:
    """Exclusive wall time per phase: each wrapped call's time minus its wrapped callees'."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.totals: dict[str, float] = {}
        self.stack: list[float] = []
        self.on = True

    def wrap(self, owner: object, name: str, phase: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:
            return
        timer = self

        def timed(*args, **kwargs):
            if not timer.on:
                return fn(*args, **kwargs)
            t0 = timer.clock()
            timer.stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = timer.clock() - t0
                inner = timer.stack.pop()
                timer.totals[phase] = timer.totals.get(phase, 0.0) + elapsed - inner
                if timer.stack:
                    timer.stack[-1] += elapsed

        setattr(owner, name, timed)


def instrument(timer: PhaseTimer) -> None:
    """Wrap every phase's functions (those this version of normlab has)."""
    import importlib

    from normlab import nn
    from normlab.models import block, gpt
    from normlab.train import trainer

    for m in ("forward", "backward"):
        timer.wrap(nn.Linear, m, "linear products")
        timer.wrap(nn.CausalSelfAttention, m, "attention core")
        timer.wrap(nn.layers.Norm, m, "norms")
        timer.wrap(nn.MLP, m, "activation (GELU)")
        timer.wrap(nn.Embedding, m, "embeddings")
        timer.wrap(block.Residual, m, "residual glue")
        timer.wrap(gpt.GPT, m, "loss, head glue")
    kern = importlib.import_module("normlab.kernels.attention")
    for n in ("_softmax_forward", "_softmax_backward"):
        timer.wrap(kern, n, "attention softmax")
    try:
        lanes = importlib.import_module("normlab.kernels.attention_lanes")
    except ImportError:  # a version before the kernel
        lanes = None
    for n in ("_forward_call", "_backward_call"):
        timer.wrap(lanes, n, "attention kernels")
    timer.wrap(trainer.Trainer, "finish_step", "members' updates")
    timer.wrap(trainer.Trainer, "forward_record", "records, probes")
    timer.wrap(trainer.Trainer, "next_batch", "data")


def child(a: argparse.Namespace) -> None:
    """Profile the normlab on sys.path: one JSON line of per-round phase times (ms/member-step)."""
    for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = "1"
    sys.path.insert(0, str(Path(__file__).parent))
    import dataclasses

    from train_ensemble import SHAPES  # type: ignore[import-not-found]

    from normlab.lab.allocator import keep_freed_memory
    from normlab.train import Ensemble

    keep_freed_memory()
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    timer = PhaseTimer(clock)
    instrument(timer)
    cfg = SHAPES[a.shape]
    M = a.members
    ens = Ensemble([dataclasses.replace(cfg, seed=s) for s in range(M)])
    for _ in range(3):
        ens.train_step()
    rounds = []
    for _ in range(a.child_rounds):
        timer.on = False
        t0 = clock()
        for _ in range(a.steps):
            ens.train_step()
        plain = clock() - t0
        timer.on = True
        timer.totals.clear()
        t0 = clock()
        for _ in range(a.steps):
            ens.train_step()
        timed = clock() - t0
        per = 1e3 / (a.steps * M)
        row = {k: timer.totals.get(k, 0.0) * per for k in PHASES}
        row["other"] = (timed - sum(timer.totals.values())) * per
        row["total"] = plain * per
        rounds.append(row)
    from train_ensemble import code_label  # type: ignore[import-not-found]

    print(json.dumps({"code": code_label(), "rounds": rounds}))


def summarize(rounds: list[dict]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rounds) for k in (*PHASES, "other", "total")}


def main() -> None:
    a = parse()
    if a.child_rounds:
        child(a)
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from train_ensemble import machine  # type: ignore[import-not-found]

    srcs = a.compare or [str(Path(__file__).resolve().parents[1])]
    got: dict[str, list] = {s: [] for s in srcs}
    codes: dict[str, str] = {}
    print(f"# {machine()}", flush=True)
    for _ in range(a.repeats):  # alternately, one round per child and source folder
        for s in srcs:
            env = dict(os.environ, PYTHONPATH=str(Path(s).resolve() / "src"))
            cmd = [sys.executable, __file__, "--shape", a.shape, "--members", str(a.members),
                   "--steps", str(a.steps), "--clock", a.clock, "--child-rounds", "1"]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            got[s] += result["rounds"]
            codes[s] = result["code"]
    tables = {s: summarize(r) for s, r in got.items()}
    print(f"# shape {a.shape}, {a.members} members, ms per member-step, median of {a.repeats} "
          f"rounds x {a.steps} steps, one thread, {a.clock} clock; load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'phase':22}" + "".join(f"{codes[s]:>16}" for s in srcs))
    for k in (*PHASES, "other", "total"):
        print(f"{k:22}" + "".join(f"{tables[s][k]:>16.3f}" for s in srcs))


if __name__ == "__main__":
    main()
