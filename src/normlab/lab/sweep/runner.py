"""``run_sweep``: run the points of a sweep that the store has not finished, on an executor."""

from __future__ import annotations

import contextlib
import heapq
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ...train.config import TrainConfig
from .executors import ProcessPool, default_workers
from .spec import Point, SweepSpec, load_spec, make_points
from .store import DIVERGED, DONE, FAILED, RunRecord, RunStore, StoreError
from .task import run_points

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
              store_dir: str | os.PathLike, *, executor: Any = None,
              progress: Progress | None = None) -> list[RunRecord]:
    """Run every point that ``store_dir`` has not finished and return all the points' records.

    ``points``: a :class:`SweepSpec`, the path of a spec file, or an iterable of ``TrainConfig``
    (or :class:`Point`); equal configs run once. Finished runs (done or diverged) are read back,
    never run or written again; failed runs and runs killed midway are run again. ``executor``:
    :class:`ProcessPool` (default: one worker per core, at most one per point to run),
    :class:`SerialExecutor` or :class:`RayExecutor`. Each outcome is written to the store as soon
    as it arrives, so an interrupted sweep (any exception, Ctrl-C, SIGTERM turned into one)
    keeps every run that finished; the executor's workers are stopped on the way out.

    Before anything runs, every point to run is checked against the machine's memory
    (``normlab.train.budget.check_memory``: a ``MemoryBudgetError`` naming the point and the
    field) and the store must be writable (a ``StoreError``). A run whose directory cannot be
    written (a file in its place, a folder made read-only) is recorded as failed, with the reason,
    and the sweep goes on with the other points.

    ``progress(done, total, note)`` is called at the start and after each run. Returns one
    :class:`RunRecord` per point, in the points' order.
    """
    pts = as_points(points)
    store = RunStore(store_dir)
    records = {p.id: store.read(p) for p in pts}
    todo = [p for p in pts if not records[p.id].finished]
    check_points_fit(todo)
    if todo:
        store.check_writable()
        store.mend_journal(list(records.values()))
    counts = Counter({"reused": len(pts) - len(todo)})
    for r in records.values():
        if r.finished:
            counts[r.status] += 1
    if todo:
        if executor is None:
            executor = ProcessPool(min(default_workers(), len(todo)))
        _execute(todo, store, records, counts, len(pts), progress, executor)
    elif progress is not None:
        progress(counts[DONE] + counts[DIVERGED] + counts[FAILED], len(pts), note(counts))
    return [records[p.id] for p in pts]


def _execute(todo: list[Point], store: RunStore, records: dict[str, RunRecord], counts: Counter,
             total: int, progress: Progress | None, executor: Any) -> None:
    """Run ``todo`` on the executor, writing each outcome to the store as it arrives (``records``
    and ``counts`` updated in place; an unwritable run recorded as failed)."""

    def report() -> None:
        if progress is not None:
            progress(counts[DONE] + counts[DIVERGED] + counts[FAILED], total, note(counts))

    report()
    attempts: dict[str, int] = {}

    def unwritable(p: Point, exc: StoreError) -> None:
        records[p.id] = RunRecord(p.id, p.config.to_dict(), FAILED, f"StoreError: {exc}",
                                  path=store.run_dir(p.id), reused=False, varied=dict(p.varied))
        counts[FAILED] += 1
        report()

    def items() -> Iterator[tuple[list[Point], list[dict]]]:
        for group in ensembles(todo, getattr(executor, "workers", 1) or 1):
            ready = []  # read lazily by the executor: prepared when dispatched
            for p in group:
                try:
                    attempts[p.id] = store.prepare(p)
                except StoreError as exc:
                    unwritable(p, exc)
                    continue
                ready.append(p)
            if ready:
                yield ready, [p.config.to_dict() for p in ready]

    with contextlib.closing(executor.imap(run_points, items())) as outcomes:
        for group, payload in outcomes:
            # one payload per run; a worker that died or a task that failed: the same for all
            payloads = payload.get("payloads") or [payload] * len(group)
            for p, one in zip(group, payloads):
                try:
                    records[p.id] = store.write(p, one, attempts[p.id])
                except StoreError as exc:
                    unwritable(p, exc)
                    continue
                counts[one["status"]] += 1
                report()


# the most runs one ensemble trains (benchmarks/train_ensemble.py): beyond, a member's step is
# no faster at the lab's quick shape, and slower at the full sizes' longer sequences (shape
# "long"; likely as the members' activations leave the cache, not measured apart); one task
# would also hold a worker for long
MAX_MEMBERS = 8


