"""The results store: one directory per run, written so that a sweep killed at any moment loses no
finished run and leaves nothing half-written.

Layout::

    OUT/runs/<id>/config.json     the run's TrainConfig.to_dict() (written when it is dispatched)
                  metrics.json    per-step records and evaluations (history, evals)
                  result.json     the final figures: final_val_loss, entropy_floor,
                                  loss_at_init, ...
                  status.json     done | diverged | failed, with the reason (and the traceback of a
                                  failure), wall and CPU time, attempt, host; written LAST
    OUT/events.jsonl              one line per dispatch and per outcome (an append-only journal)

Every file is written to a temporary file in the same directory, flushed to disk, and renamed
over its name (``os.replace``): a reader sees the old file or the new one, never part of one. A
run is finished when its ``status.json`` says ``done`` or ``diverged``; because that file is
written after the others, a finished run has all its files. Its journal line is written with it,
with SIGINT and SIGTERM held back in between; a SIGKILL between the two is mended by the next
sweep (:meth:`RunStore.mend_journal`), so the journal holds one outcome per finished run. A
directory without a final status
(killed mid-run, or ``failed``) is run again on the next sweep: its leftovers and any temporary
file of a killed writer are removed first. Finished runs are never written again.

What is read back is checked: a finished run whose ``result.json`` or ``metrics.json`` is missing
or does not match its schema (:func:`check_result`: the figures are numbers or null, the step
count an integer, ``stopped`` as the status says; :func:`check_metrics`: one record per step, the
evaluations with their step and loss) is never trusted and never a dead end: it reads as pending,
with
the damage in ``RunRecord.damaged``, and the next sweep moves its files aside into
``runs/<id>/damaged-<n>/`` (kept for inspection) and runs it again.

A store that cannot be written (a read-only folder, a file where a folder belongs) raises a
:class:`StoreError` naming the path: :meth:`RunStore.check_writable` before a sweep starts, and
:meth:`RunStore.prepare` / :meth:`RunStore.write` for one run (the sweep records that point as
failed and goes on with the others).

Two sweeps running on the same store at once do not corrupt it: each file is replaced whole, and
both write the same deterministic run, so the files of a run come from one writer or the other
(the wall times may differ). They may both run a point that neither had finished, wasting the
work; there is no lock, because sequential reruns (the case that matters) need none.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._files import read_json, write_json
from .spec import Point

DONE, DIVERGED, FAILED, PENDING = "done", "diverged", "failed", "pending"
FINISHED = (DONE, DIVERGED)  # results; a failed run is retried
RUN_FILES = ("config.json", "metrics.json", "result.json", "status.json")
# result.json's schema: key -> what it holds (null where the run has no such figure)
RESULT_NUMBERS = ("final_val_loss", "final_train_loss", "entropy_floor", "loss_at_init")
RESULT_COUNTS = ("steps_done", "skipped_steps")


class StoreError(ValueError):
    """A store (or one run's directory in it) that cannot be read or written, and why."""


def check_result(result: Any, status: str = DONE, *, complete: bool = True) -> None:
    """Refuse, naming the key, a ``result.json`` document that does not match its schema: a JSON
    object whose figures (:data:`RESULT_NUMBERS`) are finite numbers or null, whose counts
    (:data:`RESULT_COUNTS`) are integers >= 0, and whose ``stopped`` is null for a done run and a
    string for a diverged one. ``complete=False`` (a result built in Python rather than read from
    a store) checks only that the figures it has are numbers (non-finite allowed) or null."""
    if not isinstance(result, dict):
        raise ValueError(f"result.json must be a JSON object; got {type(result).__name__}")
    for key in RESULT_NUMBERS:
        if key not in result:
            if complete:
                raise ValueError(f"result.json lacks {key!r}")
            continue
        v = result[key]
        if v is None:
            continue
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or (complete and not math.isfinite(v))
        ):
            what = "a finite number" if complete else "a number"
            raise ValueError(f"result.json: {key} must be {what} or null; got {v!r}")
    if not complete:
        return
    for key in RESULT_COUNTS:
        v = result.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"result.json: {key} must be an integer >= 0; got {v!r}")
    stopped = result.get("stopped", ...)
    if status == DONE and stopped is not None:
        raise ValueError(f"result.json: stopped must be null for a done run; got {stopped!r}")
    if status == DIVERGED and not isinstance(stopped, str):
        raise ValueError(
            f"result.json: stopped must say why a diverged run stopped; got {stopped!r}"
        )


