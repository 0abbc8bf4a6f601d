"""``normlab bench``: the fused kernels against the NumPy reference, PyTorch CPU and a plain copy.

For rows x d float32 inputs, measures side by side in one run (round-robin, median of repeats):
forward and forward+backward of LayerNorm, RMSNorm, the fused residual add + LayerNorm and
QK-norm's LayerNorm (gain only, bit for bit the reference: time it at head widths), in
three implementations (``normlab.kernels``, ``normlab.functional``, PyTorch CPU), and a plain
copy of the same bytes (read x, write y: the memory-bandwidth floor of a forward) in two forms:
into a preallocated array and into a fresh one (the OS zeroes a new array's pages as it is first
written). The norm kernels' forward runs both ways too: allocating y (``fwd``) and writing into a
caller-provided buffer (``fwd out=``); each is set against the copy of the same form. Prints
ratios with the thread count and library versions; ``--json PATH`` writes the same numbers.

    normlab bench [--rows 8192] [--widths 768 1024 4096] [--repeats 10] [--json bench.json]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..formatting import fmt

OPS = ("layer_norm", "rms_norm", "add_layer_norm", "qk_layer_norm")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=8192, help="rows (B*T) of the input (8192)")
    p.add_argument("--widths", type=int, nargs="+", default=[768, 1024, 4096],
                   help="normalized widths d (768 1024 4096)")
    p.add_argument("--repeats", type=int, default=10, help="timed rounds; the median is kept (10)")
    p.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS), help="ops to time")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the NumPy reference (the slowest column)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")


def _candidates(op: str, rows: int, d: int, with_ref: bool) -> dict[tuple[str, ...], Any]:
    """{(impl, pass): callable} for one op and shape; impl in kernel/reference/torch."""
    import numpy as np

    from ... import functional as F
    from ... import kernels as K
    from ...functional import add_norm as A
    from ...functional import attention as FA

    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, d)).astype(np.float32)
    r = rng.normal(size=(rows, d)).astype(np.float32)
    dy = rng.normal(size=(rows, d)).astype(np.float32)
    g = rng.normal(size=d).astype(np.float32)
    b = rng.normal(size=d).astype(np.float32)

    y = np.empty_like(x)  # the caller's buffer of the out= rows
    into = None
    if op == "layer_norm":
        def fwd(m):
            return lambda: m.layer_norm_forward(x, g, b, eps=1e-5)

        def into():
            return K.layer_norm_forward(x, g, b, eps=1e-5, out=y)

        def both(m):
            return lambda: m.layer_norm_backward(dy, m.layer_norm_forward(x, g, b, eps=1e-5)[1])
    elif op == "rms_norm":
        def fwd(m):
            return lambda: m.rms_norm_forward(x, g, eps=1e-6)

        def into():
            return K.rms_norm_forward(x, g, eps=1e-6, out=y)

        def both(m):
            return lambda: m.rms_norm_backward(dy, m.rms_norm_forward(x, g, eps=1e-6)[1])
    elif op == "qk_layer_norm":  # QK-norm's LayerNorm: a gain, no bias, NumPy's additions
        def fwd(m):
            return lambda: m.qk_norm_forward(x, g, norm="layernorm", eps=1e-6)

        def both(m):
            return lambda: m.qk_norm_backward(
                dy, m.qk_norm_forward(x, g, norm="layernorm", eps=1e-6)[1], norm="layernorm")
    else:
        def fwd(m):
            return lambda: m.add_norm_forward(x, r, g, b, eps=1e-5)

        def both(m):
            return lambda: m.add_norm_backward(
                (dy, dy), m.add_norm_forward(x, r, g, b, eps=1e-5)[1])

    out: dict[tuple[str, ...], Any] = {("kernel", "fwd"): fwd(K), ("kernel", "fwd+bwd"): both(K)}
    if into is not None:
        out[("kernel", "fwd out=")] = into
    if with_ref:
        ref = A if op == "add_layer_norm" else FA if op == "qk_layer_norm" else F
        out[("reference", "fwd")] = fwd(ref)
        out[("reference", "fwd+bwd")] = both(ref)
    out.update(_torch_candidates(op, x, r, dy, g, b))
    return out


def _torch_candidates(op, x, r, dy, g, b):
    try:
        import torch
        import torch.nn.functional as TF
    except ImportError:
        return {}
    d = x.shape[-1]
    tx, tr = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(r).requires_grad_(True)
    tg, tb = torch.from_numpy(g).requires_grad_(True), torch.from_numpy(b).requires_grad_(True)
    tdy = torch.from_numpy(dy)
    if op == "layer_norm":
        def f():
            return TF.layer_norm(tx, (d,), tg, tb, 1e-5)
    elif op == "rms_norm":
        def f():
            return TF.rms_norm(tx, (d,), tg, 1e-6)
    elif op == "qk_layer_norm":
        def f():
            return TF.layer_norm(tx, (d,), tg, None, 1e-6)
    else:
        def f():
            s = tx + tr  # the unfused graph: add, then norm; both outputs used downstream
            return TF.layer_norm(s, (d,), tg, tb, 1e-5), s

    def fwd():
        with torch.no_grad():
            f()

    def both():
        for t in (tx, tr, tg, tb):
            t.grad = None
        out = f()
        if isinstance(out, tuple):
            torch.autograd.backward(out, (tdy, tdy))
        else:
            out.backward(tdy)

    return {("torch", "fwd"): fwd, ("torch", "fwd+bwd"): both}


def _op_rows(op: str, d: int, t: dict, p: Any) -> dict:
    """One op's rows at width ``d`` from the medians ``t`` (printed with ``p``): kernel, reference
    and torch times, and their ratios to each other and to the copy of the same form."""
    copy = t["copy/copy"]
    rows = {}
    for ps in ("fwd", "fwd out=", "fwd+bwd"):
        if f"{op}/kernel/{ps}" not in t:
            continue
        kern = t[f"{op}/kernel/{ps}"]
        # the bandwidth floor of the same form: a fresh array where the op makes one
        floor = t["copy/fresh"] if ps == "fwd" else copy
        ref = t.get(f"{op}/reference/{ps}")
        tor = t.get(f"{op}/torch/{ps}")
        row = {"kernel_ms": kern * 1e3,
               "reference_ms": None if ref is None else ref * 1e3,
               "torch_ms": None if tor is None else tor * 1e3,
               "torch_over_kernel": None if tor is None else tor / kern,
               "reference_over_kernel": None if ref is None else ref / kern,
               "kernel_over_copy": kern / copy, "kernel_over_fresh_copy":
               kern / t["copy/fresh"], "kernel_over_same_form_copy": kern / floor}
        rows[ps] = row

        p(f"{op:<15}{d:>6} {ps:<9}{kern * 1e3:10.2f}{fmt(row['reference_ms'], spec='9.2f')}"
          f"{fmt(row['torch_ms'], spec='9.2f')}{fmt(row['torch_over_kernel'], spec='11.2f')}"
          f"{fmt(row['reference_over_kernel'], spec='9.1f')}{kern / floor:10.2f}")
    return rows


def run(rows: int, widths: list[int], repeats: int, ops: list[str], with_ref: bool = True,
        stream: Any = sys.stdout) -> dict:
    import numpy as np

    from ... import kernels as K
    from ..timing import environment, measure

    compile_s = K.warm_up()
    env = environment()
    results: dict = {"rows": rows, "dtype": "float32", "repeats": repeats, "environment": env,
                     "warm_up_s": compile_s, "widths": {}}

    def p(*a: object) -> None:
        print(*a, file=stream)

    p(f"normlab bench: {rows} rows x d, float32, median of {repeats} repeats, round-robin")
    p(", ".join(f"{k} {v}" for k, v in env.items()))
    p(f"kernel warm-up (compile or load from cache) {compile_s:.2f} s\n")
    head = (f"{'op':<15}{'d':>6} {'pass':<9}{'kernel ms':>10}{'ref ms':>9}{'torch ms':>9}"
            f"{'torch/kern':>11}{'ref/kern':>9}{'kern/copy':>10}")
    p(head)
    p("-" * len(head))
    for d in widths:
        x = np.random.default_rng(0).normal(size=(rows, d)).astype(np.float32)
        y = np.empty_like(x)

        def fresh_copy(x=x):  # what any op returning a new array pays: the OS zeroes its pages
            np.copyto(np.empty_like(x), x)

        def copy_into(x: Any = x, y: Any = y) -> None:
            np.copyto(y, x)

        cands: dict[tuple[str, ...], Any] = {("copy", "copy"): copy_into,
                                             ("copy", "fresh"): fresh_copy}
        for op in ops:
            for key, fn in _candidates(op, rows, d, with_ref).items():
                cands[(op,) + key] = fn
        names = {k: "/".join(k) for k in cands}
        t = measure({names[k]: fn for k, fn in cands.items()}, repeats=repeats)
        copy = t["copy/copy"]
        per_d: dict[str, Any] = {"copy_ms": copy * 1e3, "fresh_copy_ms": t["copy/fresh"] * 1e3,
                                 "ops": {}}
        for op in ops:
            per_d["ops"][op] = _op_rows(op, d, t, p)
        p(f"{'copy':<15}{d:>6} {'x -> y':<9}{copy * 1e3:10.2f}   (into a new array: "
          f"{t['copy/fresh'] * 1e3:.2f} ms = {t['copy/fresh'] / copy:.2f} copies)")
        if "layer_norm" in ops and "rms_norm" in ops:
            ratio = {ps: t[f"rms_norm/kernel/{ps}"] / t[f"layer_norm/kernel/{ps}"]
                     for ps in ("fwd", "fwd+bwd")}
            per_d["rms_over_layer_kernel"] = ratio
            p(f"{'':<15}{d:>6} RMSNorm / LayerNorm (kernels): fwd {ratio['fwd']:.2f}, "
              f"fwd+bwd {ratio['fwd+bwd']:.2f}")
        p("")
        results["widths"][str(d)] = per_d
    p("torch/kern > 1: the kernel is faster; kern/copy: times a plain copy of x of the same form "
      "(1 = the bandwidth limit): into a fresh array for the rows that allocate y (the OS zeroes "
      "its pages), into a preallocated one for 'fwd out=' and the backward")
    return results


ARRAYS = 12  # float32 arrays of rows x d alive at once (inputs, outputs, gradients, torch's)


def check_arguments(args: argparse.Namespace) -> None:
    """Every flag, before anything is compiled or timed: counts >= 1, the arrays within half the
    machine's memory, ``--json`` a new or regular file in an existing folder. Raises UsageError."""
    from ... import _checks as ck
    from ..._files import check_output_path
    from ..arguments import check_flag
    from ..cli import UsageError

    check_flag(ck.integer, args.rows, "--rows", lo=1)
    check_flag(ck.integer, args.repeats, "--repeats", lo=1)
    for d in args.widths:
        check_flag(ck.integer, d, "--widths", lo=1)
    need = ARRAYS * 4 * args.rows * max(args.widths)
    have = _memory_bytes()
    if have and need > have // 2:
        raise UsageError(f"--rows {args.rows} x --widths {max(args.widths)} needs about "
                         f"{need / 2**30:.1f} GiB for its arrays; this machine has "
                         f"{have / 2**30:.1f} GiB (at most half is used)")
    check_flag(lambda path, flag: check_output_path(path, what=flag), args.json, "--json")


def _memory_bytes() -> int:
    """Physical memory in bytes (0 where the system does not say)."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


def main(args: argparse.Namespace) -> int:
    from ..._files import write_json

    check_arguments(args)
    results = run(args.rows, args.widths, args.repeats, args.ops, not args.no_reference)
    if args.json:
        write_json(args.json, results, what="--json")
        print(f"wrote {args.json}")
    return 0
