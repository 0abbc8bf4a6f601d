"""The claim register (normlab.lab.register): every row declared before it is measured, every
change after a result an amendment, each effect counted once, and the tallies as first
registered and as amended."""

import copy
import types

import pytest

from normlab.lab import register as R
from normlab.lab import stats
from normlab.lab.contract import PREMISE, SHOWN, Amendment, Card, Check, Record
from normlab.lab.results import first_rows, paired_rows, tallies, tally
from normlab.lab.running import experiment_register

CLAIM_A = Record(id="a-beats-b", kind="claim", claim="A beats B",
                 source="\"A outperforms B.\"", where="Doe 2024, Table 2", form="superiority",
                 margin=(0.0,), side="above", margin_source="the claim's own zero",
                 premise=("b-trains",))
CLAIM_C = Record(id="c-matches-b", kind="claim", claim="C matches B",
                 source="\"C is on par with B.\"", where="Doe 2024, Sec. 4", form="equivalence",
                 margin=(-0.1, 0.1), margin_source="papers.md: 0.1")
PREM = Record(id="b-trains", kind="premise", claim="B trains", source="\"B converges.\"",
              where="Doe 2024, Fig. 1", form="threshold", margin=(1.0,), side="below",
              margin_source="the lab's own: half the initial loss")
SHOW = Record(id="lr-used", kind="shown", claim="the learning rate")


def _module(**attrs):
    m = types.ModuleType("fake_registered")
    m.CARD = Card(name="fake-registered", title="t", citation="Doe 2024", claim="c",
                  published="p", method="m")
    m.REGISTER = (CLAIM_A, CLAIM_C, PREM, SHOW)
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def _iv(lo, hi):
    return stats.Interval((lo + hi) / 2, lo, hi, 4, "t")


def _rows(a=(0.1, 0.3), c=(-0.05, 0.05)):
    return [
        Check.superiority(id="a-beats-b", claim="A beats B", published="+", interval=_iv(*a),
                          side="above", margin_source="x"),
        Check.equivalence(id="c-matches-b", claim="C matches B", published="=",
                          interval=_iv(*c), margin=0.1, margin_source="x"),
        Check.decided(id="b-trains", claim="B trains", published="-", interval=_iv(0.2, 0.4),
                      threshold=1.0, side="below", kind=PREMISE, margin_source="x"),
        Check(id="lr-used", claim="lr", published="-", measured="0.01", rule="-", passed=None,
              kind=SHOWN),
    ]


def test_rows_that_keep_to_their_records_pass():
    R.validate(_module())
    R.check_rows(_module(), _rows())


@pytest.mark.parametrize("change, words", [
    (lambda rows: rows[0].__setattr__("id", "nobody"), "no record of the register"),
    (lambda rows: rows.append(copy.copy(rows[3])), "produced twice"),
    (lambda rows: rows[3].__setattr__("kind", "derivation"), "its record's is 'shown'"),
    (lambda rows: rows[1].__setattr__("threshold", [-0.2, 0.2]), "a change is an amendment"),
    (lambda rows: rows[0].__setattr__("side", "below"), "a change is an amendment"),
])
def test_a_row_that_leaves_its_record_is_refused(change, words):
    rows = _rows()
    change(rows)
    with pytest.raises(R.RegisterError, match=words):
        R.check_rows(_module(), rows)


def test_two_counted_rows_reading_one_interval_are_one_effect_counted_twice():
    with pytest.raises(R.RegisterError, match="reads the same interval as row a-beats-b"):
        R.check_rows(_module(), _rows(a=(-0.05, 0.05), c=(-0.05, 0.05)))


def test_a_retired_record_produces_no_row():
    gone = Amendment(id="c-matches-b", date="2026-12-07", changed="retired", why="w",
                     retires=True)
    with pytest.raises(R.RegisterError, match="retired by an amendment"):
        R.check_rows(_module(AMENDMENTS=(gone,)), _rows())


@pytest.mark.parametrize("record, words", [
    (Record(id="x", kind="claim", claim="x", where="Doe, Table 1"), "needs the source's sentence"),
    (Record(id="x", kind="claim", claim="x", source="\"x\""), "where it stands"),
    (Record(id="x", kind="claim", claim="x", source="s", where="w", form="superiority"),
     "needs margin_source"),
    (Record(id="x", kind="claim", claim="x", source="s", where="w", premise=("a-beats-b",)),
     "not premises"),
])
def test_a_register_that_breaks_its_rules_is_refused(record, words):
    with pytest.raises(R.RegisterError, match=words):
        R.validate(_module(REGISTER=(CLAIM_A, CLAIM_C, PREM, record)))
    with pytest.raises(R.RegisterError, match="more than once"):
        R.validate(_module(REGISTER=(CLAIM_A, CLAIM_A)))


def _summary(rows, amendments=(), size="quick"):
    from normlab.lab.contract import Result
    from normlab.lab.results import experiment_row

    card = _module().CARD
    r = Result(card=card, setting="s", measured="m", checks=rows,
               amendments=[a.to_json() for a in amendments])
    row = experiment_row(card.name, r, "")
    return {"size": size, "seed": 0, "tally": tally([row]),
            "tally_first": tally(first_rows([row], size)), "experiments": [row]}


