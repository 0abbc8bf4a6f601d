"""One training step (forward + backward + AdamW) of the decoder-only model: normlab (NumPy)
against the same architecture in PyTorch CPU eager, timed side by side in one process.

    python benchmarks/train_step.py [--layers 4] [--width 128] [--heads 4] [--seq 64] [--batch 16]
                                    [--vocab 64] [--threads N] [--repeats 15]

The model: pre-LN with RMSNorm, learned positions, GELU (tanh), untied head, no biases, float32.
PyTorch runs as people write it in eager mode: nn.Linear, F.rms_norm, F.scaled_dot_product_attention
(is_causal), F.cross_entropy, torch.optim.AdamW. Both use the same thread count (--threads, by
default the number of cores: OpenBLAS, numba and torch) and, as ``normlab train`` sets it, a
malloc that keeps freed memory for reuse (``--glibc-malloc-defaults`` to leave it alone). Prints the median step times and normlab / torch (lower is better for
normlab), and each framework's peak memory, measured in a fresh process per framework (Linux): the
peak resident set (VmHWM, reset after the imports) minus the resident set after the imports
(parameters, gradients, optimizer state, activations and temporaries; the BLAS libraries, and
what each framework loads once per process, are loaded by a tiny model's step before the
baseline), plus NumPy's traced peak (tracemalloc)
within one normlab step above what stays between steps.
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
    p.add_argument("--threads", type=int, default=None, help="threads for both (default: cores)")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--glibc-malloc-defaults", action="store_true",
                   help="leave malloc as it is (default: keep freed memory, as normlab train does)")
    p.add_argument("--memory-child", choices=("normlab", "torch"), help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = parse()
THREADS = ARGS.threads or os.cpu_count() or 1
for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[var] = str(THREADS)  # before NumPy, numba and torch start their pools

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from normlab.models import GPT, GPTConfig  # noqa: E402
from normlab.train import AdamW  # noqa: E402

torch.set_num_threads(THREADS)
if not ARGS.glibc_malloc_defaults:  # the same process-wide setting for both frameworks
    from normlab.lab.commands.train import keep_freed_memory

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
            b.n1, b.n2 = torch.nn.RMSNorm(C, eps=cfg.norm_eps), torch.nn.RMSNorm(C, eps=cfg.norm_eps)
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
    names = {"wte.weight": "wte.weight", "wpe.weight": "wpe.weight", "norm_f.weight": "norm_f.weight",
             "head.weight": "head.weight"}
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        names.update({p + "n1.weight": p + "attn.norm.weight", p + "n2.weight": p + "mlp.norm.weight",
                      p + "qkv.weight": p + "attn.branch.qkv.weight",
                      p + "proj.weight": p + "attn.branch.proj.weight",
                      p + "fc.weight": p + "mlp.branch.fc.weight",
                      p + "fc2.weight": p + "mlp.branch.proj.weight"})
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


def main() -> None:
    a = ARGS
    if a.memory_child:
        memory_child(a.memory_child, a)
        return
    from normlab.lab.timing import environment, measure

    normlab_step, model = normlab_setup(a)
    torch_step = torch_setup(a, model)
    normlab_step()  # the first call starts numba's pool (OpenMP), which may reset torch's
    torch.set_num_threads(THREADS)
    t = measure({"normlab": normlab_step, "torch": torch_step}, repeats=a.repeats, warmup=3)
    cfg = model.config
    env = environment()  # read after the timing: the thread counts in force during it
    env["numpy BLAS threads"] = os.environ["OPENBLAS_NUM_THREADS"]
    env["malloc keeps freed memory"] = str(KEEP_FREED)
    print(f"train step (forward + backward + AdamW): {cfg.n_layers} layers, d_model {cfg.d_model}, "
          f"{cfg.n_heads} heads, T {a.seq}, B {a.batch}, V {cfg.vocab_size}, float32, pre-LN "
          f"RMSNorm, {model.num_parameters():,} parameters; median of {a.repeats}, round-robin")
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    print(f"\nnormlab  {t['normlab'] * 1e3:8.2f} ms/step")
    print(f"torch    {t['torch'] * 1e3:8.2f} ms/step")
    print(f"normlab / torch = {t['normlab'] / t['torch']:.2f}   (goal <= 1.0)")
    mem = {}
    for which in ("normlab", "torch"):
        cmd = [sys.executable, __file__, "--memory-child", which, "--layers", str(a.layers),
               "--width", str(a.width), "--heads", str(a.heads), "--seq", str(a.seq),
               "--batch", str(a.batch), "--vocab", str(a.vocab)]
        cmd += ["--threads", str(THREADS)] + ["--glibc-malloc-defaults"] * (not KEEP_FREED)
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        mem[which] = json.loads(out.strip().splitlines()[-1])
    print(f"\npeak memory above the post-import baseline (fresh process each): normlab "
          f"{mem['normlab']['peak_mib']:.1f} MiB, torch {mem['torch']['peak_mib']:.1f} MiB; "
          f"NumPy traced peak within one normlab step {mem['normlab']['traced_step_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
