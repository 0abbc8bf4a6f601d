"""Where a sweep's tasks run: in this process, on a local process pool, or on a Ray cluster.

An executor has one method, ``imap(fn, items)``: ``items`` yields ``(tag, arg)`` pairs and is read
lazily (an item is taken when there is a free worker for it); ``imap`` yields ``(tag, fn(arg))``
in the order the tasks finish. ``fn`` is :func:`task.run_points` (runs trained as one ensemble),
which never raises; a task lost to the machinery (a worker process killed, a Ray node gone)
comes back as a ``failed`` payload.
Results travel back to the driver, which writes the store: on a cluster the driver's disk is the
one place every result reaches, and workers need no shared filesystem.

* :class:`SerialExecutor` runs the tasks one by one in this process (the lab's tiny sweeps, the
  benchmark's baseline).
* :class:`ProcessPool` (the default): ``concurrent.futures.ProcessPoolExecutor`` with the
  ``spawn`` start method (fork and numba's or BLAS's threads do not mix), one task per worker at
  a time, and one thread per worker: the thread variables of :data:`task.THREAD_ENV` are put in
  this process's environment while the pool lives, so each worker has them before NumPy loads
  (an initializer would run after the task's module, and NumPy, were imported). Workers ignore
  Ctrl-C and exit on their own when the driver dies; when the sweep is interrupted, the driver
  terminates them.
* :class:`RayExecutor`: the same task as a Ray task (``num_cpus=1``, the same thread variables
  through ``runtime_env``), on the Ray instance this process is already connected to, or one it
  connects to (``address="auto"`` or ``"HOST:PORT"``) or starts (``"local"``). The nodes need
  normlab installed, as the task is sent by reference.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .task import THREAD_ENV, failure, worker_init

T = TypeVar("T")
Task = Callable[[Any], dict]


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    return workers


class SerialExecutor:
    """Every task in this process, one after the other."""

    workers = 1

    def describe(self) -> str:
        return "serial (this process)"

    def imap(self, fn: Task, items: Iterable[tuple[T, Any]]) -> Iterator[tuple[T, dict]]:
        for tag, arg in items:
            yield tag, fn(arg)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# Inside ``shared_workers()``: "active", the ProcessPoolExecutor every ProcessPool uses (None
# until the first asks for one), and "size", its number of workers
_SHARED: dict[str, Any] = {}


@contextlib.contextmanager
def shared_workers() -> Iterator[None]:
    """Within the block, every :class:`ProcessPool` takes its tasks to one set of worker
    processes, kept from sweep to sweep, and shut down when the block ends. A report runs a dozen
    sweeps; each would otherwise start its workers again (NumPy imported and the kernels loaded
    from numba's cache: about 1.5 s of CPU a worker). A task's numbers do not depend on what its
    worker ran before: within one sweep a worker already runs task after task. Blocks nest (the
    outermost one owns the workers)."""
    if "active" in _SHARED:
        yield
        return
    _SHARED["active"] = None
    try:
        yield
    finally:
        pool = _SHARED.pop("active")
        if pool is not None:
            pool.shutdown(wait=True)


class ProcessPool:
    """``workers`` processes on this machine (default: one per core), one single-threaded run
    each; inside :func:`shared_workers`, the block's processes (as many as the largest pool
    asked for) with at most ``workers`` of them busy."""

    def __init__(self, workers: int | None = None):
        self.workers = default_workers() if workers is None else _check_workers(workers)

    def describe(self) -> str:
        return f"process pool, {self.workers} worker(s)"

    def _pool(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if "active" not in _SHARED:
            return ProcessPoolExecutor(self.workers,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=worker_init, initargs=(os.getpid(),))
        pool = _SHARED["active"]
        if pool is None or _SHARED["size"] < self.workers:
            if pool is not None:
                pool.shutdown(wait=True)
            pool = _SHARED["active"] = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=worker_init, initargs=(os.getpid(),))
            _SHARED["size"] = self.workers
        return pool

    def _release(self, pool: Any, clean: bool) -> None:
        """The sweep is done with ``pool``: shut it down, unless it is the block's and the sweep
        ended cleanly (an interrupted sweep stops the block's workers too: they may be mid-task)."""
        if _SHARED.get("active") is pool:
            if clean:
                return
            _SHARED["active"] = None
        if clean:
            pool.shutdown(wait=True)
        else:
            _terminate(pool)

    def imap(self, fn: Task, items: Iterable[tuple[T, Any]]) -> Iterator[tuple[T, dict]]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        items = iter(items)
        inflight: dict = {}
        clean = broken = False
        with _environ(THREAD_ENV):
            pool = self._pool()
            try:
                while True:
                    if broken and not inflight:  # every task of the broken pool is reported
                        if _SHARED.get("active") is pool:
                            _SHARED["active"] = None
                        pool.shutdown(wait=True)
                        pool, broken = self._pool(), False
                    while not broken and len(inflight) < self.workers:  # taken lazily
                        nxt = next(items, None)
                        if nxt is None:
                            break
                        inflight[pool.submit(fn, nxt[1])] = nxt[0]
                    if not inflight:
                        break
                    done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                    for fut in done:
                        tag = inflight.pop(fut)
                        try:
                            payload = fut.result()
                        except BrokenProcessPool:
                            broken = True
                            payload = failure("a worker process died while this run was in the "
                                              "pool (killed, or out of memory); retried by the "
                                              "next sweep")
                        except Exception as exc:  # pickling, say
                            payload = failure(f"{type(exc).__name__}: {exc}")
                        yield tag, payload
                clean = True
            finally:  # not clean: interrupted (Ctrl-C, SIGTERM) or the caller stopped reading
                self._release(pool, clean)


def _terminate(pool: Any) -> None:
    """Stop a ProcessPoolExecutor's workers now, running tasks included."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14+
        pool.terminate_workers()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


class RayUnavailable(RuntimeError):
    """Ray is not installed (the ``normlab[ray]`` extra), or its cluster cannot be reached."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("running on Ray needs the ray package: pip install 'normlab[ray]' "
                             "(or pip install 'ray>=2.9')") from None
    return ray


