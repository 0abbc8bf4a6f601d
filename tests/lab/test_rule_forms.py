"""The kinds of row and the forms of rule: a premise gates the claims, non-inferiority and
equivalence decide as their names say, and old result files still read."""

import pytest

from normlab.lab import framework as F
from normlab.lab.stats import Interval


def iv(lo, hi):
    return Interval((lo + hi) / 2, lo, hi, 5, "m")


def claim(passed, **kw):
    return F.Check(claim="c", published="p", measured="m", rule="r", passed=passed, **kw)


@pytest.mark.parametrize("premise, want", [(True, F.REPRODUCED), (False, F.NOT_TESTED),
                                            (None, F.NOT_TESTED)])
def test_a_premise_gates_the_claims(premise, want):
    p = F.Check.superiority(claim="the no-fix arm diverges", published="-", interval=iv(0.1, 0.4)
                            if premise else iv(-0.1, 0.4) if premise is None else iv(-0.4, -0.1),
                            side="above", margin=0.0, kind=F.PREMISE)
    assert p.passed is premise and not p.counted
    assert F.verdict_of([p, claim(True)]) == want


def test_a_premise_is_not_a_claim():
    checks = [claim(True), claim(False, kind=F.PREMISE)]
    assert [c.counted for c in checks] == [True, False]


@pytest.mark.parametrize("lo, hi, want",
                         [(-0.5, 0.05, True), (-0.5, 0.2, None), (0.15, 0.4, False)])
def test_non_inferiority_for_a_loss(lo, hi, want):
    """A - B for a loss (lower is better), margin 0.1: A may be worse by less than 0.1."""
    c = F.Check.non_inferiority(claim="z-loss does not cost loss", published="-",
                                interval=iv(lo, hi), side="below", margin=0.1)
    assert c.passed is want and c.form == F.NON_INFERIORITY and c.threshold == [0.1]
    assert "non-inferiority" in c.rule


@pytest.mark.parametrize("lo, hi, want",
                         [(-0.08, 0.05, True), (-0.2, 0.05, None), (0.2, 0.4, False)])
def test_equivalence(lo, hi, want):
    c = F.Check.equivalence(claim="matches", published="-", interval=iv(lo, hi), margin=0.1)
    assert c.passed is want and c.threshold == [-0.1, 0.1] and c.form == F.EQUIVALENCE


def test_superiority_is_beyond_the_margin():
    assert F.Check.superiority(claim="c", published="-", interval=iv(0.01, 0.2), side="above",
                               margin=0.02).passed is None
    assert F.Check.superiority(claim="c", published="-", interval=iv(-0.3, -0.01),
                               side="below").passed is True


@pytest.mark.parametrize("call, match", [
    (lambda: claim(True, kind="guess"), "kind must be one of"),
    (lambda: claim(True, form="vibes"), "form must be one of"),
    (lambda: claim(True, kind=F.SHOWN), "not decided"),
    (lambda: F.Check.non_inferiority(claim="c", published="-", interval=iv(0, 1), side="below",
                                     margin=0.0), "margin"),
    (lambda: F.Check.equivalence(claim="c", published="-", interval=iv(0, 1), margin=-1), "margin"),
])
def test_bad_rows(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_old_result_files_read():
    old = {"claim": "c", "published": "p", "measured": "m", "rule": "r", "passed": True,
           "identity": True}
    c = F.Check.from_json(old)
    assert c.kind == F.IDENTITY and c.identity and not c.counted
    assert F.Check.from_json({**old, "identity": False}).kind == F.CLAIM


@pytest.mark.parametrize("form, lo, hi, want", [
    ("superiority", 0.15, 0.4, True), ("superiority", -0.4, 0.05, False),
    ("non-inferiority", -0.5, 0.05, True), ("non-inferiority", 0.15, 0.4, False)])
def test_a_check_by_its_record_takes_the_records_rule(form, lo, hi, want):
    """``Check.by_record`` decides by the record's form, margin and side, under its id, claim
    and margin's source: the same check the form's own constructor gives."""
    from normlab.lab.contract import Record
    side = "above" if form == "superiority" else "below"
    rec = Record(id="a-row", kind=F.CLAIM, claim="A beats B", form=form, margin=(0.1,),
                 side=side, margin_source="the source's band", registered="2026-12-07")
    c = F.Check.by_record(rec, iv(lo, hi), published="p", rule="r", source="s", measured="m")
    make = F.Check.superiority if form == "superiority" else F.Check.non_inferiority
    assert c.passed is want and c.form == form and c.threshold == [0.1]
    assert c == make(id="a-row", claim="A beats B", published="p", interval=iv(lo, hi),
                     side=side, margin=0.1, measured="m", rule="r", source="s",
                     margin_source="the source's band")


def test_a_check_by_a_threshold_record_is_refused():
    from normlab.lab.contract import Record
    rec = Record(id="a-row", kind=F.CLAIM, claim="c", form="threshold", margin=(1.0,),
                 side="above", margin_source="m", registered="2026-12-07")
    with pytest.raises(ValueError, match="rec: by_record decides a superiority"):
        F.Check.by_record(rec, iv(0, 2), published="p", rule="r", source="s", measured="m")
