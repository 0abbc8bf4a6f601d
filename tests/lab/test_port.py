"""Every experiment, split into measure and judge, reproduces the tiny-size result it gave before
the split (``fixtures/tiny_before.json``, written by ``fixtures/make_tiny_before.py`` from the
lab as it was): the same headline numbers, the same check rows, the same verdict, at seed 0."""

import json
from pathlib import Path

import pytest

from normlab.lab import framework as F

BEFORE = json.loads((Path(__file__).parent / "fixtures" / "tiny_before.json").read_text())


def snapshot(result) -> dict:
    return {"measured": result.measured, "verdict": result.verdict,
            "checks": [{"claim": c.claim, "measured": c.measured, "status": c.status}
                       for c in result.checks]}


@pytest.mark.parametrize("name", list(F.registry()))
def test_numbers_did_not_move(name):
    result = F.run_experiment(name, size="tiny", seed=0, executor="serial").result
    assert snapshot(result) == BEFORE[name]


def test_the_fixture_covers_every_experiment():
    assert set(BEFORE) == set(F.registry())
