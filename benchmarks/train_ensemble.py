"""Ensembles: one training step per member, M members trained in one pass (normlab.train.Ensemble)
against the same model trained alone, against PyTorch eager training the same members, and
against the sgemm limit measured in the same run on the step's own shapes.

    python benchmarks/train_ensemble.py [--members 1,4,8,16] [--shapes lab,bench,long]
                                        [--repeats 7] [--compare SRC_DIR SRC_DIR ...]

Shapes: ``lab`` is the lab's quick shape (the warmup experiment's recipe: post-LN LayerNorm,
d 32, T 16, B 16, V 16, 12 blocks, Adam (0.9, 0.98), no weight decay, no clipping, Markov data),
``bench`` the training benchmark's (benchmarks/train_step.py: pre-LN RMSNorm, d 128, T 64,
B 16, V 64, 4 blocks) and ``long`` a full-size lab model with the full sizes' longer sequences
(precision-recipes' full size: pre-LN LayerNorm, d 64, T 64, B 16, V 16, 4 blocks, AdamW (0.9,
0.95), decay 0.1, clipping at 1, order-2 Markov data), where the sweep runner's cap on an
ensemble's members (``MAX_MEMBERS``) is decided. One thread (OpenBLAS, numba, torch), and a
malloc that keeps freed memory, as ``normlab train`` sets it.

Per shape and ensemble size M, medians over ``--repeats`` rounds (round-robin) of:

    alone        normlab ``Trainer.train_step`` of one member (the single run, default probes)
    ensemble     normlab ``Ensemble.train_step`` of M members, divided by M
    torch        PyTorch eager, the same architecture, forward + backward + AdamW: one model at a
                 time (``torch 1x1``) and the M models stacked with ``torch.func`` (functional_call,
                 grad and vmap over the stacked parameters, one AdamW over the stacks:
                 ``torch vmap``), each divided by M; the faster of the two is ``torch best``
    limit        the step's matrix-multiply FLOPs (every linear product forward and backward,
                 attention's four products) at the sgemm rate NumPy reaches on the linear products'
                 own shapes, timed in the same rounds
    products     the same products as an ensemble of M computes them, divided by M: normlab's
                 stacked linear forward and backward on (M, B, T, C) rows, and attention's
                 products (``normlab.functional.attention``'s, which the fused kernel calls) on
                 the strided q, k, v views of the fused projection, written into the same views;
                 everything else of the step left out, timed in the same rounds

and prints per-member milliseconds, the fraction of the limit (limit / time), the ceiling (limit /
products: the fraction of the limit a step would reach if everything but its products took no
time, with the products as the engine runs them on the step's own shapes) and normlab's best
against PyTorch's best (best of alone and ensemble / torch best). Each row starts with the code
it measured (the commit, "+" for changes not committed); ``--compare OLD NEW`` measures two
versions in one run, each (shape, M) in ``--rounds`` child processes per version taking turns
(each figure the median over them), their rows side by side.
The first lines give the processor, the load average, the versions and the settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

for _var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy, numba and torch start their pools

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from normlab.models import GPTConfig  # noqa: E402
from normlab.train import Ensemble, TrainConfig, Trainer  # noqa: E402

torch.set_num_threads(1)

SHAPES = {
    "lab": TrainConfig(
        model=GPTConfig(vocab_size=16, seq_len=16, n_layers=12, d_model=32, n_heads=4,
                        init_std=32**-0.5, placement="post"),
        data="markov", markov_order=1, steps=10**4, batch_size=16, beta2=0.98, warmup=40,
        weight_decay=0.0, grad_clip=None, eval_interval=10**4),
    "bench": TrainConfig(
        model=GPTConfig(vocab_size=64, seq_len=64, n_layers=4, d_model=128, n_heads=4,
                        placement="pre", norm="rmsnorm"),
        steps=10**4, batch_size=16, eval_interval=10**4),
    "long": TrainConfig(
        model=GPTConfig(vocab_size=16, seq_len=64, n_layers=4, d_model=64, n_heads=4,
                        placement="pre"),
        data="markov", markov_order=2, steps=10**4, batch_size=16, beta2=0.95,
        weight_decay=0.1, grad_clip=1.0, eval_interval=10**4),
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", default="1,4,8,16")
    p.add_argument("--shapes", default="lab,bench,long")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="steps per timed round")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    p.add_argument("--compare", nargs="+", metavar="SRC_DIR",
                   help="source folders (each with src/normlab, e.g. a git worktree of an older "
                        "commit and this checkout): each (shape, M) measured in a child process "
                        "per folder, alternately, the rows side by side in one table")
    p.add_argument("--rounds", type=int, default=3,
                   help="with --compare: child processes per version and (shape, M), taking "
                        "turns; each figure the median over them")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time (perf_counter), or this process's CPU time (process_time: on "
                        "a shared, loaded machine, the time the step had a core)")
    return p.parse_args()


# ---- PyTorch: the same architecture in eager mode ------------------------------------------------
class TorchGPT(torch.nn.Module):
    """Learned positions, pre- or post-LN with LayerNorm or RMSNorm (no biases), GELU (tanh),
    causal attention, untied head; a final norm with pre-LN (as normlab's GPT)."""

    def __init__(self, cfg: GPTConfig, manual_attention: bool = False):
        super().__init__()
        C, V = cfg.d_model, cfg.vocab_size
        self.cfg, self.manual = cfg, manual_attention
        T = cfg.seq_len
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril())
        norm = ((lambda: torch.nn.RMSNorm(C, eps=cfg.norm_eps)) if cfg.norm == "rmsnorm"
                else (lambda: torch.nn.LayerNorm(C, eps=cfg.norm_eps, bias=False)))
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.wte, self.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(cfg.seq_len, C)
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg.n_layers):
            b = torch.nn.Module()
            b.n1, b.n2 = norm(), norm()
            b.qkv, b.proj = lin(C, 3 * C), lin(C, C)
            b.fc, b.fc2 = lin(C, cfg.hidden), lin(cfg.hidden, C)
            self.blocks.append(b)
        self.norm_f = norm() if cfg.placement == "pre" else torch.nn.Identity()
        self.head = lin(C, V)

    def forward(self, idx, targets):
        B, T = idx.shape
        H, D = self.cfg.n_heads, self.cfg.head_dim
        pre = self.cfg.placement == "pre"
        x = self.wte(idx) + self.wpe.weight[:T]
        for b in self.blocks:
            h = b.n1(x) if pre else x
            q, k, v = b.qkv(h).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            a = b.proj(self.attention(q, k, v).transpose(1, 2).reshape(B, T, -1))
            x = x + a if pre else b.n1(x + a)
            h = b.n2(x) if pre else x
            f = b.fc2(F.gelu(b.fc(h), approximate="tanh"))
            x = x + f if pre else b.n2(x + f)
        logits = self.head(self.norm_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


    def attention(self, q, k, v):
        """Causal SDPA; under vmap (which has no batching rule for CPU SDPA) the same lines
        written out: q k^T / sqrt(D), the causal mask, softmax, p v."""
        if not self.manual:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
        return torch.softmax(s, dim=-1) @ v


def torch_batches(cfg: TrainConfig, M: int):
    rng = np.random.default_rng(0)
    V, B, T = cfg.model.vocab_size, cfg.batch_size, cfg.model.seq_len
    return (torch.from_numpy(rng.integers(0, V, (M, B, T))),
            torch.from_numpy(rng.integers(0, V, (M, B, T))))


def torch_one_at_a_time(cfg: TrainConfig, M: int):
    """M eager models stepped one after the other."""
    models = [TorchGPT(cfg.model) for _ in range(M)]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(cfg.beta1, cfg.beta2),
                              weight_decay=cfg.weight_decay) for m in models]
    x, y = torch_batches(cfg, M)

    def step():
        for i, (m, o) in enumerate(zip(models, opts)):
            loss = m(x[i], y[i])
            o.zero_grad(set_to_none=True)
            loss.backward()
            o.step()

    return step


