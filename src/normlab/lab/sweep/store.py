"""The results store: one directory per run, written so that a sweep killed at any moment loses no
finished run and leaves nothing half-written.

Layout::

    OUT/runs/<id>/config.json     the run's TrainConfig.to_dict() (written when it is dispatched)
                  metrics.json    per-step records and evaluations (history, evals)
                  result.json     the final figures: final_val_loss, entropy_floor, loss_at_init, ...
                  status.json     done | diverged | failed, with the reason (and the traceback of a
                                  failure), wall and CPU time, attempt, host; written LAST
    OUT/events.jsonl              one line per dispatch and per outcome (an append-only journal)

Every file is written to a temporary file in the same directory, flushed to disk, and renamed
over its name (``os.replace``): a reader sees the old file or the new one, never part of one. A
run is finished when its ``status.json`` says ``done`` or ``diverged``; because that file is
written after the others, a finished run has all its files. A directory without a final status
(killed mid-run, or ``failed``) is run again on the next sweep: its leftovers and any temporary
file of a killed writer are removed first. Finished runs are never written again.

Two sweeps running on the same store at once do not corrupt it: each file is replaced whole, and
both write the same deterministic run, so the files of a run come from one writer or the other
(the wall times may differ). They may both run a point that neither had finished, wasting the
work; there is no lock, because sequential reruns (the case that matters) need none.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._files import atomic_write
from .spec import Point

DONE, DIVERGED, FAILED, PENDING = "done", "diverged", "failed", "pending"
FINISHED = (DONE, DIVERGED)  # results; a failed run is retried
RUN_FILES = ("config.json", "metrics.json", "result.json", "status.json")


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
    cpu_s: float | None = None  # CPU seconds of the run's worker (below wall_s: it waited for a core)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def value(self, name: str) -> Any:
        """A config value by flat name: ``"lr"``, ``"model.placement"``."""
        if name.startswith("model."):
            return self.config["model"][name[len("model."):]]
        return self.config[name]

    def metrics(self) -> dict[str, Any]:
        """``{"history": [...], "evals": [...]}`` from metrics.json (read on demand)."""
        if self.path is None or not self.finished:
            raise ValueError(f"run {self.id} has no metrics (status {self.status})")
        return json.loads((self.path / "metrics.json").read_text())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class RunStore:
    """The directory ``root`` holding a sweep's runs (see the module's docstring)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"store {str(self.root)!r} exists and is not a directory")

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    # ---- reading -----------------------------------------------------------------------------
    def read(self, point: Point) -> RunRecord:
        """The point's record: finished or failed as its status says, pending otherwise."""
        d = self.run_dir(point.id)
        status = _read_json(d / "status.json")
        rec = RunRecord(point.id, point.config.to_dict(), PENDING, path=d, reused=True,
                        varied=dict(point.varied))
        if not isinstance(status, dict) or status.get("status") not in (DONE, DIVERGED, FAILED):
            return rec
        rec.status, rec.reason = status["status"], status.get("reason")
        rec.wall_s, rec.cpu_s = status.get("wall_s"), status.get("cpu_s")
        if rec.finished:
            rec.result = _read_json(d / "result.json")
            if rec.result is None:  # cannot happen with status written last; be safe
                rec.status = PENDING
        return rec

    def events(self) -> list[dict[str, Any]]:
        """The journal's lines (dispatches and outcomes), oldest first."""
        path = self.root / "events.jsonl"
        if not path.is_file():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a kill mid-append
                continue
        return out

    # ---- writing -----------------------------------------------------------------------------
    def _log(self, event: str, run_id: str, **extra: Any) -> None:
        line = json.dumps({"time": _now(), "event": event, "id": run_id, "pid": os.getpid(), **extra})
        with open(self.root / "events.jsonl", "a", encoding="utf-8") as f:
            f.write(line + "\n")  # one write of one short line: O_APPEND keeps lines whole

    def prepare(self, point: Point) -> int:
        """Make the point's directory ready to run it: remove what an unfinished earlier attempt
        left (its files, temporary files of a killed writer), write config.json. Returns the
        attempt number (1 for the first). Refuses to touch a finished run."""
        d = self.run_dir(point.id)
        d.mkdir(parents=True, exist_ok=True)
        old = _read_json(d / "status.json")
        if isinstance(old, dict) and old.get("status") in FINISHED:
            raise RuntimeError(f"run {point.id} is finished; it is never rewritten")
        attempt = (old.get("attempt", 0) if isinstance(old, dict) else 0) + 1
        for p in d.iterdir():
            if p.name.endswith(".tmp") or p.name in RUN_FILES[1:]:
                p.unlink(missing_ok=True)
        _write(d / "config.json", point.config.to_dict())
        self._log("start", point.id, attempt=attempt)
        return attempt

    def write(self, point: Point, payload: dict[str, Any], attempt: int = 1) -> RunRecord:
        """Store a task's outcome (see ``task.run_point``): metrics and result first, then the
        status, all atomically. Returns the record."""
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
            _write(d / "metrics.json", metrics)
            _write(d / "result.json", result)
        meta = {k: payload.get(k)
                for k in ("status", "reason", "traceback", "wall_s", "cpu_s", "host", "pid")}
        meta.update(attempt=attempt, finished_at=_now(), normlab=_version())
        _write(d / "status.json", {k: v for k, v in meta.items() if v is not None or k == "reason"})
        self._log(status, point.id, attempt=attempt, wall_s=payload.get("wall_s"))
        return RunRecord(point.id, point.config.to_dict(), status, payload.get("reason"), result,
                         payload.get("wall_s"), d, reused=False, varied=dict(point.varied),
                         cpu_s=payload.get("cpu_s"))


def _write(path: Path, payload: Any) -> None:
    text = json.dumps(payload, indent=1, allow_nan=False)
    atomic_write(path, text, what="sweep store file")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _version() -> str:
    from ... import __version__

    return __version__


__all__ = ["DIVERGED", "DONE", "FAILED", "FINISHED", "PENDING", "RunRecord", "RunStore"]
