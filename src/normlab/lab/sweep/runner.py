"""``run_sweep``: run the points of a sweep that the store has not finished, on an executor."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ...train.config import TrainConfig
from .executors import ProcessPool, default_workers
from .spec import Point, SweepSpec, load_spec, make_points
from .store import DIVERGED, DONE, FAILED, RunRecord, RunStore
from .task import run_point

Progress = Callable[[float, float, str], None]  # (done, total, note), as the lab's progress bars


def as_points(points: SweepSpec | str | os.PathLike | Iterable[TrainConfig | Point]) -> list[Point]:
    """The points of a spec, a spec file, or configs (or points) given directly."""
    if isinstance(points, SweepSpec):
        return points.points()
    if isinstance(points, (str, os.PathLike)):
        return load_spec(Path(points)).points()
    return make_points(points)


def note(counts: Counter) -> str:
    """``done 3 · diverged 1 · failed 0`` (and how many were already in the store)."""
    text = f"done {counts[DONE]} · diverged {counts[DIVERGED]} · failed {counts[FAILED]}"
    return text + (f" · {counts['reused']} from the store" if counts["reused"] else "")


def run_sweep(points: SweepSpec | str | os.PathLike | Iterable[TrainConfig | Point],
              store_dir: str | os.PathLike, *, executor=None,
              progress: Progress | None = None) -> list[RunRecord]:
    """Run every point that ``store_dir`` has not finished and return all the points' records.

    ``points``: a :class:`SweepSpec`, the path of a spec file, or an iterable of ``TrainConfig``
    (or :class:`Point`); equal configs run once. Finished runs (done or diverged) are read back,
    never run or written again; failed runs and runs killed midway are run again. ``executor``:
    :class:`ProcessPool` (default: one worker per core, at most one per point to run),
    :class:`SerialExecutor` or :class:`RayExecutor`. Each outcome is written to the store as soon
    as it arrives, so an interrupted sweep (any exception, Ctrl-C, SIGTERM turned into one)
    keeps every run that finished; the executor's workers are stopped on the way out.

    ``progress(done, total, note)`` is called at the start and after each run. Returns one
    :class:`RunRecord` per point, in the points' order.
    """
    pts = as_points(points)
    store = RunStore(store_dir)
    records = {p.id: store.read(p) for p in pts}
    todo = [p for p in pts if not records[p.id].finished]
    counts = Counter({"reused": len(pts) - len(todo)})
    for r in records.values():
        if r.finished:
            counts[r.status] += 1
    total = len(pts)

    def report() -> None:
        if progress is not None:
            progress(counts[DONE] + counts[DIVERGED] + counts[FAILED], total, note(counts))

    report()
    if not todo:
        return [records[p.id] for p in pts]
    if executor is None:
        executor = ProcessPool(min(default_workers(), len(todo)))
    attempts: dict[str, int] = {}

    def items() -> Iterator[tuple[Point, dict]]:
        for p in todo:  # read lazily by the executor: prepared when dispatched
            attempts[p.id] = store.prepare(p)
            yield p, p.config.to_dict()

    with contextlib.closing(executor.imap(run_point, items())) as outcomes:
        for p, payload in outcomes:
            records[p.id] = store.write(p, payload, attempts[p.id])
            counts[payload["status"]] += 1
            report()
    return [records[p.id] for p in pts]


def read_sweep(points: SweepSpec | str | os.PathLike | Iterable[TrainConfig | Point],
               store_dir: str | os.PathLike) -> list[RunRecord]:
    """The store's record of every point (``pending`` where it has no result), running nothing."""
    store = RunStore(store_dir)
    return [store.read(p) for p in as_points(points)]


__all__ = ["as_points", "read_sweep", "run_sweep"]