def torch_vmap(cfg: TrainConfig, M: int):
    """M models stacked (torch.func.stack_module_state), gradients by vmap(grad(...)), one
    AdamW over the stacked parameters."""
    from torch.func import functional_call, grad, stack_module_state, vmap

    models = [TorchGPT(cfg.model, manual_attention=True) for _ in range(M)]
    params, buffers = stack_module_state(models)
    base = TorchGPT(cfg.model, manual_attention=True).to("meta")
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3, betas=(cfg.beta1, cfg.beta2),
                            weight_decay=cfg.weight_decay)
    x, y = torch_batches(cfg, M)

    def loss_fn(p, b, xi, yi):
        return functional_call(base, (p, b), (xi, yi))

    grads_of = vmap(grad(loss_fn))

    def step():
        g = grads_of(params, buffers, x, y)
        for k, p in params.items():
            p.grad = g[k]
        opt.step()

    return step


# ---- normlab ------------------------------------------------------------------------------------
def members(cfg: TrainConfig, M: int) -> list[TrainConfig]:
    return [dataclasses.replace(cfg, seed=s) for s in range(M)]


def normlab_alone(cfg: TrainConfig):
    t = Trainer(cfg)
    return t.train_step


def normlab_ensemble(cfg: TrainConfig, M: int):
    ens = Ensemble(members(cfg, M))
    return ens.train_step


