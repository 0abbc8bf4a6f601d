"""``normlab.lab.formatting.fmt``: the lab's one number formatter and its switching rule."""

import math

from normlab.lab import framework as E
from normlab.lab import stats as S
from normlab.lab.formatting import fmt


def test_the_switching_rule():
    assert fmt(0.001234) == "0.00123"  # the window starts at 1e-3 ...
    assert fmt(0.0009994) == "9.99e-04"  # ... and below it the form is scientific
    assert fmt(12345.6) == "1.23e+04"  # general form, scientific itself from 10**digits
    assert fmt(99999.0) == "1e+05" and fmt(1e5) == "1.00e+05"  # the window ends at 1e5
    assert fmt(1e-9) == "1.00e-09" and fmt(-2.5e7) == "-2.50e+07"
    assert fmt(1.23456) == "1.23" and fmt(-123.456) == "-123"
    assert fmt(1.23456, 5) == "1.2346" and fmt(1e-9, 5) == "1.0000e-09"
    assert fmt(0.0) == fmt(-0.0) == "0"
    assert fmt(math.nan) == "nan" and fmt(math.inf) == "inf" and fmt(-math.inf) == "-inf"
    assert fmt(None) == "-" and fmt(None, missing="n/a") == "n/a"


def test_a_spec_is_applied_as_given():
    assert fmt(0.000182, spec=".3g") == "0.000182"  # the intervals' form: fixed down to 1e-4
    assert fmt(0.0047, spec="+.4f") == "+0.0047" and fmt(1.5, spec="9.2f") == "     1.50"
    assert fmt(-0.0, spec=".3g") == "-0" and fmt(None, spec="9.2f") == "-"


def test_the_framework_and_the_intervals_use_it():
    assert E.fmt is fmt
    iv = S.Interval(0.000182, -0.000182, 0.000547, 3, "mean +- 2 se")
    assert iv.text() == "0.000182 [-0.000182, 0.000547] (n=3)"
    assert S.Interval(1234.5, 1e-7, 2.0, 5, "x").text(2) == "1.2e+03 [1e-07, 2] (n=5)"