def check_metrics(metrics: Any, steps: int) -> None:
    """Refuse, naming the record, a ``metrics.json`` document that does not match its schema: a
    JSON object whose ``history`` holds one record per step done (a JSON object whose ``step`` is
    its index) and whose ``evals`` are JSON objects with an integer ``step`` and a ``val_loss``."""
    if not isinstance(metrics, dict):
        raise ValueError("metrics.json is missing or not a JSON object")
    history, evals = metrics.get("history"), metrics.get("evals")
    if not isinstance(history, list) or not isinstance(evals, list):
        raise ValueError("metrics.json must hold the lists history and evals")
    if len(history) != steps:
        raise ValueError(
            f"metrics.json holds {len(history)} step records; the run did {steps} steps"
        )
    for i, record in enumerate(history):
        if (
            not isinstance(record, dict)
            or record.get("step") != i
            or isinstance(record["step"], bool)
        ):
            raise ValueError(f"metrics.json: history[{i}] must be a record with step = {i}")
    for i, record in enumerate(evals):
        if not (isinstance(record, dict) and isinstance(record.get("step"), int)
                and not isinstance(record["step"], bool) and "val_loss" in record):
            raise ValueError(
                f"metrics.json: evals[{i}] must be a record with a step and a val_loss"
            )


@dataclass
class RunRecord:
    """One point of a sweep as the store holds it."""

    id: str  # the run's id (its directory name)
    config: dict[str, Any]  # TrainConfig.to_dict()
    status: str  # done, diverged, failed, or pending (not run, or killed mid-run)
    reason: str | None = None  # diverged: why training stopped; failed: the exception
    result: dict[str, Any] | None = None  # result.json (done and diverged runs)
    wall_s: float | None = None  # seconds the run took in its worker
    path: Path | None = None  # the run's directory
    reused: bool = False  # True when read from the store, False when run by this call
    varied: dict[str, Any] = field(default_factory=dict)  # the spec's varied fields -> values
    # CPU seconds of the run's worker (below wall_s: it waited for a core)
    cpu_s: float | None = None
    damaged: str | None = None  # why a finished run's files were not trusted (it reads as pending)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def value(self, name: str) -> Any:
        """A config value by flat name: ``"lr"``, ``"model.placement"``."""
        if name.startswith("model."):
            return self.config["model"][name[len("model."):]]
        if name == "probes" and name not in self.config:  # to_dict leaves out the default ones
            from ...train.probes import DEFAULT_PROBES
            return list(DEFAULT_PROBES)
        return self.config[name]

    def metrics(self) -> dict[str, Any]:
        """``{"history": [...], "evals": [...]}`` from metrics.json (read on demand)."""
        if self.path is None or not self.finished:
            raise ValueError(f"run {self.id} has no metrics (status {self.status})")
        data = read_json(self.path / "metrics.json", what=f"run {self.id}: metrics.json")
        if not (isinstance(data, dict) and isinstance(data.get("history"), list)
                and isinstance(data.get("evals"), list)):
            raise ValueError(f"run {self.id}: metrics.json must hold the lists history and evals")
        return data


def _read_json(path: Path) -> Any:
    """The JSON document at ``path``, or None when it is missing, unreadable or damaged."""
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