# ---- the sgemm limit ---------------------------------------------------------------------------
def linear_dims(cfg: GPTConfig) -> list[tuple[int, int]]:
    """(C_in, C_out) of every linear layer of one step, in the model's order."""
    C = cfg.d_model
    return [(C, 3 * C), (C, C), (C, cfg.hidden), (cfg.hidden, C)] * cfg.n_layers + [
        (C, cfg.vocab_size)]


def model_flops(cfg: GPTConfig, B: int, T: int) -> tuple[float, dict]:
    """Matrix-multiply FLOPs of one step and those of each (M, K, N) linear product (as
    benchmarks/train_step.py counts them)."""
    H, D, L = cfg.n_heads, cfg.head_dim, cfg.n_layers
    N = B * T
    shapes: dict = {}
    for cin, cout in linear_dims(cfg):
        for m, k, n in ((N, cin, cout), (N, cout, cin), (cout, N, cin)):  # y, dx, dW
            shapes[(m, k, n)] = shapes.get((m, k, n), 0.0) + 2.0 * m * k * n
    attention = L * 6 * 2.0 * B * H * T * T * D
    return sum(shapes.values()) + attention, shapes


def sgemm_products(shapes: dict):
    rng = np.random.default_rng(0)
    work = []
    for (m, k, n), f in shapes.items():
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        work.append((a, b, np.empty((m, n), np.float32), round(f / (2.0 * m * k * n))))

    def run():
        for a, b, out, times in work:
            for _ in range(times):
                np.matmul(a, b, out=out)

    return run


def engine_products(cfg: TrainConfig, M: int):
    """One step's matrix products for M members as the ensemble computes them (module doc)."""
    from normlab.functional.linear import linear_backward, linear_forward

    m = cfg.model
    C, H, D, L = m.d_model, m.n_heads, m.head_dim, m.n_layers
    B, T = cfg.batch_size, m.seq_len
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    linears = [(f32(M, B, T, i), f32(M, o, i), f32(M, B, T, o)) for i, o in linear_dims(m)]

    def heads(a: np.ndarray) -> list[np.ndarray]:  # (M B, T, 3 C) -> q, k, v (M B, H, T, D)
        return [a[..., j * C:(j + 1) * C].reshape(M * B, T, H, D).transpose(0, 2, 1, 3)
                for j in range(3)]

    qkv, dqkv = f32(M * B, T, 3 * C), np.empty((M * B, T, 3 * C), np.float32)
    (q, k, v), (dq, dk, dv) = heads(qkv), heads(dqkv)
    rows = np.empty((M * B, T, H, D), np.float32).transpose(0, 2, 1, 3)
    dy = f32(M * B, H, T, D)
    attention = (_fused_attention(M, q, k, v, rows, dy, dq, dk, dv) if _lanes(D)
                 else _attention_products(M, q, k, v, rows, dy, dq, dk, dv))

    def run() -> None:
        for x, w, dout in linears:
            _, cache = linear_forward(x, w)
            linear_backward(dout, cache)
        for _ in range(L):
            attention()

    return run


