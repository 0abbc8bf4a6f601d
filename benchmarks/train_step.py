"""One training step (forward + backward + AdamW) of the decoder-only model: normlab (NumPy)
against the same architecture in PyTorch CPU eager, timed side by side, and against the physical
limit, the step's matrix-multiply FLOPs at the sgemm rate measured in the same run.

    python benchmarks/train_step.py [--layers 4] [--width 128] [--heads 4] [--seq 64] [--batch 16]
                                    [--vocab 64] [--threads 1,2] [--repeats 15] [--profile]

The model: pre-LN with RMSNorm, learned positions, GELU (tanh), untied head, no biases, float32.
PyTorch runs as people write it in eager mode: nn.Linear, F.rms_norm, F.scaled_dot_product_attention
(is_causal), F.cross_entropy, torch.optim.AdamW. Each thread count in ``--threads`` runs in a fresh
process (the thread pools are sized at import) in which both frameworks use that many threads
(OpenBLAS, numba and torch), round-robin, and, as ``normlab train`` sets it, a malloc that keeps
freed memory for reuse (``--glibc-malloc-defaults`` to leave it alone). Round-robin with the two
steps, the same process times NumPy's sgemm (that thread count) running every linear-layer product
of the step (forward, dx, dW) into preallocated outputs: the sgemm rate on the step's own shapes.
The peak time is the step's model FLOPs (every linear product, forward and backward, plus
attention's q k^T and p v and their gradients) at that rate.

Prints, per thread count, the median step times, normlab / torch, the sgemm rate and the fraction
of the sgemm-peak time each framework reaches; then best against best (each framework at its
fastest thread count). ``--profile`` adds normlab's per-op breakdown at each thread count
(exclusive time per category, minor page faults per step) from a timer wrapped around the
modules' forward and backward and the optimizer. Peak memory, measured in a fresh process per
framework (Linux): the peak resident set (VmHWM, reset after the imports) minus the resident set
after the imports (parameters, gradients, optimizer state, activations and temporaries; the BLAS
libraries, and what each framework loads once per process, are loaded by a tiny model's step
before the baseline), plus NumPy's traced peak (tracemalloc) within one normlab step above what
stays between steps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--threads", default=None,
                   help="comma-separated thread counts, each in its own process (default: 1 and "
                        "the number of cores)")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--profile", action="store_true", help="normlab's per-op breakdown")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--glibc-malloc-defaults", action="store_true",
                   help="leave malloc as it is (default: keep freed memory, as normlab train does)")
    p.add_argument("--memory-child", choices=("normlab", "torch"), help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = parse()
THREAD_LIST = ([int(n) for n in ARGS.threads.split(",")] if ARGS.threads
               else sorted({1, os.cpu_count() or 1}))
THREADS = THREAD_LIST[0]  # this process's count: a child (or the memory children) gets one
for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[var] = str(THREADS)  # before NumPy, numba and torch start their pools

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from normlab.models import GPT, GPTConfig  # noqa: E402
from normlab.train import AdamW  # noqa: E402

torch.set_num_threads(THREADS)
if not ARGS.glibc_malloc_defaults:  # the same process-wide setting for both frameworks
    from normlab.lab.allocator import keep_freed_memory

    KEEP_FREED = keep_freed_memory()
else:
    KEEP_FREED = False


def config(a) -> GPTConfig:
    return GPTConfig(vocab_size=a.vocab, seq_len=a.seq, n_layers=a.layers, d_model=a.width,
                     n_heads=a.heads, placement="pre", norm="rmsnorm", activation="gelu_tanh")


class TorchGPT(torch.nn.Module):
    """The same architecture in PyTorch eager."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        C, V = cfg.d_model, cfg.vocab_size
        self.cfg = cfg
        self.wte = torch.nn.Embedding(V, C)
        self.wpe = torch.nn.Embedding(cfg.seq_len, C)
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg.n_layers):
            b = torch.nn.Module()
            b.n1, b.n2 = (
                torch.nn.RMSNorm(C, eps=cfg.norm_eps),
                torch.nn.RMSNorm(C, eps=cfg.norm_eps),
            )
            b.qkv, b.proj = lin(C, 3 * C), lin(C, C)
            b.fc, b.fc2 = lin(C, cfg.hidden), lin(cfg.hidden, C)
            self.blocks.append(b)
        self.norm_f = torch.nn.RMSNorm(C, eps=cfg.norm_eps)
        self.head = lin(C, V)

    def forward(self, idx, targets):
        B, T = idx.shape
        H, D = self.cfg.n_heads, self.cfg.head_dim
        x = self.wte(idx) + self.wpe.weight[:T]
        for b in self.blocks:
            q, k, v = b.qkv(b.n1(x)).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.proj(y.transpose(1, 2).reshape(B, T, -1))
            x = x + b.fc2(F.gelu(b.fc(b.n2(x)), approximate="tanh"))
        logits = self.head(self.norm_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def batch(a):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, a.vocab, size=(a.batch, a.seq))
    tgt = rng.integers(0, a.vocab, size=(a.batch, a.seq))
    return idx, tgt


