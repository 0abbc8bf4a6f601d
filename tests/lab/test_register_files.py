"""The committed claim register and results keep the register's rules (normlab.lab.register):
every experiment registers its rows, docs/results/register.json is the modules' register, every
committed row keeps to its record (or to the record as an amendment says it was), no two counted
rows of an experiment read one interval, every counted record says where the source states it,
no record disappears without an amendment that retires it, and the lab page shows the register.
Each rule is also shown to catch a deliberately broken copy of the committed files."""

import copy
import json
from pathlib import Path

import pytest

from normlab.lab import register as R
from normlab.lab.running import load, register_json, registry

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
FILES = ("quick.json", "quick-seed10000.json", "full.json", "full-seed10000.json")


def _read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def committed() -> dict:
    return _read("register.json")


@pytest.fixture(scope="module")
def summaries() -> list[dict]:
    return [_read(f) for f in FILES]


def test_every_experiment_registers_its_rows():
    for name in registry():
        module = load(name)
        assert R.records(module), f"{name} declares no REGISTER"
        R.validate(module)


def test_the_committed_register_is_the_modules(committed):
    assert committed == json.loads(json.dumps(register_json(registry()))), (
        "docs/results/register.json is stale: make tables")


def test_the_committed_files_keep_the_registers_rules(committed, summaries):
    assert R.audit(committed, summaries, committed) == []


def test_every_committed_row_carries_its_id(summaries):
    for s in summaries:
        for row in s["experiments"]:
            assert all(c.get("id") for c in row["checks"]), (s["size"], row["name"])


def test_the_lab_page_shows_the_register(committed):
    text = (ROOT / "docs" / "lab.md").read_text(encoding="utf-8")
    a = text.index(R.REGISTER_BEGIN) + len(R.REGISTER_BEGIN)
    b = text.index(R.REGISTER_END)
    assert text[a:b].strip() == R.register_markdown(committed).strip()


def _first(summaries: list[dict], pick) -> tuple[int, str, int]:
    """(file index, experiment name, row index) of the first row ``pick`` accepts."""
    for i, s in enumerate(summaries):
        for row in s["experiments"]:
            for j, c in enumerate(row["checks"]):
                if pick(c):
                    return i, row["name"], j
    raise AssertionError("no such row")


def _row(summaries: list[dict], i: int, name: str) -> dict:
    return next(r for r in summaries[i]["experiments"] if r["name"] == name)


def test_each_rule_catches_a_broken_copy(committed, summaries):
    """A counted record without where it stands; a committed row whose margin is not its
    record's and no amendment says it was; two counted rows reading one interval; a record gone
    without an amendment that retires it: each is found in a copy of the committed files."""
    reg = copy.deepcopy(committed)
    rec = next(r for e in reg["experiments"] for r in e["records"] if r["kind"] == "claim")
    rec["where"] = ""
    assert any("does not say where" in p for p in R.audit(reg, []))

    broken = copy.deepcopy(summaries)
    i, name, j = _first(broken, lambda c: c.get("counted") and c.get("threshold"))
    _row(broken, i, name)["checks"][j]["threshold"] = [123.0]
    assert any("is not its record's" in p for p in R.audit(committed, broken))

    broken = copy.deepcopy(summaries)
    for s in broken:
        for row in s["experiments"]:
            counted = [c for c in row["checks"] if c.get("counted") and c.get("interval")]
            if len(counted) >= 2:
                counted[1]["interval"] = list(counted[0]["interval"])
                break
        else:
            continue
        break
    assert any("read the same interval" in p for p in R.audit(committed, broken))

    dropped = copy.deepcopy(committed)
    e = next(e for e in dropped["experiments"] if not any(
        a["retires"] for a in e["amendments"]))
    gone = e["records"].pop(0)
    problems = R.audit(dropped, [], committed)
    assert any(f"record {gone['id']} is gone" in p for p in problems)
