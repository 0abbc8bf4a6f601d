"""Progress bars for the lab's commands: rich when it is installed, plain lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class _Plain:
    """Prints one line per experiment (no rich, or output redirected to a file)."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream

    def start(self, name: str) -> Callable[..., None]:
        print(f"running {name} ...", file=self.stream, flush=True)
        return lambda done, total, note="": None

    def finish(self, name: str, text: str) -> None:
        print(f"  {name}: {text}", file=self.stream, flush=True)


class _Rich:
    def __init__(self, progress: Any, overall: int) -> None:
        self.progress = progress  # a rich.progress.Progress (rich is imported only when present)
        self.overall = overall
        self.task: Any = None

    def start(self, name: str) -> Callable[..., None]:
        if self.task is not None:
            self.progress.remove_task(self.task)
        task = self.task = self.progress.add_task(name, total=1.0)

        def update(done: float, total: float, note: str = "") -> None:
            self.progress.update(task, completed=done, total=max(total, 1e-12),
                                 description=f"{name}  {note}".rstrip())

        return update

    def finish(self, name: str, text: str) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None
        self.progress.advance(self.overall)
        self.progress.console.print(f"  {name}: {text}")


@contextmanager
def reporter(total: int, title: str = "experiments") -> Iterator:
    """``with reporter(n) as r: cb = r.start(name); ...; r.finish(name, text)``."""
    try:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:  # pragma: no cover - rich is part of normlab[lab]
        yield _Plain()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, transient=False) as progress:
        overall = progress.add_task(title, total=total)
        yield _Rich(progress, overall)
