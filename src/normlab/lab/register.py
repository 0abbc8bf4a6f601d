"""The claim register: every row an experiment can produce, declared before it is measured, and
every later change to a row as an amendment with the result before it.

An experiment module declares ``REGISTER`` (a tuple of :class:`~normlab.lab.contract.Record`:
the row's id, kind, the source's sentence and where it stands, the rule's form, the margin and
its source, the grid and the seed count, the premises it needs) and ``AMENDMENTS`` (a tuple of
:class:`~normlab.lab.contract.Amendment`). Its ``judge`` builds each :class:`Check` with the id
of its record, and the framework holds the two together (:func:`check_rows`, before a
``Result`` exists): a row with no record, a retired record, two rows of one record, a row whose
kind, form, margin or side is not its record's, and two counted rows that read the same interval
(one effect counted twice) are refused, naming the experiment and the row.

The register is data: ``normlab.lab.running.register_json`` writes it, with each record's grid
and seed count read from the experiment's configuration at the quick and the full size, into
``docs/results/register.json`` (``normlab report --write-register FILE``, run by ``make
tables``), and :func:`check_register_file` refuses a register that drops an id a committed
register holds without an amendment that retires it. The results carry each row's id and the
experiment's amendments with their results before, from which :func:`first_registered` rebuilds
each experiment's rows as first registered: the tallies are given both ways
(``normlab.lab.results``).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any

from .contract import (
    CLAIM,
    DERIVATION,
    IDENTITY,
    INCONCLUSIVE,
    NOT_TESTED,
    PREMISE,
    SHOWN,
    Amendment,
    Check,
    Record,
    verdict_of,
)

SCHEMA = 1  # register.json's layout


class RegisterError(ValueError):
    """A register, or a row against it, that breaks the rules of the module docstring."""


def records(module: ModuleType) -> tuple[Record, ...]:
    """The experiment's ``REGISTER`` (empty for a module that declares none)."""
    return tuple(getattr(module, "REGISTER", ()))


def amendments(module: ModuleType) -> tuple[Amendment, ...]:
    """The experiment's ``AMENDMENTS``, oldest first."""
    return tuple(sorted(getattr(module, "AMENDMENTS", ()), key=lambda a: a.date))


def retired(module: ModuleType) -> set[str]:
    """The ids of the records an amendment retires."""
    return {a.id for a in amendments(module) if a.retires}


def _name(module: ModuleType) -> str:
    card = getattr(module, "CARD", None)
    return card.name if card is not None else module.__name__


def validate(module: ModuleType) -> None:
    """The register itself: records of distinct ids, every premise a record of kind premise,
    every claim and premise with the source's sentence and where it stands, every decided rule
    with the source of its margin, every amendment about a record of the register."""
    name, recs = _name(module), records(module)
    ids = [r.id for r in recs]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise RegisterError(f"{name}: the register declares {twice} more than once")
    kinds = {r.id: r.kind for r in recs}
    for r in recs:
        bad = [p for p in r.premise if kinds.get(p) != PREMISE]
        if bad:
            raise RegisterError(f"{name}: record {r.id} needs premises {bad}, which are not "
                                f"premises of the register")
        if r.kind in (CLAIM, PREMISE) and not (r.source.strip() and r.where.strip()):
            raise RegisterError(f"{name}: record {r.id} is a {r.kind}: it needs the source's "
                                f"sentence (source) and where it stands (where)")
        if r.kind in (CLAIM, PREMISE) and r.form and not r.margin_source.strip():
            raise RegisterError(f"{name}: record {r.id} is decided by a {r.form} rule: it "
                                f"needs margin_source")
    for a in amendments(module):
        if a.id not in kinds:
            raise RegisterError(f"{name}: an amendment of {a.id!r}, which the register does "
                                f"not declare (a retired record stays declared)")


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return [float(x) for x in a] == [float(x) for x in b]