class RayExecutor:
    """Ray tasks, one CPU each, on a Ray cluster.

    ``address``: ``None`` uses the Ray instance this process is connected to (``ray.init`` was
    called), or else behaves as ``"auto"``; ``"auto"`` connects to the running cluster
    (``ray.init(address="auto")``); ``"HOST:PORT"`` or ``"ray://HOST:PORT"`` to that one;
    ``"local"`` starts a private instance with ``num_cpus`` CPUs (default: all) for trying it
    out, and stops it at the end. Whatever this executor started or connected to, it leaves at
    the end; a connection the caller made is left open.
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        if address is not None and (not isinstance(address, str) or not address):
            raise ValueError(f"address must be 'auto', 'local' or HOST:PORT; got {address!r}")
        self.address = address
        self.num_cpus = None if num_cpus is None else _check_workers(num_cpus)
        self.workers = self.num_cpus or 0  # known once connected

    def describe(self) -> str:
        where = {None: "the connected Ray instance", "auto": "the Ray cluster (auto)",
                 "local": "a local Ray instance"}.get(self.address,
                                                      f"the Ray cluster at {self.address}")
        return f"Ray tasks on {where}"

    def imap(self, fn: Task, items: Iterable[tuple[T, Any]]) -> Iterator[tuple[T, dict]]:
        ray = import_ray()
        started = False
        if not ray.is_initialized():
            try:
                if self.address == "local":
                    ray.init(num_cpus=self.num_cpus, include_dashboard=False)
                else:
                    ray.init(address=self.address or "auto")
            except Exception as exc:  # no cluster there (ConnectionError), a version mismatch, ...
                raise RayUnavailable(f"cannot start or reach Ray ({self.address or 'auto'}): "
                                     f"{type(exc).__name__}: {exc}") from None
            started = True
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        remote = ray.remote(fn).options(num_cpus=1, max_retries=1,
                                        runtime_env={"env_vars": dict(THREAD_ENV)})
        refs: dict = {}
        try:
            for tag, arg in items:  # Ray queues them; the cluster's CPUs set the parallelism
                refs[remote.remote(arg)] = tag
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    tag = refs.pop(ref)
                    try:
                        payload = ray.get(ref)
                    except ray.exceptions.RayError as exc:  # a worker or node lost
                        payload = failure(f"Ray: {type(exc).__name__}: {exc}")
                    yield tag, payload
        finally:
            for ref in refs:  # interrupted: running tasks are stopped
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


# ---- where runs execute, as one name: the --workers / --ray flags of run, report and sweep -----
EXECUTORS = ("pool", "pool:N", "serial", "ray:auto", "ray:local", "ray:local:N", "ray:HOST:PORT")


def check_executor(spec: Any) -> str:
    """Refuse an executor name that is not one of :data:`EXECUTORS` (N >= 1): a TypeError for a
    value that is not a string, a ValueError for an unknown name."""
    if not isinstance(spec, str):
        raise TypeError(f"executor must be a string, one of {', '.join(EXECUTORS)}; "
                        f"got {type(spec).__name__}")
    head, _, tail = spec.partition(":")
    ok = (spec in ("pool", "serial") or (head == "pool" and tail.isdigit() and int(tail) >= 1)
          or (head == "ray" and bool(tail.strip()) and not tail.startswith("local:"))
          or (tail.startswith("local:") and tail[6:].isdigit() and int(tail[6:]) >= 1))
    if not ok:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {spec!r}")
    return spec


def make_executor(spec: str, runs: int) -> SerialExecutor | ProcessPool | RayExecutor:
    """The executor an executor name asks for: ``pool`` (a worker per core, at most one per run),
    ``pool:N``, ``serial``, ``ray:auto``, ``ray:local`` (``ray:local:N``: N CPUs) or
    ``ray:HOST:PORT``."""
    head, _, tail = check_executor(spec).partition(":")
    if spec == "serial":
        return SerialExecutor()
    if head == "ray":
        if tail.startswith("local:"):
            return RayExecutor("local", num_cpus=int(tail[6:]))
        return RayExecutor(tail)
    workers = int(tail) if tail else default_workers()
    return ProcessPool(max(1, min(workers, runs)))


def add_executor_arguments(p: Any) -> None:
    """``--workers`` / ``--ray``: where training runs execute (``normlab run``, ``report`` and
    ``sweep``); every run is seeded, so the numbers do not depend on it."""
    p.add_argument("--workers", metavar="N", default=None,
                   help="processes of the local pool (default: one per core, at most one per "
                   "run); with --ray local, the local instance's CPUs")
    p.add_argument("--ray", metavar="auto|ADDRESS|local", default=None,
                   help="run the training runs as Ray tasks: 'auto' joins the running cluster, "
                   "ADDRESS (HOST:PORT or ray://HOST:PORT) that cluster, 'local' starts a "
                   "private local instance to try it out; needs normlab[ray]")


def executor_from_args(args: Any) -> str:
    """The executor name (see :func:`make_executor`) that ``--workers`` and ``--ray`` ask for;
    bad values raise ``normlab.lab.cli.UsageError`` naming the flag."""
    from ..cli import UsageError

    workers = args.workers
    if workers is not None:
        text = str(workers)
        if not text.isdigit() or int(text) < 1:
            raise UsageError(f"--workers must be an integer >= 1; got {workers!r}")
        workers = int(text)
    if args.ray is None:
        return "pool" if workers is None else f"pool:{workers}"
    ray = str(args.ray).strip()
    if not (ray in ("auto", "local") or _host_port(ray.removeprefix("ray://"))):
        raise UsageError(f"--ray must be auto, local or HOST:PORT (a port 1-65535); got "
                         f"{args.ray!r}")
    if workers is not None and ray != "local":
        raise UsageError("--workers sizes the local pool (or --ray local); on a Ray cluster its "
                         "CPUs do")
    return f"ray:{ray}" if workers is None else f"ray:local:{workers}"


def _host_port(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


__all__ = ["EXECUTORS", "ProcessPool", "RayExecutor", "RayUnavailable", "SerialExecutor",
           "add_executor_arguments", "check_executor", "default_workers", "executor_from_args",
           "import_ray", "make_executor", "shared_workers"]
