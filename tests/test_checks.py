"""normlab._checks: the one home of argument checks. A wrong kind is a TypeError, a wrong value a
ValueError, and every message names the argument and what is accepted."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normlab import _checks as ck


def test_integer():
    assert ck.integer(np.int64(3), "n", lo=1) == 3 and type(ck.integer(np.int64(3), "n")) is int
    for bad in (1.0, "3", True, None):
        with pytest.raises(TypeError, match=r"n must be an integer >= 1; got"):
            ck.integer(bad, "n", lo=1)
    with pytest.raises(ValueError, match=r"steps must be an integer >= 1; got 0"):
        ck.integer(0, "steps", lo=1)
    with pytest.raises(ValueError, match=r"bits must be an integer in \[1, 8\]; got 9"):
        ck.integer(9, "bits", lo=1, hi=8)


def test_real():
    assert ck.real(np.float32(0.5), "p", lo=0, hi=1, hi_open=True) == 0.5
    for bad in ("1", True, None, [1.0]):
        with pytest.raises(TypeError, match="lr must be a finite number > 0"):
            ck.real(bad, "lr", lo=0, lo_open=True)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="lr must be a finite number > 0"):
            ck.real(bad, "lr", lo=0, lo_open=True)
    with pytest.raises(ValueError, match=r"dropout must be a finite number in \[0, 1\); got 1.0"):
        ck.real(1.0, "dropout", lo=0, hi=1, hi_open=True)
    assert ck.real(-5, "offset") == -5.0  # unbounded: any finite number


def test_choice_and_known_keys_suggest_the_closest():
    assert ck.choice("pre", "placement", ("post", "pre")) == "pre"
    with pytest.raises(ValueError, match=r"placement must be one of 'post', 'pre'; got 'prre' "
                                          r"\(did you mean 'pre'\?\)"):
        ck.choice("prre", "placement", ("post", "pre"))
    for bad in (None, 1, True):
        with pytest.raises(TypeError, match="placement must be one of"):
            ck.choice(bad, "placement", ("post", "pre"))
    assert ck.choice(None, "qk_norm", ("layernorm", None)) is None
    with pytest.raises(ValueError, match=r"unknown field 'stpes' \(did you mean 'steps'\?\); "
                                         r"known: steps, lr"):
        ck.known_keys(["lr", "stpes"], ["steps", "lr"], "field")


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_every_refusal_is_a_type_or_value_error_naming_the_argument(value):
    for check in (lambda v: ck.integer(v, "ARG", lo=0, hi=10),
                  lambda v: ck.real(v, "ARG", lo=0, hi=1),
                  lambda v: ck.choice(v, "ARG", ("a", "b"))):
        try:
            check(value)
        except (TypeError, ValueError) as exc:
            assert str(exc).startswith("ARG must be")
