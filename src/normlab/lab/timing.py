"""Side-by-side timing: every candidate measured in the same run, round-robin, median of repeats.

Absolute times on shared machines are noise; ratios of medians measured in one process, with the
candidates interleaved so that a slow spell hits all of them, are what normlab reports.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import numpy as np


def measure(candidates: dict[str, Callable[[], object]], *, repeats: int = 10, warmup: int = 2,
            min_time: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each candidate, measured round-robin.

    Each repeat calls every candidate once (after ``warmup`` untimed rounds); with ``min_time``,
    a candidate call is repeated until it has run that long and the per-call time is taken.
    """
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    samples: dict[str, list[float]] = {k: [] for k in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= min_time:
                    break
            samples[name].append(elapsed / n)
    return {k: float(np.median(v)) for k, v in samples.items()}


def environment() -> dict[str, str]:
    """Threads, CPU and library versions to print beside every figure."""
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": str(os.cpu_count()),
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch threads"] = str(torch.get_num_threads())
    except ImportError:
        pass
    try:
        import numba

        env["numba"] = numba.__version__
        # numba.config sets its options at import, out of the stubs' sight
        env["numba threads"] = str(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    except ImportError:
        pass
    return env
