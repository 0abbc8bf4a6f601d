"""One non-finite JSON convention in the lab: ``_files``' strings ``"inf"`` / ``"nan"`` (a sweep
summary writes them), and the readers take both those and the ``null`` of older files and of the
trainer's ``TrainResult.to_dict``."""

import json
import math

from normlab._files import dumps_json, number
from normlab.lab.sweep.summary import Sensitivity, SweepSummary, finite


def test_a_sweep_summary_writes_a_non_finite_number_as_files_strings():
    s = SweepSummary(x="lr", variant_fields=[], cells=[], sensitivity=[
        Sensitivity("all", math.nan, 2.3, None, None, [1e-2]),
        Sensitivity("other", math.inf, 2.3, 1.0, 1e-2, (1e-2, 1e-1))])  # a tuple stays a list
    d = s.to_dict()
    assert d["sensitivity"][0]["value"] == "nan" and d["sensitivity"][1]["value"] == "inf"
    assert d["sensitivity"][1]["xs"] == [1e-2, 1e-1]
    assert json.loads(dumps_json(d)) == d  # strict JSON, as written
    assert math.isnan(number(d["sensitivity"][0]["value"]))


def test_the_readers_take_the_strings_the_null_of_older_files_and_numbers():
    assert [finite(v) for v in (None, "nan", "inf", "-inf", math.nan, math.inf)] == [None] * 6
    assert finite(1) == 1.0 and isinstance(finite(1), float) and finite(2.5) == 2.5
    assert finite("2.5") is None  # a string is never read as a number here
