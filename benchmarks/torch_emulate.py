"""The cost of ``normlab.torch.emulate`` and ``Monitor`` on a GPT-2-small-shaped model (random
weights, transformers' GPT2LMHeadModel), forward and backward on a CPU.

Every setting runs with the same torch thread count: ``--threads`` (the table of docs/torch.md is
measured with 1), or by default the count (from 1 to torch's own) with the fastest plain step,
probed first and printed. The machine's load average (``os.getloadavg``) is printed before and
after, and the goals are checked on the medians: ``emulate(fp8_hybrid)`` within 2x of the
plain step, ``emulate(nvfp4)`` within 2.5x, ``Monitor(every=10)`` within 1.10x of ten plain
steps. The settings are
interleaved: each of the ``--repeats`` rounds times one step of every setting in turn (after
a warm-up round), so a change in the machine's load falls on all of them alike. Reported: the
median step per setting, its ratio to the plain float32 step's median, and the median of the
per-round ratios, and the same of the process's CPU time (all its threads: on a machine shared
with other work it moves less than the wall time, which counts the waits for a core). The
settings: the plain step (the reference), the step under
``emulate(amp_bf16)``, ``emulate(fp8_hybrid)`` and the recipes ``emulate(nvfp4)`` (its
stochastic rounding drawn from a seeded generator) and ``emulate(fp8_blockwise)``, under
``Monitor.watch()`` with ``every=1`` (every step measured) and the mean step of ten with
``every=10`` (one measured), which is compared with the mean of ten plain steps timed the same
way.

    python benchmarks/torch_emulate.py --threads 1           # GPT-2 small: 12 x 768, T = 128
    python benchmarks/torch_emulate.py --layers 2 --seq 64   # a quicker shape

torchao's float8 emulation (``Float8LinearConfig(emulate=True)``, on a copy of the model: it
converts ``nn.Linear`` modules only, which in GPT-2 is the head) and unit-scaling's
``simulate_fp8`` are timed when they import; neither is a dependency, and the printout says so
when one is missing. The versions the conformance extra pins, beside normlab's own venv:

    pip install --no-deps --target /tmp/oracles torchao==0.18.0 unit-scaling==0.3.5 \
        einops docstring-parser tabulate
    PYTHONPATH=/tmp/oracles python benchmarks/torch_emulate.py --repeats 7
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata

import numpy as np
import torch

from normlab.torch import Monitor, emulate


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _others(model: torch.nn.Module, step_of: Callable) -> list[tuple[str, Callable, int]]:
    """torchao's and unit-scaling's emulation, where they import (printed either way)."""
    rows = []
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        ao = convert_to_float8_training(copy.deepcopy(model),
                                        config=Float8LinearConfig(emulate=True))
        n = sum(type(m).__name__ == "Float8Linear" for m in ao.modules())
        rows.append((f"torchao float8, emulate=True (converts nn.Linear only: {n} module(s) "
                     f"here)", step_of(ao), 1))
    except Exception as e:  # reported, not raised
        print(f"torchao: not timed ({type(e).__name__}: {e})")
    try:
        from unit_scaling.transforms import simulate_fp8
        us = simulate_fp8(copy.deepcopy(model))
        rows.append(("unit-scaling simulate_fp8", step_of(us), 1))
    except Exception as e:
        print(f"unit-scaling: not timed ({type(e).__name__}: {e})")
    return rows


def _best_threads(step: Callable[[], None]) -> int:
    """The torch thread count (1 up to torch's default) of the fastest plain step (the best of
    three each), printed; every setting then runs with it."""
    best: dict[int, float] = {}
    for n in range(1, torch.get_num_threads() + 1):
        torch.set_num_threads(n)
        step()
        best[n] = min(_timed(step) for _ in range(3))
    print("plain step by torch threads: " + ", ".join(f"{n}: {t * 1e3:.0f} ms"
                                                      for n, t in best.items()))
    return min(best, key=lambda n: best[n])


def _timed(fn: Callable[[], None]) -> float:
    return _clocked(fn)[0]


def _clocked(fn: Callable[[], None]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for every setting (default: the count from 1 to "
                         "torch's own that runs the plain step fastest)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=args.vocab, n_layer=args.layers, n_embd=args.width,
                                  n_head=max(args.width // 64, 1), n_positions=1024,
                                  attn_implementation="sdpa")
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, cfg.vocab_size,
                                                             (args.batch, args.seq)))

    def step_of(m: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            m.zero_grad()
            m(input_ids=ids, labels=ids).loss.backward()
        return run

    step = step_of(model)
    torch.set_num_threads(args.threads or _best_threads(step))

    def under(policy: str) -> Callable[[], None]:
        em = emulate(model, policy, rng=np.random.default_rng(0))

        def run() -> None:
            with em:
                step()
            em.end_step()
        return run

    def watched(mon: Monitor, n: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(n):
                with mon.watch():
                    step()
        return run

    print(f"normlab.torch emulate benchmark: torch {torch.__version__}, transformers "
          f"{transformers.__version__}, numpy {np.__version__}, numba {_version('numba')}, "
          f"python {platform.python_version()}, {platform.machine()}; torch threads "
          f"{torch.get_num_threads()} for every setting; torchao {_version('torchao')}, "
          f"unit-scaling {_version('unit-scaling')}")
    print(f"GPT-2 shape {args.layers} x {args.width}, vocab {args.vocab}, B {args.batch}, "
          f"T {args.seq}, float32; {args.repeats} interleaved rounds after a warm-up")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in
                                                           os.getloadavg()))
    a = torch.randn(2048, 2048)
    a @ a
    print(f"sgemm {2 * 2048**3 / _timed(lambda: a @ a) / 1e9:.1f} GFLOP/s", flush=True)
    rows = [("plain float32", step, 1),
            ("emulate(amp_bf16)", under("amp_bf16"), 1),
            ("emulate(fp8_hybrid)", under("fp8_hybrid"), 1),
            ("emulate(nvfp4)", under("nvfp4"), 1),
            ("emulate(fp8_blockwise)", under("fp8_blockwise"), 1),
            ("Monitor(every=1).watch()", watched(Monitor(model, every=1), 1), 1),
            ("plain float32, mean of 10 steps", lambda: [step() for _ in range(10)], 10),
            ("Monitor(every=10).watch(), mean of 10 steps",
             watched(Monitor(model, every=10), 10), 10)]
    rows += _others(model, step_of)
    times: list[list[float]] = [[] for _ in rows]
    cpus: list[list[float]] = [[] for _ in rows]
    for r in range(args.repeats + 1):
        for i, (_, fn, per) in enumerate(rows):
            t, c = _clocked(fn)
            if r:  # round 0 warms up
                times[i].append(t / per)
                cpus[i].append(c / per)
    print("a setting timed over ten steps at a time is compared with the plain step timed the "
          "same way in the same round (the first step after a switch of setting pays for the "
          "caches the others left)")
    print("| step | median ms | / plain (medians) | / plain (median of rounds) | median CPU ms "
          "| CPU / plain (medians) |\n|---|---|---|---|---|---|")
    for (name, _, per), ts, cs in zip(rows, times, cpus):
        ref = next(i for i, row in enumerate(rows) if row[2] == per)  # plain, the same steps
        paired = statistics.median(t / p for t, p in zip(ts, times[ref]))
        med, cpu = statistics.median(ts), statistics.median(cs)
        print(f"| {name} | {med * 1e3:.0f} | {med / statistics.median(times[ref]):.2f} | "
              f"{paired:.2f} | {cpu * 1e3:.0f} | {cpu / statistics.median(cpus[ref]):.2f} |",
              flush=True)
    print("load average (1, 5, 15 min) after: " + ", ".join(f"{v:.2f}" for v in
                                                          os.getloadavg()))
    _goals(rows, times)
    return 0


GOALS = {"emulate(fp8_hybrid)": 2.0, "emulate(nvfp4)": 2.5,
         "Monitor(every=10).watch(), mean of 10 steps": 1.10}


def _goals(rows: list, times: list[list[float]]) -> None:
    """Each goal's ratio of medians against its limit, printed."""
    for name, limit in GOALS.items():
        i = next(k for k, row in enumerate(rows) if row[0] == name)
        ref = next(k for k, row in enumerate(rows) if row[2] == rows[i][2])
        ratio = statistics.median(times[i]) / statistics.median(times[ref])
        print(f"goal: {name} / plain = {ratio:.2f} (within {limit}: "
              f"{'yes' if ratio <= limit else 'NO'})")


if __name__ == "__main__":
    raise SystemExit(main())