def normlab_setup(a):
    """normlab's step function on a fixed batch, and its model."""
    cfg = config(a)
    idx, tgt = batch(a)
    model = GPT(cfg, rng=np.random.default_rng(1))
    opt = AdamW(model.parameters(), betas=(0.9, 0.95), weight_decay=0.1)
    grads = model.gradients()

    def normlab_step():
        model.forward(idx, tgt)
        model.zero_grad()
        model.backward()
        opt.step(grads, 1e-3)

    return normlab_step, model


def torch_setup(a, model: GPT | None = None):
    """PyTorch's step function on the same batch, with normlab's weights when ``model`` is given."""
    cfg = config(a)
    idx, tgt = batch(a)
    tmodel = TorchGPT(cfg)
    if model is not None:
        copy_weights(model, tmodel)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    tidx, ttgt = torch.from_numpy(idx), torch.from_numpy(tgt)

    def torch_step():
        loss = tmodel(tidx, ttgt)
        topt.zero_grad(set_to_none=True)
        loss.backward()
        topt.step()

    return torch_step


def copy_weights(model: GPT, tmodel: TorchGPT) -> None:
    cfg = model.config
    tparams = dict(tmodel.named_parameters())
    ours = model.parameters()
    names = {
        "wte.weight": "wte.weight",
        "wpe.weight": "wpe.weight",
        "norm_f.weight": "norm_f.weight",
        "head.weight": "head.weight",
    }
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        names.update(
            {
                p + "n1.weight": p + "attn.norm.weight",
                p + "n2.weight": p + "mlp.norm.weight",
                p + "qkv.weight": p + "attn.branch.qkv.weight",
                p + "proj.weight": p + "attn.branch.proj.weight",
                p + "fc.weight": p + "mlp.branch.fc.weight",
                p + "fc2.weight": p + "mlp.branch.proj.weight",
            }
        )
    with torch.no_grad():
        for tname, oname in names.items():
            tparams[tname].copy_(torch.from_numpy(ours[oname]))


