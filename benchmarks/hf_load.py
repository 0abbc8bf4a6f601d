"""A GPT-2-small-shaped checkpoint (124M parameters, random weights written by transformers'
``save_pretrained`` into a temporary directory): normlab against transformers + PyTorch CPU.

    python benchmarks/hf_load.py [--threads N] [--repeats 5] [--tokens 256] [--dir PATH]
                                 [--inspect]

Prints, each beside its reference measured in the same run:

- load time: ``normlab.models.load_hf`` / ``from_pretrained`` (median of round-robin repeats,
  the page cache warm for both), and against the physical floor, one memory copy of the weights;
- peak memory of a load (fresh process each, Linux: the resident peak VmHWM reset after the
  imports, minus the resident set then) against the weights' size;
- one forward and backward over 1 x T tokens (loss on the next tokens, every parameter gradient):
  normlab / PyTorch eager (transformers' default SDPA attention, dropout off in both), and the
  rate normlab reaches against the measured float32 GEMM rate (6 N T matmul FLOPs + attention);
- with ``--inspect``: the wall time of ``normlab inspect`` on the checkpoint (T tokens).

Goals (issue 14): load <= 2x from_pretrained, peak <= 1.5x the weights, forward + backward <=
1.5x torch, inspect < 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=None, help="threads for both (default: cores)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--tokens", type=int, default=256, help="T of the forward + backward")
    p.add_argument("--dir", type=Path, default=None, help="where to write the checkpoint "
                   "(default: a temporary directory, removed at the end)")
    p.add_argument("--inspect", action="store_true", help="also time normlab inspect")
    p.add_argument("--no-step", action="store_true", help="skip the forward + backward")
    p.add_argument("--memory-child", choices=("normlab", "transformers"), help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = parse()
THREADS = ARGS.threads or os.cpu_count() or 1
for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[var] = str(THREADS)  # before NumPy, numba and torch start their pools

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from normlab.models import load_hf  # noqa: E402

torch.set_num_threads(THREADS)
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()


def status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


def write_checkpoint(path: Path) -> None:
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())  # 124M, float32
    model.save_pretrained(path)


def hf_load(path: Path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def memory_child(which: str, path: Path) -> None:
    """Peak resident memory of one load, above the resident set after the imports (and after a
    first load, so that what each library loads once per process stays out)."""
    load = (lambda: load_hf(path)) if which == "normlab" else (lambda: hf_load(path))
    model = load()
    del model
    with open("/proc/self/clear_refs", "w") as f:  # the peak restarts from the current set
        f.write("5")
    base = status_kib("VmRSS")
    model = load()
    peak = status_kib("VmHWM")
    print(json.dumps({"peak_mib": (peak - base) / 1024, "params": sum(
        p.size for p in model.parameters().values()) if which == "normlab" else sum(
        p.numel() for p in model.parameters())}))


def sgemm_rate(T: int, C: int) -> float:
    """FLOP/s of float32 matrix products of the model's shape (T x C) @ (C x 4C)."""
    from normlab.lab.timing import measure

    rng = np.random.default_rng(0)
    a = rng.standard_normal((T, C), dtype=np.float32)
    b = rng.standard_normal((C, 4 * C), dtype=np.float32)
    t = measure({"gemm": lambda: a @ b}, repeats=7, warmup=2, min_time=0.05)["gemm"]
    return 2 * T * C * 4 * C / t


def main() -> None:
    a = ARGS
    if a.memory_child:
        memory_child(a.memory_child, a.dir)
        return
    from normlab.lab.timing import environment, measure

    tmp = None
    if a.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="normlab-gpt2-")
        a.dir = Path(tmp.name)
    try:
        if not (a.dir / "config.json").is_file():
            write_checkpoint(a.dir)
        run(a, environment, measure)
    finally:
        if tmp is not None:
            tmp.cleanup()


