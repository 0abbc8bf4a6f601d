"""The task every executor runs: one training run from a config dict, returned as plain data.

A worker process imports this module (by reference, when it unpickles the task), and with it
NumPy: the worker's thread settings must be in its environment from its start, which is what
``executors.ProcessPool`` and ``executors.RayExecutor`` arrange.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from typing import Any

# One thread per worker: the pool's parallelism is its workers, and a multi-threaded BLAS or
# numba in each of N workers on N cores oversubscribes them. Read when NumPy / numba load, so
# these are in a worker's environment from its start (see executors.ProcessPool).
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}


def run_point(config: dict[str, Any]) -> dict[str, Any]:
    """Train the run ``config`` (``TrainConfig.to_dict()``) describes; never raises.

    Returns ``{"status": "done" | "diverged" | "failed", "reason", "result", "wall_s", "cpu_s",
    "host", "pid"}``: ``result`` is ``TrainResult.to_dict()`` (done and diverged runs),
    ``reason`` why training stopped early (diverged) or the exception (failed, with
    ``traceback``). A run that diverges is a result, not a failure.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        from ...train import TrainConfig, train
        from ..allocator import keep_freed_memory

        keep_freed_memory()  # as ``normlab train``: freed temporaries reused, not page-faulted

        result = train(TrainConfig.from_dict(config))
        out.update(status="done" if result.stopped is None else "diverged", reason=result.stopped,
                   result=result.to_dict())
    except Exception as exc:  # a failure is recorded, and retried by the next sweep
        out.update(failure(f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0  # below wall_s when the worker waits for a core
    return out


def run_points(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Train the runs ``configs`` describe as one ensemble (``normlab.train.Ensemble``: one pass
    for all, each run's result its single run's); never raises. Returns ``{"payloads": [...]}``,
    one ``run_point`` payload per config, in order, its ``wall_s`` and ``cpu_s`` the run's share
    of the ensemble's. Runs that cannot train together (an exception building the ensemble, or
    during it) are each trained alone, so every run gets its own outcome."""
    if len(configs) == 1:
        return {"payloads": [run_point(configs[0])]}
    t0, c0 = time.perf_counter(), time.process_time()
    base: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        from ...train import TrainConfig, train_ensemble
        from ..allocator import keep_freed_memory

        keep_freed_memory()
        results = train_ensemble([TrainConfig.from_dict(c) for c in configs])
    except Exception:
        return {"payloads": [run_point(c) for c in configs]}
    wall = (time.perf_counter() - t0) / len(configs)
    cpu = (time.process_time() - c0) / len(configs)
    return {"payloads": [
        {**base, "status": "done" if r.stopped is None else "diverged", "reason": r.stopped,
         "result": r.to_dict(), "wall_s": wall, "cpu_s": cpu} for r in results]}


def call(job: tuple[Any, Any]) -> dict[str, Any]:
    """``fn(arg)`` for ``job = (fn, arg)``, as an executor task; never raises. Returns
    ``{"status": "done", "value": fn(arg)}``, or a failure payload with the traceback. An
    experiment's own computations go to the pool's workers this way
    (``lab.experiments._training.run_tasks``); ``fn`` travels by reference (a module-level
    function)."""
    fn, arg = job
    try:
        from ..allocator import keep_freed_memory

        keep_freed_memory()
        return {"status": "done", "value": fn(arg)}
    except Exception as exc:
        return failure(f"{type(exc).__name__}: {exc}", traceback.format_exc())


def failure(reason: str, tb: str | None = None) -> dict[str, Any]:
    """The payload of a run that failed (an exception, or a worker that died)."""
    return {"status": "failed", "reason": reason, "traceback": tb, "result": None}


def worker_init(parent_pid: int) -> None:
    """A pool worker's initializer: leave Ctrl-C to the driver (which stops the workers), keep
    freed memory for reuse (``allocator``), and exit when the driver is gone (killed with
    SIGKILL, say) rather than train on for nobody."""
    import signal

    from ..allocator import keep_freed_memory

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_freed_memory()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="normlab-parent-watch", daemon=True).start()