class RunStore:
    """The directory ``root`` holding a sweep's runs (see the module's docstring)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {str(self.root)!r} exists and is not a directory")

    def check_writable(self) -> None:
        """A :class:`StoreError` naming the path when the store cannot be written: a read-only
        folder, or a file where one of its folders belongs. Creates nothing (run it before a sweep
        starts)."""
        runs = self.root / "runs"
        for folder in (runs, self.root):
            if folder.exists() and not folder.is_dir():
                raise StoreError(
                    f"store {str(self.root)!r}: {str(folder)!r} is a file; expected a folder"
                )
        journal = self.root / "events.jsonl"
        if journal.exists() and not journal.is_file():
            raise StoreError(f"store {str(self.root)!r}: {str(journal)!r} is not a regular file")
        for folder in (self.root, runs):
            if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
                raise StoreError(f"store {str(self.root)!r}: {str(folder)!r} is not writable")
        existing = self.root
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise StoreError(
                f"store {str(self.root)!r} cannot be created: {str(existing)!r} is a file"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise StoreError(f"store {str(self.root)!r}: {str(existing)!r} is not writable")

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    # ---- reading -----------------------------------------------------------------------------
    def read(self, point: Point) -> RunRecord:
        """The point's record: finished or failed as its status says, pending otherwise. A run
        kept under the id an earlier version gave it (:func:`normlab.lab.identity.legacy_run_id`)
        is moved to its id now first (:meth:`adopt_legacy`)."""
        d = self.run_dir(point.id)
        if not d.exists():
            self.adopt_legacy(point)
        status = _read_json(d / "status.json")
        rec = RunRecord(point.id, point.config.to_dict(), PENDING, path=d, reused=True,
                        varied=dict(point.varied))
        if not isinstance(status, dict) or status.get("status") not in (DONE, DIVERGED, FAILED):
            return rec
        rec.status, rec.reason = status["status"], status.get("reason")
        rec.wall_s, rec.cpu_s = status.get("wall_s"), status.get("cpu_s")
        if rec.finished:
            rec.result = _read_json(d / "result.json")
            try:
                check_result(rec.result, rec.status)
                check_metrics(_read_json(d / "metrics.json"), rec.result["steps_done"])
            except ValueError as exc:  # never trusted: pending, and re-queued by the next sweep
                rec.damaged = (
                    str(exc) if rec.result is not None else "result.json is missing or not JSON"
                )
                rec.status, rec.result, rec.reason = PENDING, None, None
        return rec

    def adopt_legacy(self, point: Point) -> bool:
        """Rename the point's directory from its earlier id to its id now when the run there is
        the point's (its ``config.json`` is the point's config) and nothing holds the id now.
        Returns whether it did; logs a ``rekeyed`` journal line."""
        from ..identity import legacy_run_id

        old, new = self.run_dir(legacy_run_id(point.config)), self.run_dir(point.id)
        if old == new or not old.is_dir() or new.exists():
            return False
        if _read_json(old / "config.json") != json.loads(json.dumps(point.config.to_dict())):
            return False
        try:
            os.replace(old, new)
        except OSError:  # another sweep took it first, or the folder is read-only: run it
            return False
        self._log("rekeyed", point.id, legacy_id=old.name)
        return True

    def events(self) -> list[dict[str, Any]]:
        """The journal's lines (dispatches and outcomes), oldest first."""
        path = self.root / "events.jsonl"
        if not path.is_file():  # missing, or not a regular file (a FIFO is never opened)
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a kill mid-append
                continue
        return out

    # ---- writing -----------------------------------------------------------------------------
    def mend_journal(self, records: list[RunRecord]) -> int:
        """Append the outcome line of each finished record the journal lacks (a process killed
        between a run's status.json and its journal line), marked ``"mended": true``. Returns how
        many lines it wrote."""
        logged = {e.get("id") for e in self.events() if e.get("event") in FINISHED}
        missing = [r for r in records if r.finished and r.id not in logged]
        for r in missing:
            self._log(r.status, r.id, mended=True, wall_s=r.wall_s)
        return len(missing)

    def _log(self, event: str, run_id: str, **extra: Any) -> None:
        line = json.dumps(
            {"time": _now(), "event": event, "id": run_id, "pid": os.getpid(), **extra}
        )
        path = self.root / "events.jsonl"
        if path.exists() and not path.is_file():  # a FIFO or device: opening it could block
            raise StoreError(f"store {str(self.root)!r}: {str(path)!r} is not a regular file")
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")  # one write of one short line: O_APPEND keeps lines whole

    def prepare(self, point: Point) -> int:
        """Make the point's directory ready to run it: remove what an unfinished earlier attempt
        left (its files, temporary files of a killed writer), write config.json. Returns the
        attempt number (1 for the first). Refuses to touch a finished run whose result validates;
        one whose result does not has its files moved aside into ``damaged-<n>/`` first. A
        directory that cannot be written raises a :class:`StoreError`."""
        d = self.run_dir(point.id)
        try:
            d.mkdir(parents=True, exist_ok=True)
            if not d.is_dir():
                raise FileExistsError
            old = _read_json(d / "status.json")
            if isinstance(old, dict) and old.get("status") in FINISHED:
                if self.read(point).finished:
                    raise RuntimeError(f"run {point.id} is finished; it is never rewritten")
                self._set_aside(d)
            attempt = (old.get("attempt", 0) if isinstance(old, dict) else 0)
            attempt = (
                attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0
            ) + 1
            for p in d.iterdir():
                if p.name.endswith(".tmp") or p.name in RUN_FILES[1:]:
                    p.unlink(missing_ok=True)
            _write(d / "config.json", point.config.to_dict())
            self._log("start", point.id, attempt=attempt)
        except FileExistsError:
            raise StoreError(
                f"run {point.id}: {str(d)!r} is not a folder (a file is in its place); "
                f"move it away to run this point"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"run {point.id}: cannot write {str(d)!r}: {exc.strerror or exc}"
            ) from None
        return attempt

    def _set_aside(self, d: Path) -> Path:
        """Move a damaged finished run's files into a new ``damaged-<n>/`` folder beside them."""
        n = 1
        while (d / f"damaged-{n}").exists():
            n += 1
        aside = d / f"damaged-{n}"
        aside.mkdir()
        for name in RUN_FILES:
            if (d / name).exists():
                os.replace(d / name, aside / name)
        self._log("damaged", d.name, kept=str(aside))
        return aside

    def write(self, point: Point, payload: dict[str, Any], attempt: int = 1) -> RunRecord:
        """Store a task's outcome (see ``task.run_point``): metrics and result first, then the
        status, all atomically. Returns the record; a :class:`StoreError` when the run's
        directory cannot be written (nothing half-written stays: status.json comes last)."""
        try:
            return self._write_outcome(point, payload, attempt)
        except OSError as exc:
            raise StoreError(f"run {point.id}: cannot write its outcome to "
                             f"{str(self.run_dir(point.id))!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"run {point.id}: cannot write its outcome: {exc}") from None

    def _write_outcome(self, point: Point, payload: dict[str, Any], attempt: int) -> RunRecord:
        d = self.run_dir(point.id)
        status = payload["status"]
        if status not in (DONE, DIVERGED, FAILED):
            raise ValueError(f"unknown run status {status!r}")
        result = None
        if status in FINISHED:
            result = dict(payload["result"])
            metrics = {"history": result.pop("history"), "evals": result.pop("evals")}
            result.pop("config", None)  # config.json holds it
            first = metrics["history"][0].get("nll") if metrics["history"] else None
            result["loss_at_init"] = first  # the first step's training NLL: the loss at init
            _write(d / "metrics.json", metrics, indent=None)  # the bulk: JSON's C encoder
            _write(d / "result.json", result)
        meta = {k: payload.get(k)
                for k in ("status", "reason", "traceback", "wall_s", "cpu_s", "host", "pid")}
        meta.update(attempt=attempt, finished_at=_now(), normlab=_version())
        with _signals_held():  # a kill lands before the status or after its journal line
            _write(
                d / "status.json", {k: v for k, v in meta.items() if v is not None or k == "reason"}
            )
            self._log(status, point.id, attempt=attempt, wall_s=payload.get("wall_s"))
        return RunRecord(point.id, point.config.to_dict(), status, payload.get("reason"), result,
                         payload.get("wall_s"), d, reused=False, varied=dict(point.varied),
                         cpu_s=payload.get("cpu_s"))


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT and SIGTERM back until the block ends, then deliver them to the handlers that
    were in place (main thread only, where Python runs signal handlers; elsewhere a no-op).
    Python-level, since the kernel may hand a process-directed signal to any thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {sig: signal.signal(sig, lambda sig, _frame: held.append(sig)) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for num in dict.fromkeys(held):
            signal.raise_signal(num)


def _write(path: Path, payload: Any, indent: int | None = 1) -> None:
    write_json(path, payload, what=f"store file {path.name}", indent=indent)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _version() -> str:
    from ... import __version__

    return __version__


__all__ = [
    "DIVERGED",
    "DONE",
    "FAILED",
    "FINISHED",
    "PENDING",
    "RunRecord",
    "RunStore",
    "StoreError",
    "check_metrics",
    "check_result",
]
