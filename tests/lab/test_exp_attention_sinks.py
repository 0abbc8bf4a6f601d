"""attention-sinks at its tiny size (seconds, in this process) and its judge on hand-made data:
premises first (softmax grows a sink and massive activations), each fix paired by seed against
softmax, each effect counted once, every verdict reachable, bad configs refused."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import attention_sinks as M

_CACHE: dict = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("attention-sinks", size="tiny", seed=0, executor="serial",
                                       plots=False).result
    return _CACHE["r"]


def test_tiny_runs_end_to_end_with_every_registered_row(tmp_path):
    r = tiny()
    cfg = E.configure(M, "tiny")
    assert set(r.data["arms"]) == set(M.ARMS)
    assert all(len(a["runs"]) == cfg.seeds for a in r.data["arms"].values())
    assert [c.id for c in r.checks] == [rec.id for rec in M.REGISTER]
    register.check_rows(M, r.checks, "quick")
    register.validate(M)
    counted = [tuple(c.interval) for c in r.checks if c.counted]
    assert len(set(counted)) == len(counted) == 5  # one effect, one counted row
    run = r.data["arms"]["softmax"]["runs"][0]
    assert np.shape(run["end"]["share"]) == (cfg.base.model.n_layers, cfg.base.model.n_heads)
    assert len(run["end"]["max"]) == cfg.base.model.n_layers
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_the_arms_differ_only_in_the_attention_op():
    cfg = E.configure(M, "quick")
    assert M.arm_overrides("softmax", cfg) == {}
    assert M.arm_overrides("gated", cfg) == {"model.attn_gate": True}
    assert M.arm_overrides("sigmoid", cfg) == {"model.attn_fn": "sigmoid",
                                               "model.attn_sigmoid_bias": 0.0}
    sig = cfg.base.with_overrides(M.arm_overrides("sigmoid", cfg)).model
    assert sig.sigmoid_bias == 0.0  # Gu et al.'s sigmoid without a bias
    assert cfg.base.lr == 0.1 and cfg.base.model.n_layers == 8


def test_the_rows_read_the_paired_seeds():
    r = tiny()
    d = r.data
    for arm in M.FIXES:
        row = next(c for c in r.checks if c.id == f"{arm}-removes-the-sink")
        diff = np.subtract(M.values(d, "softmax", "rate"), M.values(d, arm, "rate"))
        assert row.estimate == pytest.approx(float(np.mean(diff)))
        assert (row.form, row.threshold, row.side) == ("superiority", [0.0], "above")
    loss = next(c for c in r.checks if c.id == "gated-costs-no-quality")
    diff = np.subtract(M.values(d, "gated", "loss"), M.values(d, "softmax", "loss"))
    assert loss.estimate == pytest.approx(float(np.mean(diff)))
    assert (loss.form, loss.threshold, loss.side) == ("non-inferiority", [0.1], "below")


def _run(rate0, rate, max0, mx, loss):
    return {"init": {"rate": rate0, "share": [[0.1]], "mean_share": 0.1, "max": [max0]},
            "end": {"rate": rate, "share": [[0.2]], "mean_share": 0.2, "max": [mx]},
            "loss": loss, "diverged": False}


def _data(arms: dict) -> dict:
    """Hand-made data: per arm a list of (rate0, rate, max0, max, loss) per seed."""
    n = len(next(iter(arms.values())))
    return {"seeds": list(range(n)), "n_layers": 1, "eps": 0.3, "sigmoid_bias": 0.0,
            "arms": {a: {"runs": [_run(*v) for v in rows]} for a, rows in arms.items()}}


SINK = [(0.0, 0.15, 10.0, 1000.0, 2.7), (0.01, 0.17, 11.0, 900.0, 2.6),
        (0.0, 0.12, 9.0, 800.0, 2.8)]
FREE = [(0.0, 0.01, 8.0, 90.0, 2.6), (0.0, 0.02, 8.0, 80.0, 2.5), (0.0, 0.0, 8.0, 95.0, 2.7)]
WORSE = [(0.0, 0.30, 8.0, 5000.0, 3.0), (0.0, 0.35, 8.0, 6000.0, 3.1),
         (0.0, 0.31, 8.0, 5500.0, 3.2)]


def test_judge_reproduced_when_both_fixes_remove_both():
    checks = M.judge(_data({"softmax": SINK, "gated": FREE, "sigmoid": FREE}), M.Config())
    assert E.verdict_of(checks) == E.REPRODUCED
    assert all(c.passed for c in checks if c.counted)


def test_judge_not_reproduced_when_neither_fix_helps():
    checks = M.judge(_data({"softmax": SINK, "gated": WORSE, "sigmoid": WORSE}), M.Config())
    assert E.verdict_of(checks) == E.NOT_REPRODUCED
    assert [c.passed for c in checks if c.counted] == [False] * 5


def test_judge_partly_when_one_fix_helps():
    checks = M.judge(_data({"softmax": SINK, "gated": FREE, "sigmoid": WORSE}), M.Config())
    assert E.verdict_of(checks) == E.PARTLY


def test_judge_not_tested_when_softmax_grows_no_sink():
    flat = [(0.1, 0.1, 10.0, 1000.0, 2.7), (0.2, 0.2, 11.0, 900.0, 2.6),
            (0.1, 0.1, 9.0, 800.0, 2.8)]
    checks = M.judge(_data({"softmax": flat, "gated": FREE, "sigmoid": FREE}), M.Config())
    premise = next(c for c in checks if c.id == "softmax-grows-a-sink")
    assert premise.kind == E.PREMISE and premise.passed is False
    assert E.verdict_of(checks) == E.NOT_TESTED


def test_judge_not_tested_when_softmax_grows_no_massive_activations():
    shrink = [(0.0, 0.15, 1000.0, 10.0, 2.7), (0.0, 0.17, 900.0, 11.0, 2.6),
              (0.0, 0.12, 800.0, 9.0, 2.8)]
    checks = M.judge(_data({"softmax": shrink, "gated": FREE, "sigmoid": FREE}), M.Config())
    premise = next(c for c in checks if c.id == "softmax-grows-massive-activations")
    assert premise.passed is False and E.verdict_of(checks) == E.NOT_TESTED


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="attn_gate"):
        E.configure(M, "tiny", overrides={"base.model.attn_gate": True})
    with pytest.raises(ValueError, match="seeds"):
        E.configure(M, "tiny", overrides={"seeds": 1})
    with pytest.raises(ValueError, match="sigmoid_bias"):
        E.configure(M, "tiny", overrides={"sigmoid_bias": float("inf")})
    with pytest.raises(ValueError, match="arm must be one of"):
        M.arm_overrides("linear", M.Config())
