"""The cost of ``normlab.torch.emulate`` and ``Monitor`` on a GPT-2-small-shaped model (random
weights, transformers' GPT2LMHeadModel), forward and backward on a CPU.

Times, as medians of ``--repeats`` runs in one process: the plain float32 step (the
reference), the step under ``emulate(fp8_hybrid)`` and under ``emulate(amp_bf16)``, the step
under ``Monitor.watch()`` with ``every=1`` (every step measured: every tensor's statistics) and
the mean step over ten steps with ``every=10`` (one measured). Ratios against the plain step;
the plain step's rate against the measured sgemm rate is printed beside it.

    python benchmarks/torch_emulate.py                       # GPT-2 small: 12 x 768, T = 128
    python benchmarks/torch_emulate.py --layers 2 --seq 64   # a quicker shape

torchao's and unit-scaling's emulation are timed when they import (neither is a dependency).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch

from normlab.torch import Monitor, emulate


def _median(fn, repeats: int) -> float:
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv: list[str] | None = None) -> int:
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=args.vocab, n_layer=args.layers, n_embd=args.width,
                                  n_head=max(args.width // 64, 1), n_positions=1024,
                                  attn_implementation="sdpa")
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, cfg.vocab_size,
                                                             (args.batch, args.seq)))

    def step() -> None:
        model.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()

    def under(policy: str):
        em = emulate(model, policy)

        def run() -> None:
            with em:
                step()
            em.end_step()
        return run

    a = torch.randn(2048, 2048)
    t_mm = _median(lambda: a @ a, args.repeats)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python "
          f"{platform.python_version()}, threads {torch.get_num_threads()}; GPT-2 shape "
          f"{args.layers} x {args.width}, B {args.batch}, T {args.seq}, float32")
    plain = _median(step, args.repeats)
    flops = 6 * sum(p.numel() for p in model.parameters()) * args.batch * args.seq
    print(f"sgemm {2 * 2048**3 / t_mm / 1e9:.1f} GFLOP/s; plain step {plain * 1e3:.0f} ms "
          f"({flops / plain / 1e9:.1f} GFLOP/s of 6 N tokens)")
    def watched(mon: Monitor, n: int):
        def run() -> None:
            for _ in range(n):
                with mon.watch():
                    step()
        return run

    print("| step | median ms | / plain |\n|---|---|---|", flush=True)
    print(f"| plain float32 | {plain * 1e3:.0f} | 1.00 |", flush=True)
    rows = (("emulate(amp_bf16)", under("amp_bf16"), args.repeats, 1),
            ("emulate(fp8_hybrid)", under("fp8_hybrid"), args.repeats, 1),
            ("Monitor(every=1).watch()", watched(Monitor(model, every=1), 1), args.repeats, 1),
            ("Monitor(every=10).watch(), mean of 10 steps",
             watched(Monitor(model, every=10), 10), max(1, args.repeats // 2), 10))
    for name, fn, n, per in rows:
        t = _median(fn, n) / per
        print(f"| {name} | {t * 1e3:.0f} | {t / plain:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
