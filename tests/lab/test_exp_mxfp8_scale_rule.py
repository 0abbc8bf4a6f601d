"""mxfp8-scale-rule at its tiny size (seconds, in this process) and its rows on hand-made data:
the mechanism counted on the floor arm's own MX operands, the round-up rule saturating none of
them, the loss rows paired by seed, the floor - ceil loss shown (its claim is not tested at any
size this machine reaches), and bad configs refused."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import mxfp8_scale_rule as M
from normlab.precision import mx_scale

_CACHE: dict = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("mxfp8-scale-rule", size="tiny", seed=0,
                                       executor="serial", plots=False).result
    return _CACHE["r"]


def test_the_tiny_size_runs_every_arm_and_counts_the_floor_arms_blocks(tmp_path):
    r = tiny()
    cfg = E.configure(M, "tiny")
    assert sorted({run["arm"] for run in r.data["runs"]}) == ["bf16", "ceil", "floor"]
    floor = [run for run in r.data["runs"] if run["arm"] == "floor"]
    assert len(floor) == cfg.seeds and all(run["counts"]["grad"]["blocks"] > 0 for run in floor)
    assert all(run["counts"] is None for run in r.data["runs"] if run["arm"] != "floor")
    rows = {c.id: c for c in r.checks}
    assert rows["ceil-saturates-none"].passed is True
    assert (rows["mxfp8-ceil-matches-bf16"].form, rows["mxfp8-ceil-matches-bf16"].threshold) == (
        "non-inferiority", [0.02])
    assert "floor-loses-quality" not in rows  # registered as not tested at this size
    register.check_rows(M, r.checks, "full")
    assert (tmp_path / M.plot(r, tmp_path)[0]).stat().st_size > 1000


def test_floor_saturation_counts_what_the_ocp_rule_saturates():
    """A block whose amax has a mantissa above 1.75 saturates under floor (amax / X > 448), one
    below does not; ceil saturates neither; the loss is 1 - 448 / (amax / X)."""
    x = np.zeros((2, 64), np.float32)
    x[0, 0], x[0, 40], x[1, 3] = 1.9 * 2.0**-3, 1.5 * 2.0**5, 0.0  # one block of zeros
    out = M.floor_saturation(x)
    assert out == {"blocks": 2.0, "floor": 1.0, "ceil": 0.0,
                   "lost": pytest.approx(1 - 448 / (1.9 * 256))}
    a = np.array([1.9 * 2.0**-3])
    assert a[0] / mx_scale(a, "float8_e4m3fn", "floor")[0] == pytest.approx(1.9 * 256)


def _data(shares, ceil_losses, bf16_losses, floor_losses=None):
    runs = []
    for i, share in enumerate(shares):
        counts = {k: {"blocks": 1000.0, "floor": 1000.0 * share, "ceil": 0.0,
                      "lost": 60.0 * share} for k in M.KINDS}
        runs.append({"arm": "floor", "seed": i, "loss": (floor_losses or ceil_losses)[i],
                     "loss_at_init": 4.2, "stopped": None, "counts": counts})
    for arm, losses in (("ceil", ceil_losses), ("bf16", bf16_losses)):
        runs += [{"arm": arm, "seed": i, "loss": v, "loss_at_init": 4.2, "stopped": None,
                  "counts": None} for i, v in enumerate(losses)]
    return {"seeds": list(range(len(shares))), "runs": runs}


def test_judge_on_hand_made_data_each_verdict():
    cfg = E.configure(M, "full")
    both = M.judge(_data([0.19, 0.2, 0.18], [1.90, 1.91, 1.92], [1.90, 1.905, 1.915]), cfg)
    assert E.verdict_of(both) == E.REPRODUCED
    worse = M.judge(_data([0.19, 0.2, 0.18], [2.00, 2.01, 2.02], [1.90, 1.905, 1.915]), cfg)
    assert {c.id: c.passed for c in worse if c.counted} == {
        "floor-saturates-block-maxima": True, "mxfp8-ceil-matches-bf16": False}
    assert E.verdict_of(worse) == E.PARTLY
    none = M.judge(_data([0.0, 0.001, 0.0], [2.00, 2.01, 2.02], [1.90, 1.905, 1.915]), cfg)
    assert E.verdict_of(none) == E.NOT_REPRODUCED
    spread = M.judge(_data([0.0, 0.2, 0.01], [1.90, 1.91, 1.92], [1.90, 1.905, 1.915]), cfg)
    assert next(c for c in spread if c.id == "floor-saturates-block-maxima").inconclusive
    shown = next(c for c in both if c.id == "floor-minus-ceil-loss")
    assert shown.passed is None and shown.kind == E.SHOWN


def test_the_quick_size_trains_the_floor_arm_only_and_its_loss_rows_are_untested_there():
    quick = E.configure(M, "quick")
    assert quick.loss_arms is False and E.configure(M, "full").loss_arms is True
    rows = M.judge(_data([0.19, 0.2, 0.18], [1.9] * 3, [1.9] * 3), quick)
    with pytest.raises(register.RegisterError, match="not tested at the quick size"):
        register.check_rows(M, rows, "quick")
    mech = M.judge({"seeds": [0, 1], "runs": [r for r in _data([0.2, 0.19], [1.9] * 2,
                                                              [1.9] * 2)["runs"]
                                              if r["arm"] == "floor"]}, quick)
    register.check_rows(M, mech, "quick")
    assert [c.id for c in mech] == ["floor-saturates-block-maxima", "ceil-saturates-none",
                                    "saturation-size"]
    register.validate(M)
    assert not M.RECORDS["floor-loses-quality"].tested_at("full")


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="precision is set by each arm"):
        E.configure(M, "tiny", overrides={"base.precision": "amp_bf16"})
    with pytest.raises(ValueError, match="every must be"):
        E.configure(M, "tiny", overrides={"every": 0})
    with pytest.raises(ValueError, match="seeds must be"):
        E.configure(M, "tiny", overrides={"seeds": 1})