def _lanes(D: int) -> bool:
    """Whether this normlab computes attention with heads of width D in its own kernel
    (normlab.kernels.attention_lanes) rather than with NumPy's batched products around a softmax
    kernel."""
    from normlab.kernels import attention

    return D <= getattr(attention, "LANES_MAX_D", 0)


def _fused_attention(M, q, k, v, rows, dy, dq, dk, dv):
    """One block's attention as the ensemble runs it in its own kernel: forward (into the heads'
    rows) and backward (into the fused projection's gradient columns), one compiled call each,
    the softmax within them (it is no longer apart from the products)."""
    from normlab.kernels.attention import attention_backward_into, attention_forward_members

    def run() -> None:
        _, cache, _ = attention_forward_members(M, q, k, v, out=rows)
        attention_backward_into(dy, cache, dq, dk, dv)

    return run


def _attention_products(M, q, k, v, rows, dy, dq, dk, dv):
    """One block's attention products as NumPy's batched matmul runs them (one sgemm call per
    batch row and head each), the softmax left out."""
    from normlab.functional.attention import _mix, _mix_backward, _scores, _scores_backward

    B, H, T, _ = q.shape
    p = np.tril(np.abs(np.random.default_rng(1).standard_normal((B, H, T, T), np.float32)))

    def run() -> None:
        _scores(q, k)
        _mix(p, v, rows)
        dp, _ = _mix_backward(dy, p, v, dv)
        _scores_backward(dp, q, k, dq, dk)

    return run


# ---- timing ------------------------------------------------------------------------------------
def timed(fns: dict, repeats: int, steps: int, clock=time.perf_counter) -> dict[str, float]:
    """Median seconds per call of each function, round-robin over ``repeats`` rounds."""
    for f in fns.values():
        f()
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = clock()
            for _ in range(steps):
                f()
            times[k].append((clock() - t0) / steps)
    return {k: statistics.median(v) for k, v in times.items()}


def measure(name: str, cfg: TrainConfig, M: int, a: argparse.Namespace) -> dict:
    flops, shapes = model_flops(cfg.model, cfg.batch_size, cfg.model.seq_len)
    gemm = sgemm_products(shapes)
    fns = {"alone": normlab_alone(cfg), "ensemble": normlab_ensemble(cfg, M), "sgemm": gemm,
           "products": engine_products(cfg, M)}
    if not a.no_torch:
        fns["torch 1x1"] = torch_one_at_a_time(cfg, M)
        try:
            fns["torch vmap"] = torch_vmap(cfg, M)
            fns["torch vmap"]()
        except Exception as exc:  # a torch without the batching rules: say so
            print(f"  torch vmap unavailable: {type(exc).__name__}: {exc}")
            fns.pop("torch vmap")
    t = timed(fns, a.repeats, a.steps,
              time.process_time if a.clock == "cpu" else time.perf_counter)
    rate = sum(shapes.values()) / t["sgemm"]
    per = {"alone": t["alone"], "ensemble": t["ensemble"] / M, "products": t["products"] / M}
    for k in ("torch 1x1", "torch vmap"):
        if k in t:
            per[k] = t[k] / M
    limit = flops / rate
    return {"shape": name, "M": M, "limit": limit, "gflops": rate / 1e9, **per}


def code_label() -> str:
    """The normlab this process imports: its repository's short commit, "+" when its source
    differs from that commit (a working tree with changes)."""
    import subprocess

    import normlab

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(normlab.__file__))))
    git = ["git", "-C", root]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+" if dirty else "")