def ensemble_key(config: TrainConfig) -> str:
    """What runs must share to train as one ensemble (``normlab.train.ensemble``): the model's
    shape-changing fields and the batch size; equal keys can share a pass."""
    import json

    from ...models.members import LOSS_FIELDS

    model = {k: v for k, v in config.model.to_dict().items() if k not in LOSS_FIELDS}
    return json.dumps([config.batch_size, model], sort_keys=True, default=str)


# an ensemble step's time in members: each member's own work, plus this much shared per step
# (benchmarks/train_ensemble.py at the lab's shape: a member-step takes about 14.5 + 8.5 / M ms)
STEP_OVERHEAD = 0.6


def ensembles(points: list[Point], workers: int) -> list[list[Point]]:
    """``points`` grouped into ensembles for ``workers`` workers, the costliest first (the order
    the executor takes them in). The points of one ``ensemble_key`` are cut, in their order, into
    consecutive groups of near-equal size, at most ``MAX_MEMBERS`` and at most what the memory
    allows (``train.budget``: every member's parameters, optimizer state and activations); a key
    is cut into more groups while that shortens the time until the last worker is done, as a
    worker taking the costliest group left whenever it is free would see it (``_finish_time``:
    a group costs its steps' FLOPs times its members plus ``STEP_OVERHEAD``)."""
    keys: dict[str, list[Point]] = {}
    for p in points:
        keys.setdefault(ensemble_key(p.config), []).append(p)
    runs = list(keys.values())
    cuts = [-(-len(m) // _members_that_fit(m[0].config)) for m in runs]

    def groups(cuts: list[int]) -> list[tuple[float, list[Point]]]:
        out = []
        for members, n in zip(runs, cuts):
            size, extra = divmod(len(members), n)
            lo = 0
            for i in range(n):
                hi = lo + size + (i < extra)
                out.append((_cost(members[lo:hi]), members[lo:hi]))
                lo = hi
        return sorted(out, key=lambda cg: cg[0], reverse=True)

    best = _finish_time([c for c, _ in groups(cuts)], workers)
    while True:
        tries = [cuts[:i] + [n + 1] + cuts[i + 1:] for i, n in enumerate(cuts)
                 if n < len(runs[i])]
        scored = [(_finish_time([c for c, _ in groups(t)], workers), t) for t in tries]
        if not scored or min(t for t, _ in scored) >= best * (1 - 1e-9):
            return [g for _, g in groups(cuts)]
        best, cuts = min(scored, key=lambda tc: tc[0])


def _cost(group: list[Point]) -> float:
    """A group's relative time: its longest run's steps x a step's FLOPs x (members +
    ``STEP_OVERHEAD``)."""
    from ...train.budget import step_flops

    c = group[0].config
    return max(p.config.steps for p in group) * step_flops(c) * (len(group) + STEP_OVERHEAD)


def _finish_time(costs: list[float], workers: int) -> float:
    """When the last of ``workers`` workers is done with groups of ``costs``, taken in order,
    each by the first worker free."""
    free = [0.0] * max(min(workers, len(costs)), 1)
    for c in costs:
        heapq.heapreplace(free, free[0] + c)
    return max(free)


def _members_that_fit(config: TrainConfig) -> int:
    """How many runs like ``config`` one ensemble may hold: ``MAX_MEMBERS``, fewer where their
    memory (all but the data source, which the members share) would pass half of what the
    machine has available."""
    from ...train.budget import available_memory, estimate

    e = estimate(config)
    per_run = e.parameters + e.optimizer + e.activations + e.evaluation + e.history
    free = available_memory()
    if free is None or per_run <= 0:
        return MAX_MEMBERS
    return max(1, min(MAX_MEMBERS, int(0.5 * free // per_run)))


def check_points_fit(points: Iterable[Point]) -> None:
    """Refuse, before anything runs, a point whose memory estimate exceeds the machine's memory:
    a ``MemoryBudgetError`` naming the point's varied values and the field to lower."""
    from ...train.budget import MemoryBudgetError, check_memory

    for p in points:
        try:
            check_memory(p.config)
        except MemoryBudgetError as exc:
            where = ", ".join(f"{k}={v!r}" for k, v in p.varied.items()) or "the base config"
            raise MemoryBudgetError(f"point {p.id} ({where}): {exc}", field=exc.field) from None


def read_sweep(points: SweepSpec | str | os.PathLike | Iterable[TrainConfig | Point],
               store_dir: str | os.PathLike) -> list[RunRecord]:
    """The store's record of every point (``pending`` where it has no result), running nothing."""
    store = RunStore(store_dir)
    return [store.read(p) for p in as_points(points)]


__all__ = ["as_points", "check_points_fit", "read_sweep", "run_sweep"]