def test_the_tallies_are_given_as_first_registered_and_as_amended():
    """An amendment's result before stays: the experiment was 'partly' as first registered
    (C's margin of 0.02 failed), and is 'reproduced' as amended (0.1); both tallies say so."""
    widened = Amendment(
        id="c-matches-b", date="2026-12-07", changed="margin 0.02 -> 0.1", why="the source's",
        before={"margin": [-0.02, 0.02]},
        results_before={"quick": {"status": "FAIL", "interval": [0.03, 0.05], "kind": "claim"}})
    s = _summary(_rows(), [widened])
    assert s["experiments"][0]["verdict"] == "reproduced"
    assert s["tally"]["reproduced"] == 1 and s["tally_first"]["partly reproduced"] == 1
    text = tallies(s)
    assert text.startswith("**As amended: 1 of 1 empirical claims reproduced")
    assert "As first registered: 0 of 1 empirical claims reproduced (1 partly)" in text
    added = Amendment(id="c-matches-b", date="2026-12-07", changed="counted", why="w",
                      before={"kind": None})
    first = first_rows(_summary(_rows(), [added])["experiments"], "quick")[0]
    assert [c["id"] for c in first["checks"]] == ["a-beats-b", "b-trains", "lr-used"]


def test_the_audit_of_committed_files_finds_each_broken_rule():
    """The committed files against the register: clean, then each rule broken in a copy."""
    module = _module()
    reg = {"experiments": [experiment_register(module)]}
    for r in reg["experiments"][0]["records"]:
        r.pop("sizes")
    s = _summary(_rows())
    assert R.audit(reg, [s], reg) == []
    bad = copy.deepcopy(reg)
    bad["experiments"][0]["records"][0]["where"] = ""
    assert any("does not say where" in p for p in R.audit(bad, [s]))
    bad = copy.deepcopy(s)
    bad["experiments"][0]["checks"][1]["threshold"] = [-0.5, 0.5]
    assert any("is not its record's" in p for p in R.audit(reg, [bad]))
    bad = copy.deepcopy(s)
    bad["experiments"][0]["checks"][1]["interval"] = bad["experiments"][0]["checks"][0][
        "interval"]
    assert any("read the same interval" in p for p in R.audit(reg, [bad]))
    bad = copy.deepcopy(reg)
    del bad["experiments"][0]["records"][1]
    assert any("gone from the register" in p for p in R.audit(bad, [], reg))


def test_block_comparisons_pair_rows_by_id():
    a = _summary(_rows())["experiments"][0]
    b = copy.deepcopy(a)
    b["checks"] = [b["checks"][2], b["checks"][0]]  # C's row missing, order changed
    pairs = paired_rows(a, b)
    assert [(x["id"], y["id"]) for x, y in pairs] == [("a-beats-b", "a-beats-b"),
                                                       ("b-trains", "b-trains")]


def test_the_register_block_marks_amended_and_retired_records():
    gone = Amendment(id="lr-used", date="2026-12-07", changed="retired", why="w", retires=True,
                     results_before={"quick": {"status": "shown", "measured": "0.01"}})
    reg = {"experiments": [experiment_register(_module(AMENDMENTS=(gone,)))]}
    text = R.register_markdown(reg)
    assert "| `lr-used` ✗ | shown |" in text and "| `a-beats-b` | claim |" in text
    assert "superiority: 0 (above passes)" in text and "Doe 2024, Table 2" in text
    assert "Before: quick: shown 0.01." in text


def test_a_claim_made_a_derivation_counts_as_first_registered_and_not_as_amended():
    """A row reclassified from claim to derivation holds now and passed then: the tally as
    amended counts it with the identities, the tally as first registered as a passing claim,
    with or without a committed result before at that size."""
    derived = Record(id="c-matches-b", kind="derivation", claim="C matches B")
    module = _module(REGISTER=(CLAIM_A, derived, PREM, SHOW))
    rows = _rows()
    rows[1] = Check(id="c-matches-b", claim="C matches B", published="=", measured="0",
                    rule="algebra", passed=True, kind="derivation")
    R.check_rows(module, rows)
    for before in ({"quick": {"status": "pass", "interval": [-0.05, 0.05], "kind": "claim"}},
                   {}):
        made = Amendment(id="c-matches-b", date="2026-12-07", changed="claim -> derivation",
                         why="true by construction", before={"kind": "claim"},
                         results_before=before)
        s = _summary(rows, [made])
        assert s["tally"]["checks_counted"] == 1 and s["tally"]["identities_hold"] == 1
        first = s["tally_first"]
        assert first["checks_counted"] == 2 and first["checks_passed"] == 2
        assert first["identities"] == 0 and first["reproduced"] == 1


def test_as_first_registered_a_size_reads_its_first_committed_result():
    """The full size first measured after an early amendment: its row as first registered is
    the earliest result before that has the full size (a later amendment's), not today's."""
    early = Amendment(id="a-beats-b", date="2026-12-03", changed="seeds 3 -> 8", why="w",
                      remeasure=True,
                      results_before={"quick": {"status": "FAIL", "kind": "claim"}})
    later = Amendment(id="a-beats-b", date="2026-12-07", changed="margin", why="w",
                      before={"margin": [0.5]},
                      results_before={"quick": {"status": "pass", "kind": "claim"},
                                      "full": {"status": "inconclusive", "kind": "claim"}})
    row = _summary(_rows(), [later, early])["experiments"][0]
    by_size = {size: {c["id"]: c["status"] for c in R.first_registered(row, size)}
               for size in ("quick", "full")}
    assert by_size["quick"]["a-beats-b"] == "FAIL"
    assert by_size["full"]["a-beats-b"] == "inconclusive"