def machine() -> str:
    """The processor's model name and the load average (1 minute), for the run's header."""
    model = "unknown processor"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"


HEAD = (f"{'code':9} {'shape':6} {'M':>3} {'alone':>8} {'ensemble':>9} {'torch 1x1':>10} "
        f"{'torch vmap':>11} {'limit':>7} {'GF/s':>6} {'products':>8} {'ens/limit':>9} "
        f"{'alone/limit':>11} {'ceiling':>7} {'ens/torch':>9}")


def row_line(r: dict) -> str:
    """One result line: the code measured, the shape, M and the columns of the module doc."""
    ms = lambda k: f"{1e3 * r[k]:.2f}" if k in r else "-"  # noqa: E731
    tb = min((r[k] for k in ("torch 1x1", "torch vmap") if k in r), default=None)
    vs = "-" if tb is None else f"{min(r['ensemble'], r['alone']) / tb:.2f}"
    return (f"{r['code']:9} {r['shape']:6} {r['M']:>3} {ms('alone'):>8} {ms('ensemble'):>9} "
            f"{ms('torch 1x1'):>10} {ms('torch vmap'):>11} {ms('limit'):>7} {r['gflops']:>6.1f} "
            f"{ms('products'):>8} {r['limit'] / r['ensemble']:>9.0%} "
            f"{r['limit'] / r['alone']:>11.0%} {r['limit'] / r['products']:>7.0%} {vs:>9}")


def run_here(a: argparse.Namespace) -> list[dict]:
    """Every (shape, M) of ``a`` measured with the normlab this process imports."""
    try:
        from normlab.lab.allocator import keep_freed_memory

        keep_freed_memory()
    except ImportError:  # pragma: no cover
        pass
    code = code_label()
    return [{"code": code, **measure(name, SHAPES[name], M, a)}
            for name in a.shapes.split(",") for M in (int(m) for m in a.members.split(","))]


def run_compared(a: argparse.Namespace) -> None:
    """``--compare``: each (shape, M) measured ``--rounds`` times per source folder, each time in
    a child process importing that folder's normlab, the folders taking turns (their order
    alternating); each figure of a row is the median over its rounds, so that a change in the
    machine's load between two children moves both versions alike."""
    import json
    import subprocess
    import sys

    flags = ["--repeats", str(a.repeats), "--steps", str(a.steps), "--clock", a.clock]
    flags += ["--no-torch"] * a.no_torch
    turn = 0
    for name in a.shapes.split(","):
        for M in a.members.split(","):
            got: dict[str, list[dict]] = {src: [] for src in a.compare}
            for _ in range(a.rounds):
                order = a.compare if turn % 2 == 0 else a.compare[::-1]
                turn += 1
                for src in order:
                    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(src), "src"))
                    out = subprocess.run([sys.executable, __file__, "--child", "--shapes", name,
                                          "--members", M, *flags], env=env, check=True,
                                         capture_output=True, text=True).stdout
                    got[src].append(json.loads(out.strip().splitlines()[-1])[0])
            for src in a.compare:
                rows = got[src]
                med = {k: (statistics.median(r[k] for r in rows)
                           if isinstance(rows[0][k], float) else rows[0][k]) for k in rows[0]}
                print(row_line(med), flush=True)


def main() -> None:
    a = parse()
    if a.child:
        import json

        print(json.dumps(run_here(a)))
        return
    import normlab

    print(f"# {machine()}")
    what = (f"normlab of {', '.join(a.compare)} ({a.rounds} child processes each per shape "
            f"and M, taking turns; medians over them)" if a.compare else
            f"normlab {normlab.__version__} at {code_label()}")
    print(f"# {what}; numpy {np.__version__}, torch {torch.__version__}, 1 thread, medians of "
          f"{a.repeats} rounds x {a.steps} steps, {a.clock} clock")
    print("per-member ms per step\n" + HEAD, flush=True)
    if a.compare:
        run_compared(a)
    else:
        for r in run_here(a):
            print(row_line(r), flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
