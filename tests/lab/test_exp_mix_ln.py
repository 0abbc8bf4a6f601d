"""mix-ln at its tiny size (seconds, in this process) and its judge on hand-made data: premises
first (Post-LN's early gradients smaller, Pre-LN's deep gradients smaller, the task separates
the two), Mix-LN trained only where every premise holds, each effect counted once, and a bad
config refused by name."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import mix_ln as M


def _run(loss: float, grad: list[float]) -> dict:
    return {"status": "done", "loss": loss, "loss_at_init": 4.0, "grad": grad,
            "removal": [0.3, 0.1, 0.1, 0.1], "angular": [0.1] * 4}


_POST = [0.01, 0.05, 0.1, 0.2]  # early blocks' gradients vanish
_PRE = [0.2, 0.1, 0.05, 0.04]  # deep blocks' gradients smaller
_FLAT = [0.1, 0.09, 0.1, 0.08]


def _data(post=_POST, pre=_PRE, post_losses=(2.3, 2.4, 2.35), mix=None) -> dict:
    jitter = (1.0, 1.1, 0.95)
    arms = {"post": [_run(x, list(np.multiply(post, j))) for x, j in zip(post_losses, jitter)],
            "pre": [_run(x, list(np.multiply(pre, j))) for x, j in zip((2.0, 2.05, 2.02),
                                                                       jitter)]}
    if mix is not None:
        losses, grad = mix
        arms["mixln"] = [_run(x, list(np.multiply(grad, j))) for x, j in zip(losses, jitter)]
    return {"n_layers": 4, "seeds": [0, 1, 2], "steps": 10, "fraction": 0.25, "arms": arms,
            "tested": mix is not None}


def _status(rows, rec_id):
    return next(c.status for c in rows if c.id == rec_id)


def test_judge_passes_when_mixln_is_flatter_and_lower_than_both():
    rows = M.judge(_data(mix=((1.9, 1.95, 1.92), _FLAT)), M.Config())
    register.check_rows(M, rows, "quick")
    for rec_id in M._TEXTS:
        assert _status(rows, rec_id) == "pass", rec_id
    assert E.verdict_of(rows) == E.REPRODUCED
    counted = [tuple(c.interval) for c in rows if c.counted]
    assert len(set(counted)) == len(counted) == 4


def test_judge_fails_when_mixln_is_steeper_and_higher():
    steep = [0.001, 0.01, 0.1, 1.0]
    rows = M.judge(_data(mix=((2.6, 2.65, 2.62), steep)), M.Config())
    for rec_id in M._TEXTS:
        assert _status(rows, rec_id) == "FAIL", rec_id
    assert E.verdict_of(rows) == E.NOT_REPRODUCED


@pytest.mark.parametrize("which", ["post", "pre", "separation"])
def test_a_premise_that_fails_makes_the_experiment_not_tested(which):
    kw = {"post": {"post": _PRE}, "pre": {"pre": _POST},
          "separation": {"post_losses": (1.9, 1.95, 1.92)}}[which]
    data = _data(**kw)
    assert any(p.passed is False for p in M._premises(data))
    rows = M.judge(data, M.Config())
    assert E.verdict_of(rows) == E.NOT_TESTED
    claims = [c for c in rows if c.kind == E.CLAIM]
    assert [c.id for c in claims] == list(M._TEXTS)
    assert all(c.passed is None and c.measured.startswith("not run") for c in claims)


def test_spread_and_end_ratio_read_log10_of_the_block_norms():
    run = _run(2.0, [0.01, 0.1, 1.0])
    assert M.spread(run) == pytest.approx(np.std([-2.0, -1.0, 0.0]))
    assert M.end_ratio(run, last_over_first=True) == pytest.approx(2.0)
    assert M.end_ratio(run, last_over_first=False) == pytest.approx(-2.0)
    vanished = _run(2.0, [0.0, 0.1, 1.0])  # a block whose gradient was 0 at every step
    assert M.log_grads(vanished)[0] == pytest.approx(np.log10(M.FLOOR))
    assert np.isfinite(M.spread(vanished))


def test_the_tiny_size_runs_end_to_end(tmp_path):
    r = E.run_experiment("mix-ln", size="tiny", seed=0, executor="serial", plots=False).result
    arms = r.data["arms"]
    assert set(arms) >= {"post", "pre"}
    ids = [c.id for c in r.checks]
    assert ids[:3] == ["post-ln-early-gradients-smaller", "pre-ln-deep-gradients-smaller",
                       "text-separates-post-and-pre"]
    register.check_rows(M, r.checks, "tiny")
    register.validate(M)
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_the_mixln_arm_runs_with_the_configured_fraction():
    """With every premise let through, the Mix-LN arm trains at alpha = fraction: one Post-LN
    block of four at 0.25 (GPTConfig.mixln_post_layers)."""
    cfg = E.configure(M, "tiny")
    over = cfg.base.with_overrides({"model.placement": "mixln",
                                    "model.mixln_fraction": cfg.fraction})
    assert over.model.mixln_post_layers == 1
    assert [over.model.block_placement(i) for i in range(4)] == ["post", "pre", "pre", "pre"]


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="alpha must be in"):
        E.configure(M, "tiny", overrides={"fraction": 1.0})
    with pytest.raises(ValueError, match="at least one of each kind"):
        E.configure(M, "tiny", overrides={"fraction": 0.1})
    with pytest.raises(ValueError, match="grad_stats"):
        E.configure(M, "tiny", overrides={"base.probes": ()})
