"""A seed count from a pilot (issue 58, section 4): a counted row is judged at a size only where
that size's pilot, run at seeds no verdict run uses (>= 50000), says the size's seed count
resolves the row's margin; where the report's budget cannot pay for the seeds it would need, the
row is not judged at that size (and where the row is the experiment's one claim, the experiment
is "not tested at this size"), and the size with the seeds decides.

The rule: with the pilot's mean m and standard deviation sd over its seeds of the row's decided
quantity (a paired difference, a ratio's log, ...), the expected Student-t half-width at the
size's n seeds, t(n - 1) sd / sqrt(n), must be smaller than |m - margin|.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from .. import stats
from ..contract import PREMISE, Check
from ..formatting import fmt


class Pilot(NamedTuple):
    """One counted row's pilot at one size: its decided quantity over the pilot's seeds."""

    mean: float  # the mean over the pilot's seeds
    sd: float  # the sample standard deviation over them (ddof = 1)
    n: int  # how many seeds
    seeds: str  # which ("50000-50005"): no verdict run uses them


def half_width(pilot: Pilot, seeds: int) -> float:
    """The expected Student-t half-width of the row's interval at ``seeds`` seeds."""
    return stats.t_factor(seeds) * pilot.sd / math.sqrt(seeds)


def resolves(pilot: Pilot, seeds: int, margin: float) -> bool:
    """Whether ``seeds`` seeds are expected to put the interval wholly on one side of
    ``margin``."""
    return half_width(pilot, seeds) < abs(pilot.mean - margin)


def needed(pilot: Pilot, margin: float, most: int = 200) -> int | None:
    """The fewest seeds that resolve ``margin`` (None: more than ``most``)."""
    return next((n for n in range(2, most + 1) if resolves(pilot, n, margin)), None)


def describe(pilot: Pilot, seeds: int, margin: float, what: str) -> str:
    """The pilot's numbers and what they say about ``seeds`` seeds, in words."""
    n = needed(pilot, margin)
    return (f"pilot (seeds {pilot.seeds}, n = {pilot.n}): {what} = {fmt(pilot.mean)} (sd "
            f"{fmt(pilot.sd)}), {fmt(abs(pilot.mean - margin))} from the margin {margin:g}; "
            f"expected half-width at this size's {seeds} seeds {fmt(half_width(pilot, seeds))}; "
            f"seeds needed: {n if n else 'more than 200'}")


def premise(pilot: Pilot, seeds: int, margin: float, what: str, *, id: str,
            source: str) -> Check:
    """The premise row of an experiment whose one counted claim the pilot reads: where the
    size's seeds do not resolve it, the verdict is 'not tested at this size'."""
    return Check(
        claim="premise: this size resolves the counted row on the source's set-up (its pilot's "
              "expected interval clears the margin at the size's seed count)",
        published="the lab's rule: where a size cannot show the effect at the seeds it pays "
                  "for, it is not tested at that size (issue 58, sections 3 and 4)",
        measured=describe(pilot, seeds, margin, what),
        rule="holds when t(n - 1) sd / sqrt(n) < |pilot mean - margin| at the size's n seeds",
        passed=resolves(pilot, seeds, margin), kind=PREMISE, source=source, id=id)


def gate(row: Check, pilot: Pilot | None, seeds: int, margin: float, what: str) -> Check:
    """``row`` as judged, where the size has no pilot of it or its pilot says the seeds resolve
    it; else the row not judged at this size (a claim with no decision, not counted), its
    interval kept and the pilot's numbers in its note. Its kind stays its record's."""
    if pilot is None or resolves(pilot, seeds, margin):
        return row
    return dataclasses.replace(
        row, passed=None, inconclusive=False,
        rule=row.rule + "; not judged at this size: its pilot says the seeds it can pay for do "
                        "not resolve the margin (issue 58 section 4)",
        note=(row.note + "; " if row.note else "") + describe(pilot, seeds, margin, what))
