"""Two results compared, bit for bit: the proof that a refactor changed no science.

``compare(a, b)`` reads two report summaries (``summary.json``, ``docs/results/quick.json``) or
two report folders (``normlab report --out``: the summary and every ``<name>/result.json``, whose
``data`` is the measurement itself) and lists every difference in what was measured: numbers
(compared exactly: JSON keeps a float's every bit), intervals, verdicts, check rows, texts,
configurations, the measured data. It ignores only what a rerun of the same code changes:

* wall times (any key starting ``wall_s``), the timestamp (``generated``), which results a run
  reused from its cache (``reused``), which code measured it (``commit``, ``measured_at``) and
  when a committed file was judged again under the register (``rejudged``);
* source hashes (``cache_key``), and the figure file names (``figures``: drawn from the data).

Two experiments measure wall-clock time (:data:`TIMED`: what RMSNorm saves over LayerNorm,
per op and per training step), which differs between two runs of the same code. A difference in
those data, in the checks read from them, in the headline that quotes them and in the verdict
and tally that follow from them is listed apart as *timing* and does not count as a
difference; every other number of those experiments is compared exactly.

::

    python -m normlab.lab.compare docs/results/quick.json normlab-results/summary.json
    python -m normlab.lab.compare before-report/ after-report/

prints ``identical: ...`` and exits 0, or one line per difference (its JSON path, both values)
and exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .._files import PathLike, read_json

SUMMARY_FILE = "summary.json"
RESULT_FILE = "result.json"
IGNORED_KEYS = frozenset({"generated", "reused", "cache_key", "figures", "commit",
                          "measured_at", "rejudged"})
IGNORED_PREFIXES = ("wall_s",)


# experiment -> (data keys holding wall-clock times, claims of the checks read from them)
TIMED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "invariances-and-cost": (("speed", "step"), ("RMSNorm takes less time per training step",
                                                  "the norm op alone",
                                                  "pRMSNorm is not always faster than RMSNorm")),
    "rmsnorm-quality": (("step_s",), ("the time per training step",)),
}


def ignored(key: str) -> bool:
    """Whether a key holds something a rerun of the same code may change."""
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)


def differences(a: Any, b: Any, path: str = "$") -> list[str]:
    """Every difference between two JSON values, as ``'PATH: A != B'`` lines; ignored keys
    (:func:`ignored`) are skipped at every depth. Numbers are compared exactly, and an integer
    never equals a float (``1`` and ``1.0`` are different JSON)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in [*a, *(k for k in b if k not in a)]:
            if ignored(str(k)):
                continue
            if k not in a or k not in b:
                side = "first" if k not in a else "second"
                out.append(f"{path}.{k}: missing in the {side}")
            else:
                out.extend(differences(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if type(a) is not type(b) or a != b:
        return [f"{path}: {_short(a)} != {_short(b)}"]
    return []


def _short(v: Any, limit: int = 160) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _summary_of(path: Path) -> Path:
    return path / SUMMARY_FILE if path.is_dir() else path


class Comparison(list):
    """The differences (a list of lines), with ``timing``: the differences of wall-clock
    measurements (:data:`TIMED`), listed apart and not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.timing: list[str] = []
        self.missing: list[str] = []  # experiments a partial comparison could not compare


def experiment_differences(name: str, a: dict, b: dict, path: str) -> tuple[list, list]:
    """(differences, timing differences) between two results of experiment ``name`` (a
    ``result.json`` or a summary's row): a timed experiment's time data, timed checks (by
    claim), headline and verdict go to the second list."""
    keys, claims = TIMED.get(name, ((), ()))
    if not keys:
        return differences(_by_id(a), _by_id(b), path), []
    a, b = dict(a), dict(b)
    timed = []
    for k in ("measured", "verdict"):
        timed += differences(a.pop(k, None), b.pop(k, None), f"{path}.{k}")
    if isinstance(a.get("data"), dict) and isinstance(b.get("data"), dict):
        a["data"], b["data"] = dict(a["data"]), dict(b["data"])
        for k in keys:
            timed += differences(a["data"].pop(k, None), b["data"].pop(k, None),
                                 f"{path}.data.{k}")
    for side in (a, b):
        checks = side.get("checks")
        if isinstance(checks, list):
            side["checks"] = [c for c in checks if not str(c.get("claim", "")).startswith(claims)]
            side["timed_checks"] = [c for c in checks if str(c.get("claim", "")).startswith(claims)]
    timed += differences(a.pop("timed_checks", None), b.pop("timed_checks", None),
                         f"{path}.checks(timed)")
    return differences(_by_id(a), _by_id(b), path), timed


def _by_id(row: Any) -> Any:
    """A result's checks keyed by their register id where every check has one (so two results
    are compared row by row whatever their order), else as they are."""
    checks = row.get("checks") if isinstance(row, dict) else None
    if not (isinstance(checks, list) and checks
            and all(isinstance(c, dict) and c.get("id") for c in checks)):
        return row
    return {**row, "checks": {c["id"]: c for c in checks}}


def _summaries(a: dict, b: dict, out: Comparison) -> None:
    rest_a = {k: v for k, v in a.items() if k not in ("experiments", "tally")}
    rest_b = {k: v for k, v in b.items() if k not in ("experiments", "tally")}
    out.extend(differences(rest_a, rest_b, "summary"))
    rows_a = {r.get("name"): r for r in a.get("experiments", [])}
    rows_b = {r.get("name"): r for r in b.get("experiments", [])}
    if list(rows_a) != list(rows_b):
        out.append(f"summary.experiments: {list(rows_a)} != {list(rows_b)}")
    verdict_timed = False
    for name in (n for n in rows_a if n in rows_b):
        diffs, timed = experiment_differences(name, rows_a[name], rows_b[name],
                                              f"summary.{name}")
        out.extend(diffs)
        out.timing.extend(timed)
        verdict_timed |= any(t.startswith(f"summary.{name}.verdict") for t in timed)
    tally = differences(a.get("tally"), b.get("tally"), "summary.tally")
    (out.timing if verdict_timed else out).extend(tally)  # the tally follows the verdicts


def compare(a: PathLike, b: PathLike) -> Comparison:
    """The differences between two results (summary files, or report folders: then each
    experiment's ``result.json`` too, data included), check rows paired by their register id where
they have one; ``.timing`` holds the wall-clock ones.
    Raises ValueError naming a file that is missing or not JSON, or when one argument is a
    folder and the other a file."""
    pa, pb = Path(a), Path(b)
    if not pa.is_dir() and pb.is_dir() and not (pb / SUMMARY_FILE).is_file():
        return partial(pa, pb)
    if pa.is_dir() != pb.is_dir():
        raise ValueError(f"compare needs two summary files or two report folders; got {pa} "
                         f"and {pb}")
    out = Comparison()
    _summaries(read_json(_summary_of(pa), what="results file"),
               read_json(_summary_of(pb), what="results file"), out)
    if pa.is_dir():
        names = sorted({p.parent.name for p in pa.glob(f"*/{RESULT_FILE}")}
                       | {p.parent.name for p in pb.glob(f"*/{RESULT_FILE}")})
        for name in names:
            fa, fb = pa / name / RESULT_FILE, pb / name / RESULT_FILE
            if not (fa.is_file() and fb.is_file()):
                out.append(f"{name}: {RESULT_FILE} only in {pa if fa.is_file() else pb}")
                continue
            diffs, timed = experiment_differences(name, read_json(fa, what="result"),
                                                  read_json(fb, what="result"), name)
            out.extend(diffs)
            out.timing.extend(timed)
    return out


def partial(summary: Path, folder: Path) -> Comparison:
    """A summary file against a report folder that has no summary yet (a report still running,
    or interrupted): the summary's row of each experiment the folder has finished, made from its
    ``result.json`` as ``normlab report`` makes it, compared with the committed row; the
    experiments not finished yet are named in ``.missing``."""
    from .contract import Result
    from .results import experiment_row

    committed = read_json(summary, what="results file")
    out = Comparison()
    for row in committed.get("experiments", []):
        path = folder / row["name"] / RESULT_FILE
        if not path.is_file():
            out.missing.append(row["name"])
            continue
        mine = experiment_row(row["name"], Result.from_json(read_json(path, what="result")), "")
        diffs, timed = experiment_differences(row["name"], row, mine, f"summary.{row['name']}")
        out.extend(diffs)
        out.timing.extend(timed)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m normlab.lab.compare A B``: 0 when identical, 1 when not, 2 on bad input."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m normlab.lab.compare A B  (two summary.json files or two report "
              "folders)", file=sys.stderr)
        return 2
    try:
        diffs = compare(*args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if diffs.timing:
        print(f"{len(diffs.timing)} timing difference(s) (wall-clock measurements, which differ "
              f"between two runs of the same code; not counted):")
        print("\n".join(f"  {t}" for t in diffs.timing))
    missing = diffs.missing
    if missing:
        print(f"not finished in {args[1]} yet, not compared: {', '.join(missing)}")
    if diffs:
        print(f"{len(diffs)} difference(s) between {args[0]} and {args[1]}:")
        print("\n".join(diffs))
        return 1
    print(f"identical: {args[0]} and {args[1]} (every number, interval, verdict and text "
          f"compared{' of the finished experiments' if missing else ''}, but "
          f"the wall-clock timings above; ignored: wall times, timestamp, cache reuse, source "
          f"hashes, figure names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
