"""Every experiment, split into measure and judge, reproduces the tiny-size result it gave before
the split (``fixtures/tiny_before.json``, written by ``fixtures/make_tiny_before.py`` from the
lab as it was): the same headline numbers, the same check rows, the same verdict, at seed 0."""

import json
from pathlib import Path

import pytest

from normlab.lab import framework as F

BEFORE = json.loads((Path(__file__).parent / "fixtures" / "tiny_before.json").read_text())


TIMED = "faster"  # rows whose numbers are wall times (invariances-and-cost): never equal twice


def snapshot(result) -> dict:
    return {"measured": result.measured, "verdict": result.verdict,
            "checks": [{"claim": c.claim, "measured": c.measured, "status": c.status}
                       for c in result.checks]}


def without_timings(snap: dict) -> dict:
    """The snapshot less what a wall time decides: the timed rows, the headline's time saving
    and (through the timed rows) the verdict."""
    checks = [c for c in snap["checks"] if TIMED not in c["claim"]]
    if len(checks) == len(snap["checks"]):
        return snap
    return {"measured": snap["measured"].split("; RMSNorm saves")[0], "checks": checks}


@pytest.mark.parametrize("name", list(F.registry()))
def test_numbers_did_not_move(name):
    result = F.run_experiment(name, size="tiny", seed=0, executor="serial").result
    assert without_timings(snapshot(result)) == without_timings(BEFORE[name])


def test_the_fixture_covers_every_experiment():
    assert set(BEFORE) == set(F.registry())