def check_rows(module: ModuleType, checks: Iterable[Check], size: str = "") -> None:
    """Refuse rows that do not keep to the experiment's register (the module docstring), and a
    row of a record the lab does not test at ``size`` (``Record.untested``); a module with no
    ``REGISTER`` is not checked."""
    recs = {r.id: r for r in records(module)}
    if not recs:
        return
    name, gone, seen = _name(module), retired(module), set()
    counted: dict[tuple[float, float], str] = {}
    for c in checks:
        rec = recs.get(c.id)
        where = f"{name}: row {c.id or repr(c.claim)}"
        if rec is None:
            raise RegisterError(f"{where}: no record of the register has this id")
        if c.id in gone:
            raise RegisterError(f"{where}: its record is retired by an amendment")
        if c.id in seen:
            raise RegisterError(f"{where}: produced twice (one record is one row)")
        if size and not rec.tested_at(size):
            raise RegisterError(f"{where}: its record is not tested at the {size} size "
                                f"({rec.untested})")
        seen.add(c.id)
        if c.kind != rec.kind:
            raise RegisterError(f"{where}: kind {c.kind!r}, its record's is {rec.kind!r} (a "
                                f"change is an amendment)")
        if c.interval is not None and c.threshold is not None and rec.form:
            if c.form != rec.form or c.side != rec.side or (
                    rec.margin and not _same(c.threshold, rec.margin)):
                raise RegisterError(
                    f"{where}: rule {c.form or '-'} {c.threshold} {c.side or ''}, its record's "
                    f"is {rec.form} {list(rec.margin)} {rec.side} (a change is an amendment)")
        if c.counted and c.interval is not None:
            key = (float(c.interval[0]), float(c.interval[1]))
            if key in counted:
                raise RegisterError(f"{where}: reads the same interval as row {counted[key]} "
                                    f"(one effect is one counted row)")
            counted[key] = c.id


