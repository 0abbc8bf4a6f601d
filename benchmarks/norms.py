"""Forward and forward+backward times of LayerNorm, RMSNorm and BatchNorm: normlab.functional
(the NumPy reference) against PyTorch CPU, measured side by side in one run.

    python benchmarks/norms.py [--rows 8192] [--width 1024] [--repeats 15]

Prints medians, the ratio normlab / torch (lower is better for normlab), the time of a plain copy
of the same bytes (the memory-bandwidth floor: read x, write y), and RMSNorm / LayerNorm.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from normlab import functional as fn
from normlab.lab.timing import environment, measure


def cases(rows: int, width: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    dy = rng.normal(size=(rows, width)).astype(np.float32)
    g = rng.normal(size=width).astype(np.float32)
    b = rng.normal(size=width).astype(np.float32)
    rm, rv = np.zeros(width, np.float32), np.ones(width, np.float32)

    tx = torch.from_numpy(x).requires_grad_(True)
    tdy = torch.from_numpy(dy)
    tg, tb = torch.from_numpy(g).requires_grad_(True), torch.from_numpy(b).requires_grad_(True)
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())

    def tfwd(f):
        def run():
            with torch.no_grad():
                f()
        return run

    def tboth(f):
        def run():
            tx.grad = tg.grad = tb.grad = None
            f().backward(tdy)
        return run

    t_ln = lambda: F.layer_norm(tx, (width,), tg, tb, 1e-5)  # noqa: E731
    t_rms = lambda: F.rms_norm(tx, (width,), tg, 1e-8)  # noqa: E731
    t_bn = lambda: F.batch_norm(tx, trm, trv, tg, tb, True, 0.1, 1e-5)  # noqa: E731
    return {
        "LayerNorm": (
            lambda: fn.layer_norm_forward(x, g, b),
            lambda: fn.layer_norm_backward(dy, fn.layer_norm_forward(x, g, b)[1]),
            tfwd(t_ln), tboth(t_ln)),
        "RMSNorm": (
            lambda: fn.rms_norm_forward(x, g),
            lambda: fn.rms_norm_backward(dy, fn.rms_norm_forward(x, g)[1]),
            tfwd(t_rms), tboth(t_rms)),
        "BatchNorm": (
            lambda: fn.batch_norm_forward(x, g, b, rm, rv, training=True),
            lambda: fn.batch_norm_backward(
                dy, fn.batch_norm_forward(x, g, b, rm, rv, training=True)[1]),
            tfwd(t_bn), tboth(t_bn)),
    }, x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=15)
    a = p.parse_args()
    ops, x = cases(a.rows, a.width)
    out = np.empty_like(x)
    copy = measure({"copy": lambda: np.copyto(out, x)}, repeats=a.repeats)["copy"]
    print(f"shape ({a.rows}, {a.width}) float32; median of {a.repeats} repeats, round-robin")
    print(", ".join(f"{k} {v}" for k, v in environment().items()))
    print(f"plain copy of the same bytes (read x, write y): {copy * 1e3:.2f} ms\n")
    head = (f"{'op':<10} {'pass':<9} {'normlab ms':>11} {'torch ms':>9} {'normlab/torch':>14} "
            f"{'normlab/copy':>13}")
    print(head)
    print("-" * len(head))
    results = {}
    for name, (nf, nb, tf, tb) in ops.items():
        t = measure({"nf": nf, "nb": nb, "tf": tf, "tb": tb}, repeats=a.repeats)
        results[name] = t
        for label, ours, theirs in (("fwd", t["nf"], t["tf"]), ("fwd+bwd", t["nb"], t["tb"])):
            print(f"{name:<10} {label:<9} {ours * 1e3:11.2f} {theirs * 1e3:9.2f} "
                  f"{ours / theirs:14.2f} {ours / copy:13.1f}")
    ln, rms = results["LayerNorm"], results["RMSNorm"]
    print(f"\nRMSNorm / LayerNorm time (normlab): fwd {rms['nf'] / ln['nf']:.2f}, "
          f"fwd+bwd {rms['nb'] / ln['nb']:.2f}   (torch: fwd {rms['tf'] / ln['tf']:.2f}, "
          f"fwd+bwd {rms['tb'] / ln['tb']:.2f});  Zhang & Sennrich 2019 report 7-64% savings")


if __name__ == "__main__":
    main()
