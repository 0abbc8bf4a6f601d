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
