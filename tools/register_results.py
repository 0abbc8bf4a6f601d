"""Bring a committed results file measured before the claim register under it, without measuring.

    python tools/register_results.py docs/results/full.json [--write]

Each row of the file gets the id of its record in its experiment's register (the row's claim
text equal to the record's, or the row equal to a result before that an amendment of the record
keeps, or the nearest claim text of the same kind among the records not yet taken), and is then
judged again from its stored interval under its record as it is now: its kind, form, margin and
side (``stats.decide`` / ``stats.within``, the rule every experiment uses). A row of a retired
record, or of a claim the lab does not test at the file's size, leaves the rows (its amendment
keeps it); a row whose record was amended to measure something else since (``remeasure``) is
kept with its old status, marked ``"measured": "... [measured before the amendment of DATE]"``
and not counted; a record with no row in the file is named. Each experiment row gets its
register's amendments and ``"rejudged"`` (the register's date of this judgement), and the file
its tally as amended and as first registered. Without ``--write`` it prints what it would do.

Rows that cannot be matched are refused, naming them: nothing is written then.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any

from normlab._files import read_json, write_json
from normlab.lab import register as R
from normlab.lab import stats
from normlab.lab.contract import CLAIM, DERIVATION, IDENTITY, PREMISE, SHOWN, Record
from normlab.lab.results import first_rows, tally
from normlab.lab.running import load

MEASURED_AT = "8ed4d62 or earlier"  # the code of every file measured before the register
FAMILY = {CLAIM: CLAIM, PREMISE: PREMISE, IDENTITY: IDENTITY, DERIVATION: IDENTITY,
          SHOWN: SHOWN}


def _same_row(c: dict[str, Any], before: dict[str, Any]) -> bool:
    if before.get("interval") is not None and c.get("interval") is not None:
        return [float(x) for x in before["interval"]] == [float(x) for x in c["interval"]]
    return bool(before.get("measured")) and before.get("measured") == c.get("measured")


def match(row: dict[str, Any], size: str) -> dict[int, str]:
    """Row index -> record id, for every row of an experiment's summary row."""
    module = load(row["name"])
    recs = R.records(module)
    amends = R.amendments(module)
    taken: dict[int, str] = {}
    used: set[str] = set()
    checks = row["checks"]
    for i, c in enumerate(checks):  # 1. the same claim text
        hit = [r.id for r in recs if r.claim == c["claim"] and r.id not in used]
        if len(hit) == 1:
            taken[i] = hit[0]
            used.add(hit[0])
    for i, c in enumerate(checks):  # 2. a result before an amendment keeps
        if i in taken:
            continue
        hit = sorted({a.id for a in amends if a.id not in used
                      and _same_row(c, a.results_before.get(size, {}))})
        if len(hit) == 1:
            taken[i] = hit[0]
            used.add(hit[0])
    kinds = {r.id: {FAMILY[r.kind]} | {FAMILY.get(a.before.get("kind") or "", "")
                                         for a in amends if a.id == r.id} for r in recs}
    for cutoff in (0.5, 0.3):  # 3. the nearest claim text among the records left, same kind
        for i, c in enumerate(checks):
            if i in taken:
                continue
            pool = {r.claim: r.id for r in recs if r.id not in used
                    and FAMILY[c.get("kind") or CLAIM] in kinds[r.id]}
            near = difflib.get_close_matches(c["claim"], list(pool), n=1, cutoff=cutoff)
            if near:
                taken[i] = pool[near[0]]
                used.add(pool[near[0]])
    return taken


def rejudge(c: dict[str, Any], rec: Record) -> dict[str, Any]:
    """The row judged again under its record now, from its stored interval."""
    out = {"id": rec.id, **c, "kind": rec.kind}
    status = c["status"]
    iv = c.get("interval")
    if rec.kind == SHOWN:
        status = "shown"
    elif rec.form and iv is not None and rec.margin and status != "shown":
        interval = stats.Interval((iv[0] + iv[1]) / 2, iv[0], iv[1], 2, "t")
        if len(rec.margin) == 2:
            decision = stats.within(interval, rec.margin[0], rec.margin[1])
        else:
            decision = stats.decide(interval, rec.margin[0], rec.side or "above")
        status = {True: "pass", False: "FAIL", None: "inconclusive"}[decision]
        out.update(form=rec.form, threshold=list(rec.margin), side=rec.side)
    if rec.kind in (IDENTITY, DERIVATION):
        status = {"pass": "holds"}.get(status, status)
    elif rec.kind != SHOWN:
        status = {"holds": "pass"}.get(status, status)
    out["status"] = status
    out["identity"] = rec.kind in (IDENTITY, DERIVATION)
    out["counted"] = rec.kind == CLAIM and status in ("pass", "FAIL", "inconclusive")
    return out