def status_kib(key: str) -> int:
    """A field of /proc/self/status in KiB: VmRSS (resident now), VmHWM (resident peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


def memory_child(which: str, a) -> None:
    import tracemalloc

    small = np.ones((64, 64), np.float32)
    _ = small @ small, torch.from_numpy(small) @ torch.from_numpy(small)  # the BLAS arenas
    # one step of a tiny model first: what each library loads once per process (numba and its
    # compiled kernels; torch's autograd and optimizer machinery) stays out of the figure
    tiny = argparse.Namespace(**{**vars(a), "layers": 1, "width": 16, "heads": 2, "seq": 4,
                                 "batch": 2})
    (normlab_setup(tiny)[0] if which == "normlab" else torch_setup(tiny))()
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak to the current resident set
        f.write("5")
    base = status_kib("VmRSS")
    step = normlab_setup(a)[0] if which == "normlab" else torch_setup(a)
    torch.set_num_threads(THREADS)
    for _ in range(3):
        step()
    traced = None
    if which == "normlab":
        tracemalloc.start()
        step()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        step()
        traced = (tracemalloc.get_traced_memory()[1] - before) / 2**20
        tracemalloc.stop()
    peak = status_kib("VmHWM")
    print(json.dumps({"peak_mib": (peak - base) / 1024, "traced_step_mib": traced}))


def model_flops(cfg: GPTConfig, B: int, T: int) -> tuple[float, dict]:
    """Matrix-multiply FLOPs of one step (2 per multiply-add), and the FLOPs of each (M, K, N)
    product of the linear layers: forward y = x W^T, backward dx = dy W and dW = dy^T x."""
    C, V, H, D, L = cfg.d_model, cfg.vocab_size, cfg.n_heads, cfg.head_dim, cfg.n_layers
    N = B * T
    linears = [(C, 3 * C), (C, C), (C, cfg.hidden), (cfg.hidden, C)] * L + [(C, V)]
    shapes: dict = {}
    for cin, cout in linears:
        for M, K, Nn in ((N, cin, cout), (N, cout, cin), (cout, N, cin)):  # y, dx, dW
            shapes[(M, K, Nn)] = shapes.get((M, K, Nn), 0.0) + 2.0 * M * K * Nn
    attention = L * 6 * 2.0 * B * H * T * T * D  # s = q k^T, p v; dv, dp, dq, dk
    return sum(shapes.values()) + attention, shapes


def sgemm_products(shapes: dict):
    """A callable that runs every linear product of the step once with NumPy's sgemm into
    preallocated outputs (``shapes``: (M, K, N) -> the step's FLOPs on it): timed beside the
    steps, round-robin, it gives the sgemm rate on the step's own shapes."""
    rng = np.random.default_rng(0)
    work = []
    for (M, K, N), f in shapes.items():
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        work.append((a, b, np.empty((M, N), np.float32), round(f / (2.0 * M * K * N))))

    def run():
        for a, b, out, times in work:
            for _ in range(times):
                np.matmul(a, b, out=out)

    return run


class OpTimer:
    """Exclusive wall time per category: each wrapped call's time minus its wrapped callees'."""

    def __init__(self):
        import time

        self.clock = time.perf_counter
        self.totals: dict[str, float] = {}
        self.stack: list[float] = []

    def wrap(self, owner, name: str, category: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:
            return
        timer = self

        def timed(*args, **kwargs):
            t0 = timer.clock()
            timer.stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = timer.clock() - t0
                inner = timer.stack.pop()
                timer.totals[category] = timer.totals.get(category, 0.0) + elapsed - inner
                if timer.stack:
                    timer.stack[-1] += elapsed

        setattr(owner, name, timed)


def profile_normlab(a, repeats: int) -> dict:
    """normlab's step broken down by category (ms per step), minor page faults per step."""
    import importlib
    import resource
    import time

    from normlab import nn
    from normlab.models import block, gpt

    timer = OpTimer()
    for cls in (nn.Linear,):
        for m in ("forward", "backward"):
            timer.wrap(cls, m, "matmuls: linear layers")
    for m in ("forward", "backward"):
        timer.wrap(nn.CausalSelfAttention, m, "attention: matmuls, head split/merge")
        timer.wrap(nn.RMSNorm, m, "norms")
        timer.wrap(nn.LayerNorm, m, "norms")
        timer.wrap(nn.MLP, m, "GELU")
        timer.wrap(nn.Embedding, m, "embeddings")
        timer.wrap(block.Residual, m, "residual adds, block glue")
    for mod, names in (("normlab.kernels.attention", ("_softmax_forward", "_softmax_backward")),
                       ("normlab.functional.attention", ("softmax_forward", "softmax_backward")),
                       ("normlab.kernels.softmax", ("cross_entropy_forward",
                                                    "cross_entropy_backward")),
                       ("normlab.functional.losses", ("cross_entropy_forward",
                                                      "cross_entropy_backward"))):
        try:
            module = importlib.import_module(mod)
        except ImportError:
            continue
        for n in names:
            timer.wrap(module, n, "attention: softmax" if "softmax" in n else "loss")
    try:  # attention's compiled kernel (products and softmax in one call each way)
        lanes = importlib.import_module("normlab.kernels.attention_lanes")
        for n in ("_forward_call", "_backward_call"):
            timer.wrap(lanes, n, "attention: kernel (products and softmax)")
    except ImportError:  # a normlab before the kernel
        pass
    for n in ("cross_entropy_forward", "cross_entropy_backward"):  # imported by name
        timer.wrap(gpt, n, "loss")
    timer.wrap(AdamW, "step", "AdamW")
    timer.wrap(GPT, "zero_grad", "zero_grad")
    step, _ = normlab_setup(a)
    for _ in range(3):
        step()
    timer.totals.clear()
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    for _ in range(repeats):
        step()
    total = (time.perf_counter() - t0) / repeats
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / repeats
    ops = {k: v / repeats for k, v in timer.totals.items()}
    ops["other: model glue, Python"] = total - sum(ops.values())
    return {"total": total, "ops": ops, "faults": faults}


def child(a) -> None:
    """One thread count: both frameworks round-robin, the sgemm rate, optionally the profile;
    prints one JSON line."""
    from normlab.lab.timing import environment, measure

    normlab_step, model = normlab_setup(a)
    torch_step = torch_setup(a, model)
    normlab_step()  # the first call starts numba's pool (OpenMP), which may reset torch's
    torch.set_num_threads(THREADS)
    flops, shapes = model_flops(model.config, a.batch, a.seq)
    t = measure({"normlab": normlab_step, "torch": torch_step, "sgemm": sgemm_products(shapes)},
                repeats=a.repeats, warmup=3)
    rate = sum(shapes.values()) / t["sgemm"]
    env = environment()  # read after the timing: the thread counts in force during it
    env["numpy BLAS threads"] = os.environ["OPENBLAS_NUM_THREADS"]
    env["malloc keeps freed memory"] = str(KEEP_FREED)
    out = {"threads": THREADS, "normlab": t["normlab"], "torch": t["torch"], "flops": flops,
           "sgemm": rate, "env": env, "params": model.num_parameters()}
    if a.profile:
        out["profile"] = profile_normlab(a, a.repeats)
    print(json.dumps(out))


def main() -> None:
    a = ARGS
    if a.memory_child:
        memory_child(a.memory_child, a)
        return
    if a.child:
        child(a)
        return
    shape = ["--layers", str(a.layers), "--width", str(a.width), "--heads", str(a.heads),
             "--seq", str(a.seq), "--batch", str(a.batch), "--vocab", str(a.vocab)]
    malloc = ["--glibc-malloc-defaults"] * (not KEEP_FREED)
    rows = []
    for n in THREAD_LIST:
        cmd = [sys.executable, __file__, "--child", "--threads", str(n), "--repeats",
               str(a.repeats)] + shape + malloc + ["--profile"] * a.profile
        res = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(res.strip().splitlines()[-1]))
    cfg = config(a)
    r0 = rows[0]
    print(f"train step (forward + backward + AdamW): {cfg.n_layers} layers, d_model {cfg.d_model}, "
          f"{cfg.n_heads} heads, T {a.seq}, B {a.batch}, V {cfg.vocab_size}, float32, pre-LN "
          f"RMSNorm, {r0['params']:,} parameters; {r0['flops'] / 1e9:.2f} GFLOP of matrix "
          f"multiplies per step; median of {a.repeats}, round-robin, a fresh process per thread "
          f"count")
    print(", ".join(f"{k} {v}" for k, v in r0["env"].items() if "threads" not in k))
    try:
        print(
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (cores {os.cpu_count()})"
        )
    except OSError:
        pass
    print(f"\n{'threads':>7} {'normlab ms':>11} {'torch ms':>9} {'normlab/torch':>14} "
          f"{'sgemm GFLOP/s':>14} {'peak ms':>8} {'normlab % peak':>15} {'torch % peak':>13}")
    for r in rows:
        peak = r["flops"] / r["sgemm"]
        print(f"{r['threads']:>7} {r['normlab'] * 1e3:>11.2f} {r['torch'] * 1e3:>9.2f} "
              f"{r['normlab'] / r['torch']:>14.2f} {r['sgemm'] / 1e9:>14.1f} {peak * 1e3:>8.2f} "
              f"{100 * peak / r['normlab']:>14.0f}% {100 * peak / r['torch']:>12.0f}%")
    bn = min(rows, key=lambda r: r["normlab"])
    bt = min(rows, key=lambda r: r["torch"])
    print(f"\nbest against best: normlab {bn['normlab'] * 1e3:.2f} ms ({bn['threads']} threads) / "
          f"torch {bt['torch'] * 1e3:.2f} ms ({bt['threads']} threads) = "
          f"{bn['normlab'] / bt['torch']:.2f}   (goal <= 0.75)")
    if len(rows) > 1:
        print(f"normlab speed-up from {rows[0]['threads']} to {rows[-1]['threads']} threads: "
              f"{rows[0]['normlab'] / rows[-1]['normlab']:.2f}x")
    if a.profile:
        for r in rows:
            prof = r["profile"]
            print(f"\nnormlab per-op profile, {r['threads']} thread(s): {prof['total'] * 1e3:.1f} "
                  f"ms/step (timed, wrapped), {prof['faults']:.0f} minor page faults per step")
            for k, v in sorted(prof["ops"].items(), key=lambda kv: -kv[1]):
                print(f"  {k:<40} {v * 1e3:8.2f} ms  {100 * v / prof['total']:5.1f}%")
    mem = {}
    for which in ("normlab", "torch"):
        cmd = [sys.executable, __file__, "--memory-child", which, "--threads",
               str(THREAD_LIST[0])] + shape + malloc
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        mem[which] = json.loads(out.strip().splitlines()[-1])
    print(f"\npeak memory above the post-import baseline (fresh process each, {THREAD_LIST[0]} "
          f"thread(s)): normlab {mem['normlab']['peak_mib']:.1f} MiB, torch "
          f"{mem['torch']['peak_mib']:.1f} MiB; NumPy traced peak within one normlab step "
          f"{mem['normlab']['traced_step_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