def run(a, environment, measure) -> None:
    path = a.dir
    weights = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    model = load_hf(path)
    n_params = model.num_parameters()
    buf = np.empty(n_params, np.float32)
    src = np.ones(n_params, np.float32)
    t = measure({"normlab load_hf": lambda: load_hf(path),
                 "transformers from_pretrained": lambda: hf_load(path),
                 # buf and src bound now: the del below drops the names, not the arrays
                 "memory copy of the weights": lambda buf=buf, src=src: np.copyto(buf, src)},
                repeats=a.repeats, warmup=1)
    del buf, src
    env = environment()
    print(f"GPT-2 small shape: {n_params:,} parameters, float32 file of {weights / 2**20:.0f} MiB; "
          f"median of {a.repeats}, round-robin")
    print(
        ", ".join(f"{k} {v}" for k, v in env.items()) + f", transformers {transformers.__version__}"
    )
    tl, th, tc = (
        t["normlab load_hf"],
        t["transformers from_pretrained"],
        t["memory copy of the weights"],
    )
    print(f"\nload: normlab {tl:.3f} s, transformers {th:.3f} s, one memory copy of the weights "
          f"{tc:.3f} s")
    print(f"  normlab / from_pretrained = {tl / th:.2f}   (goal <= 2.0); normlab / memory copy = "
          f"{tl / tc:.1f}")

    mem = {}
    for which in ("normlab", "transformers"):
        cmd = [sys.executable, __file__, "--memory-child", which, "--dir", str(path),
               "--threads", str(THREADS)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        mem[which] = json.loads(out.strip().splitlines()[-1])["peak_mib"]
    w = weights / 2**20
    print(f"peak memory of a load (fresh process each): normlab {mem['normlab']:.0f} MiB = "
          f"{mem['normlab'] / w:.2f} x the weights (goal <= 1.5); transformers "
          f"{mem['transformers']:.0f} MiB = {mem['transformers'] / w:.2f} x")

    T = a.tokens
    rng = np.random.default_rng(0)
    if a.no_step:
        return
    idx = rng.integers(0, model.config.vocab_size, size=(1, T))
    targets = np.concatenate([idx[:, 1:], np.full((1, 1), -100)], axis=1)
    hf_model = hf_load(path)
    ids = torch.from_numpy(idx)

    def normlab_step():
        model.forward(idx, targets)
        model.zero_grad()
        model.backward()

    def torch_step():
        hf_model.zero_grad(set_to_none=True)
        hf_model(input_ids=ids, labels=ids).loss.backward()

    normlab_step()  # numba's pool starts on the first call and may reset torch's threads
    torch.set_num_threads(THREADS)
    t = measure({"normlab": normlab_step, "torch": torch_step}, repeats=a.repeats, warmup=2)
    cfg = model.config
    non_embedding = n_params - cfg.vocab_size * cfg.d_model - cfg.seq_len * cfg.d_model
    flops = 6 * (non_embedding + cfg.vocab_size * cfg.d_model) * T \
        + 6 * cfg.n_layers * T * T * cfg.d_model  # the head's GEMMs + attention's (causal half x2)
    rate = sgemm_rate(T, cfg.d_model)
    print(f"\nforward + backward, 1 x {T} tokens: normlab {t['normlab'] * 1e3:.0f} ms, torch eager "
          f"{t['torch'] * 1e3:.0f} ms; normlab / torch = {t['normlab'] / t['torch']:.2f}   "
          f"(goal <= 1.5)")
    print(
        f"  {flops / 1e9:.1f} GFLOP of products: normlab {flops / t['normlab'] / 1e9:.1f} GFLOP/s, "
        f"torch {flops / t['torch'] / 1e9:.1f} GFLOP/s, measured sgemm ({T} x {cfg.d_model} @ "
        f"{cfg.d_model} x {4 * cfg.d_model}) {rate / 1e9:.1f} GFLOP/s"
    )

    if a.inspect:
        tokens = path.parent / f"{path.name}-tokens.npy"
        np.save(tokens, rng.integers(0, cfg.vocab_size, size=T))
        out = path.parent / f"{path.name}-inspect"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "normlab.lab", "inspect", str(path), "--tokens",
                        str(tokens), "--out", str(out), "--quiet"], check=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": str(THREADS)})
        print(f"\nnormlab inspect on it ({T} tokens, {THREADS} threads): "
              f"{time.perf_counter() - t0:.0f} s (goal < 180 s)")


if __name__ == "__main__":
    main()
