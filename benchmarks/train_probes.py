"""What the probes cost: ``Trainer.train_step`` with no probe, with the default probes
(what every step recorded before probes existed) and with every per-step probe, and the model's
inference forward, timed round-robin in one process at the lab's quick shape (warmup's recipe:
d 32, T 16, B 16, V 16, 12 layers; pre-LN LayerNorm, AdamW, float32).

    python benchmarks/train_probes.py [--layers 12] [--width 32] [--seq 16] [--batch 16]
                                      [--vocab 16] [--repeats 30] [--precision fp32]

Prints the median step time of each setting and its ratio to the step without probes (the
reference), the thread count and library versions. One thread (OpenBLAS, numba), as the lab's
sweep workers run.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

from normlab.models import GPTConfig  # noqa: E402
from normlab.train import TrainConfig, Trainer  # noqa: E402
from normlab.train.probes import DEFAULT_PROBES  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=16)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--precision", default="fp32")
    return p.parse_args()


def trainer(args: argparse.Namespace, probes: tuple[str, ...]) -> Trainer:
    model = GPTConfig(vocab_size=args.vocab, seq_len=args.seq, n_layers=args.layers,
                      d_model=args.width, n_heads=args.heads)
    steps = 10 * args.repeats + 10
    return Trainer(TrainConfig(model=model, steps=steps, batch_size=args.batch, warmup=0,
                               eval_interval=steps, precision=args.precision, probes=probes))


def main() -> None:
    args = parse()
    settings = {"no probe": (), "default probes": DEFAULT_PROBES,
                "+ update_probe": DEFAULT_PROBES + ("update_probe",)}
    runs = {}
    for name, probes in settings.items():
        if "update_probe" in probes:
            t = trainer(args, ())
            t = Trainer(TrainConfig.from_dict({**t.config.to_dict(), "probes": list(probes),
                                               "update_probe": t.config.steps}))
        else:
            t = trainer(args, probes)
        t.train_step()  # compile and warm
        runs[name] = t
    x = runs["no probe"].source.train_batch(args.batch, args.seq, np.random.default_rng(0))[0]
    times: dict[str, list[float]] = {name: [] for name in [*runs, "inference logits"]}
    for _ in range(args.repeats):
        for name, t in runs.items():
            t0 = time.perf_counter()
            t.train_step()
            times[name].append(time.perf_counter() - t0)
            t.step += 1
        model = runs["no probe"].model
        t0 = time.perf_counter()
        model.logits(x)
        model.release()
        times["inference logits"].append(time.perf_counter() - t0)
    ref = float(np.median(times["no probe"]))
    print(f"shape: d {args.width}, T {args.seq}, B {args.batch}, V {args.vocab}, "
          f"{args.layers} layers, {args.precision}; threads {os.environ['OPENBLAS_NUM_THREADS']}; "
          f"numpy {np.__version__}, python {platform.python_version()}; "
          f"median of {args.repeats}, round-robin")
    print(f"{'setting':<20} {'median ms':>10} {'vs no probe':>12}")
    for name, ts in times.items():
        med = float(np.median(ts))
        print(f"{name:<20} {1e3 * med:>10.2f} {med / ref:>11.3f}x")


if __name__ == "__main__":
    main()