# ---- the register as data ------------------------------------------------------------------
def check_register_file(committed: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse a new register that drops a record the committed one declares, unless an
    amendment retires it (a retired record stays declared); names the experiment and id."""
    mine = {e["name"]: e for e in new.get("experiments", [])}
    for e in committed.get("experiments", []):
        now = mine.get(e["name"])
        ids = {r["id"] for r in (now or {}).get("records", [])}
        for r in e.get("records", []):
            if r["id"] not in ids:
                raise RegisterError(f"{e['name']}: record {r['id']} is gone from the register "
                                    f"without an amendment that retires it")


# ---- the rows as first registered ----------------------------------------------------------
def first_registered(row: dict[str, Any], size: str) -> list[dict[str, Any]]:
    """An experiment's summary row's checks as first registered: each amended row as the
    earliest result before of its amendments at ``size`` says it was (its kind and status: the
    first committed result at that size, which for a size first measured after an early
    amendment is the one under the registration then; with none at that size, today's row under
    the first amendment's ``before`` kind), each retired row put back, and a row the first
    registration did not have left out (its first amendment's ``before`` has
    ``{"kind": None}``)."""
    first: dict[str, dict[str, Any]] = {}
    ordered = sorted(row.get("amendments", []), key=lambda a: a["date"])
    for a in ordered:
        first.setdefault(a["id"], a)
    for a in reversed(ordered):  # the earliest with a result at this size wins
        if size in a.get("results_before", {}) and first[a["id"]]["before"].get(
                "kind", "") is not None:
            first[a["id"]] = {**a, "before": {**a["before"], **first[a["id"]]["before"]}}
    out, seen = [], set()
    for c in row.get("checks", []):
        a = first.get(c.get("id", ""))
        seen.add(c.get("id", ""))
        if a is None:
            out.append(c)
            continue
        before = a.get("results_before", {}).get(size)
        kind = (before or {}).get("kind", a["before"].get("kind", c.get("kind")))
        if kind is None:
            continue  # registered after the first results
        if before is not None:
            out.append({**c, "kind": kind, "status": _status(kind, before["status"]),
                        "interval": before.get("interval"),
                        "identity": kind in (IDENTITY, DERIVATION),
                        "counted": _counted(kind, {"status": _status(kind, before["status"])})})
        else:  # no result under the first registration: today's row under its kind then
            row = {**c, "kind": kind, "status": _status(kind, c.get("status", "shown")),
                   "identity": kind in (IDENTITY, DERIVATION)}
            out.append({**row, "counted": _counted(kind, row)})
    for i, a in first.items():
        before = a.get("results_before", {}).get(size)
        if i not in seen and before is not None:
            kind = before.get("kind", a["before"].get("kind", CLAIM))
            status = _status(kind, before["status"])
            out.append({"id": i, "claim": before.get("claim", i), "kind": kind,
                        "status": status, "interval": before.get("interval"),
                        "counted": _counted(kind, {"status": status}),
                        "identity": kind in (IDENTITY, DERIVATION)})
    return out


def _status(kind: str, status: str) -> str:
    """A row's status under ``kind``: an identity's 'holds' is a claim's 'pass' and back; a
    shown row decides nothing."""
    if kind in (IDENTITY, DERIVATION):
        return {"pass": "holds"}.get(status, status)
    if kind == SHOWN:
        return "shown"
    return {"holds": "pass"}.get(status, status)


def _counted(kind: str, row: dict[str, Any]) -> bool:
    return kind == CLAIM and row.get("status") in ("pass", "FAIL", INCONCLUSIVE)


def verdict_of_rows(rows: list[dict[str, Any]]) -> str:
    """``contract.verdict_of`` on summary rows (dicts with kind and status)."""
    checks = []
    for c in rows:
        status = c["status"]
        passed = {"pass": True, "holds": True, "FAIL": False}.get(status)
        kind = c.get("kind") or CLAIM
        if kind == SHOWN or (kind in (CLAIM, PREMISE) and status == "shown"):
            passed, kind = None, (SHOWN if kind != PREMISE else PREMISE)
        checks.append(Check(claim=c.get("claim", ""), published="", measured="", rule="",
                            passed=passed, inconclusive=status == INCONCLUSIVE, kind=kind))
    try:
        return verdict_of(checks)
    except ValueError:
        return NOT_TESTED




# ---- the register on the lab page ----------------------------------------------------------
REGISTER_BEGIN = ("<!-- claim register: generated by `make tables` from "
                  "docs/results/register.json -->")
REGISTER_END = "<!-- end of claim register -->"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rule(r: dict[str, Any]) -> str:
    if not r.get("form"):
        return "-"
    margin = ", ".join(f"{m:g}" for m in r.get("margin", [])) or "per grid point"
    side = f" ({r['side']} passes)" if r.get("side") else ""
    return f"{r['form']}: {margin}{side}"


def _sizes(r: dict[str, Any]) -> str:
    parts = []
    for size in ("quick", "full"):
        s = r.get("sizes", {}).get(size, {})
        grid = "; ".join(f"{k} {v}" for k, v in s.get("grid", {}).items())
        seeds = f"n = {s['seeds']}" if s.get("seeds") is not None else ""
        text = ", ".join(p for p in (grid, seeds) if p)
        if text:
            parts.append(f"{size}: {text}")
    return "; ".join(parts) or "-"


def register_markdown(register: dict[str, Any]) -> str:
    """The lab page's block: per experiment, one row per record (its id, kind, what it says,
    where the source states it, the rule and its margin's source, the grid and seed count at
    each size), amended records marked, and each amendment with the result before it."""
    lines = ["Every row an experiment can produce, declared before it is measured "
             "(`docs/results/register.json`; a record's change after a result is an amendment, "
             "listed under its experiment with the result before it; ✎ marks an amended record, "
             "✗ a retired one; a claim of the source the lab does not test at a size says why)."]
    for e in register.get("experiments", []):
        amended = {a["id"] for a in e.get("amendments", [])}
        lines += ["", f"#### `{e['name']}`", "",
                  "| id | kind | what the row says | where the source states it | rule | "
                  "margin from | grid and seeds |", "|---|---|---|---|---|---|---|"]
        for r in e.get("records", []):
            mark = " ✗" if r.get("retired") else (" ✎" if r["id"] in amended else "")
            if r.get("untested"):
                at = ", ".join(r.get("untested_at") or ["any size"])
                mark += f" (not tested at {at}: {r['untested']})"
            lines.append(f"| `{r['id']}`{mark} | {r['kind']} | {_cell(r['claim'])} | "
                         f"{_cell(r.get('where') or '-')} | {_cell(_rule(r))} | "
                         f"{_cell(r.get('margin_source') or '-')} | {_cell(_sizes(r))} |")
        for a in e.get("amendments", []):
            before = "; ".join(f"{size}: {row['status']}"
                               + (f" {row['measured']}" if row.get("measured") else "")
                               for size, row in a.get("results_before", {}).items())
            lines.append("")
            lines.append(f"- ✎ `{a['id']}` ({a['date']}{', retired' if a.get('retires') else ''}"
                         f"): {_cell(a['changed'])}. Why: {_cell(a['why'])}."
                         + (f" Before: {_cell(before)}." if before else ""))
    return "\n".join(lines)


# ---- the committed files against the register ----------------------------------------------
_RULE_FIELDS = ("kind", "form", "side")


def _matches(c: dict[str, Any], r: dict[str, Any]) -> bool:
    """A committed row keeps to a record (or to a record's fields as an amendment says they
    were): the same kind, and for a decided row the same form, side and margin."""
    if c.get("kind", CLAIM) != r.get("kind"):
        return False
    if c.get("interval") is None or c.get("threshold") is None or not r.get("form"):
        return True
    return (c.get("form") == r.get("form") and (c.get("side") or "") == (r.get("side") or "")
            and (not r.get("margin") or _same(c["threshold"], r["margin"])))


def audit(register: dict[str, Any], summaries: Iterable[dict[str, Any]],
          committed: dict[str, Any] | None = None) -> list[str]:
    """Every way the committed files break the register's rules, one line each (none: ``[]``):
    a counted record that does not say where the source states it; a result row with no
    record, or whose rule is neither its record's nor, under an amendment, the record's as it
    was; two counted rows of one experiment that read the same interval; and, against the
    ``committed`` register, a record gone without an amendment that retires it."""
    problems = []
    recs = {(e["name"], r["id"]): r for e in register.get("experiments", [])
            for r in e.get("records", [])}
    amends: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in register.get("experiments", []):
        for a in e.get("amendments", []):
            amends.setdefault((e["name"], a["id"]), []).append(a)
    for (name, i), r in recs.items():
        if r["kind"] == CLAIM and not str(r.get("where", "")).strip():
            problems.append(f"{name}: counted record {i} does not say where the source states it")
    for s in summaries:
        label = f"{s.get('size', '?')} seed {s.get('seed')}"
        for row in s.get("experiments", []):
            problems += _audit_rows(row, label, recs, amends)
    if committed is not None:
        try:
            check_register_file(committed, register)
        except RegisterError as exc:
            problems.append(str(exc))
    return problems


def _audit_rows(row: dict[str, Any], label: str, recs: dict, amends: dict) -> list[str]:
    out, name = [], row["name"]
    seen: dict[tuple[float, ...], str] = {}
    for c in row.get("checks", []):
        key = (name, c.get("id", ""))
        r = recs.get(key)
        if r is None:
            out.append(f"{label} {name}: row {c.get('id') or repr(c.get('claim'))} has no record")
            continue
        olds = [{**r, **a.get("before", {})} for a in amends.get(key, [])]
        if not any(_matches(c, x) for x in (r, *olds)):
            out.append(f"{label} {name}: row {c['id']}'s rule ({c.get('kind')}, {c.get('form')}, "
                       f"{c.get('threshold')}, {c.get('side')}) is not its record's, and no "
                       f"amendment says it was")
        if c.get("counted") and c.get("interval") is not None:
            iv = tuple(c["interval"])
            if iv in seen:
                out.append(f"{label} {name}: rows {seen[iv]} and {c['id']} read the same "
                           f"interval {list(iv)} (one effect is one counted row)")
            seen[iv] = c["id"]
    return out


__all__ = ["REGISTER_BEGIN", "REGISTER_END", "SCHEMA", "RegisterError", "amendments", "audit",
           "check_register_file", "check_rows", "first_registered", "records",
           "register_markdown", "retired", "validate", "verdict_of_rows"]