def _merge_shown(row: dict[str, Any], taken: dict[int, str],
                 recs: dict[str, Record]) -> dict[int, str]:
    """Shown rows with no record of their own that a shown record now gathers (one row for
    what were several, one per grid point): their measured texts appended to its row."""
    shown = {r.claim: r.id for r in recs.values() if r.kind == SHOWN}
    at = {rid: i for i, rid in taken.items()}
    merged = {}
    for i, c in enumerate(row["checks"]):
        if i in taken or c.get("kind") != SHOWN:
            continue
        near = difflib.get_close_matches(c["claim"], list(shown), n=1, cutoff=0.5)
        if near and shown[near[0]] in at:
            j = at[shown[near[0]]]
            first = row["checks"][j]
            first["measured"] = f"{first['measured']}; {c['claim']}: {c['measured']}"
            merged[i] = shown[near[0]]
    return merged


def experiment(row: dict[str, Any], size: str, today: str) -> tuple[dict[str, Any], list[str]]:
    """An experiment's summary row under its register now, and what was done, line by line."""
    module = load(row["name"])
    recs = {r.id: r for r in R.records(module)}
    gone = R.retired(module)
    remeasured = {a.id: a.date for a in R.amendments(module) if a.remeasure and a.date >= today}
    taken = match(row, size)
    notes, checks = [], []
    merged = _merge_shown(row, taken, recs)
    unmatched = [c["claim"] for i, c in enumerate(row["checks"]) if i not in taken
                 and i not in merged]
    if unmatched:
        raise ValueError(f"{row['name']}: rows with no record: {unmatched}")
    for i, c in enumerate(row["checks"]):
        if i in merged:
            notes.append(f"  {merged[i]}: shown rows merged into one ({c['claim']})")
            continue
        rec = recs[taken[i]]
        if rec.id in gone or not rec.tested_at(size):
            notes.append(f"  {rec.id}: left out ({'retired' if rec.id in gone else 'untested'})")
            continue
        new = rejudge(c, rec)
        if rec.id in remeasured:
            new.update(status=c["status"] if c["status"] != "holds" else "pass", counted=False,
                       measured=f"{c['measured']} [measured before the amendment of "
                                f"{remeasured[rec.id]}]")
            if rec.kind == CLAIM:
                new["status"] = "shown"
        if new["status"] != c["status"] or new["kind"] != c.get("kind"):
            notes.append(f"  {rec.id}: {c.get('kind')} {c['status']} -> {new['kind']} "
                         f"{new['status']}")
        checks.append(new)
    have = {c["id"] for c in checks}
    for rid, rec in recs.items():
        if rid not in have and rid not in gone and rec.tested_at(size):
            notes.append(f"  {rid}: no row in the file ({rec.kind})")
    out = {**row, "checks": checks, "verdict": R.verdict_of_rows(checks), "rejudged": today}
    out.setdefault("measured_at", MEASURED_AT)
    amends = [a.to_json() for a in R.amendments(module)]
    if amends:
        out["amendments"] = amends
    return out, notes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--write", action="store_true")
    p.add_argument("--date", default="2026-12-07", help="the date of this judgement")
    args = p.parse_args(argv)
    summary = read_json(args.file, what="results file")
    size = summary["size"]
    rows = []
    for row in summary["experiments"]:
        new, notes = experiment(row, size, args.date)
        if new["verdict"] != row["verdict"] or notes:
            print(f"{row['name']}: {row['verdict']} -> {new['verdict']}")
            print("\n".join(notes))
        rows.append(new)
    out = {**summary, "experiments": rows, "tally": tally(rows),
           "tally_first": tally(first_rows(rows, size))}
    print(json.dumps({"tally": out["tally"], "tally_first": out["tally_first"]}))
    if args.write:
        write_json(args.file, out, what="results file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
