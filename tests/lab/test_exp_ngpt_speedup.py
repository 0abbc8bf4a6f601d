"""ngpt-speedup at its tiny size (seconds, in this process), and its rows on hand-made curves
where each verdict can come out: the speed-up read from the evaluation curves (against a
hand-computed value), a pass, a fail, and a premise that fails (not tested)."""

import copy

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.contract import NOT_REPRODUCED, NOT_TESTED, REPRODUCED, verdict_of
from normlab.lab.experiments import ngpt_speedup as M

_CACHE: dict = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("ngpt-speedup", size="tiny", seed=0, executor="serial",
                                       plots=False).result
    return _CACHE["r"]


def _curve(final: float, at: int, steps: int = 300, every: int = 20,
           init: float = 5.0) -> list:
    """An evaluation curve that falls linearly from ``init`` at step 0 to ``final`` at step
    ``at`` and stays there."""
    return [[s, final + (init - final) * max(0.0, 1 - s / at)] for s in
            range(every, steps + 1, every)]


def _data(base_at: int, ngpt_at: int, *, ngpt_final: float = 1.9, seeds: int = 3,
          grid: tuple = (2.1, 1.9, 2.0)) -> dict:
    """Hand-made data: the baseline reaches 1.9 at step ``base_at``, nGPT ``ngpt_final`` at
    ``ngpt_at`` (each seed a little apart); the baseline's grid means ``grid``."""
    arms = {}
    for arm, lr, final, at in (("baseline", 3e-2, 1.9, base_at), ("ngpt", 3e-2, ngpt_final,
                                                                   ngpt_at)):
        curves = [_curve(final + 0.001 * i, at + 2 * i) for i in range(seeds)]
        arms[M._variant(arm, lr)] = {"init": [5.0] * seeds, "final": [c[-1][1] for c in curves],
                                     "curve": curves, "status": ["done"] * seeds}
    for lr, loss in zip((1e-2, 1e-1), (grid[0], grid[2])):
        arms[M._variant("baseline", lr)] = {"init": [5.0] * seeds, "final": [loss] * seeds,
                                            "curve": [_curve(loss, 280)] * seeds,
                                            "status": ["done"] * seeds}
    arms[M._variant("baseline", 3e-2)]["final"] = [grid[1] + 0.001 * i for i in range(seeds)]
    return {"seeds": list(range(seeds)), "baseline_lr": 3e-2, "ngpt_lr": 3e-2,
            "lr_grid": [1e-2, 3e-2, 1e-1], "arms": arms, "steps": 300}


def _config():
    return E.configure(M, "full")


def test_steps_to_interpolates_between_evaluations():
    """A curve 5.0 (step 0), 3.0 (20), 2.0 (40): it reaches 2.5 half-way between 20 and 40."""
    curve = [[20, 3.0], [40, 2.0]]
    assert M.steps_to(curve, 2.5, 5.0) == pytest.approx(30.0)
    assert M.steps_to(curve, 4.0, 5.0) == pytest.approx(10.0)
    assert M.steps_to(curve, 1.0, 5.0) is None


def test_the_speedup_is_the_baseline_steps_over_ngpt_steps_at_the_worse_final_loss():
    """nGPT at the baseline's final loss in a quarter of the steps: 4; ending above it, the
    ratio reads nGPT's final loss and is below 1."""
    b, n = _curve(1.9, 280, every=10), _curve(1.9, 70, every=10)
    assert M.speedup(b, 5.0, n, 5.0) == pytest.approx(4.0)
    slow = _curve(2.2, 280, every=10)  # nGPT ends at 2.2, which the baseline reaches earlier
    x = M.speedup(b, 5.0, slow, 5.0)
    t_base = 280 * (5.0 - 2.2) / (5.0 - 1.9)  # the baseline's linear fall reaches 2.2 here
    tb, tn = M.steps_to(b, 2.2, 5.0), M.steps_to(slow, 2.2, 5.0)
    assert tb is not None and tn is not None
    assert x == pytest.approx(tb / tn)
    assert x < 1 and tb == pytest.approx(t_base, abs=20)


def test_judge_passes_fails_and_refuses_to_judge_without_its_premises():
    """Hand-made curves: nGPT 5x faster passes, 1.5x faster fails, nGPT that stalls makes the
    experiment not tested, and a baseline whose lr is not the best of its grid too."""
    cfg = _config()
    assert verdict_of(M.judge(_data(280, 56), cfg)) == REPRODUCED
    assert verdict_of(M.judge(_data(280, 187), cfg)) == NOT_REPRODUCED
    stalled = M.judge(_data(280, 100, ngpt_final=4.6), cfg)
    assert verdict_of(stalled) == NOT_TESTED
    row = next(c for c in stalled if c.id == "ngpt-speedup-at-least-4")
    assert row.passed is None and row.measured.startswith("not judged")
    edge = M.judge(_data(280, 56, grid=(2.1, 1.9, 1.8)), cfg)
    assert verdict_of(edge) == NOT_TESTED
    assert next(c for c in edge if c.id == "baseline-lr-interior").passed is False
    rows = M.judge(_data(280, 56), cfg)
    register.check_rows(M, rows, "full")
    counted = next(c for c in rows if c.id == "ngpt-speedup-at-least-4")
    assert (counted.form, counted.threshold, counted.side) == ("threshold", [4.0], "above")
    assert counted.estimate == pytest.approx(float(np.mean(M.speedups(_data(280, 56)))))


def test_a_diverged_arm_is_not_a_trained_one():
    """A seed of nGPT that diverged (its final loss is its loss at init) fails the premise."""
    d = _data(280, 56)
    n = d["arms"][M._variant("ngpt", 3e-2)]
    n = copy.deepcopy(n)
    n["final"] = [5.0] * 3
    n["status"] = ["diverged"] * 3
    d["arms"][M._variant("ngpt", 3e-2)] = n
    assert M._train_premise(d).passed is False


def test_the_tiny_size_runs_end_to_end(tmp_path):
    """Both arms and the baseline's grid run, paired by seed; the rows keep to the register
    and the plot is written."""
    r = tiny()
    cfg = E.configure(M, "tiny")
    assert set(r.data["arms"]) == {M._variant("baseline", lr) for lr in cfg.lr_grid} | {
        M._variant("ngpt", cfg.ngpt_lr)}
    assert all(len(a["final"]) == cfg.seeds for a in r.data["arms"].values())
    register.check_rows(M, r.checks, "tiny")
    register.validate(M)
    assert {c.id for c in r.checks} >= {"both-arms-train", "baseline-lr-interior",
                                        "ngpt-speedup-at-least-4", "final-loss-gap"}
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_the_sizes_differ_in_seeds_only_and_every_size_runs_the_grid():
    quick, full = E.configure(M, "quick"), E.configure(M, "full")
    assert (quick.seeds, full.seeds) == (3, 5)
    assert quick.base == full.base and quick.lr_grid == full.lr_grid
    names = [p[0] for p in M._points(quick, [0])]
    assert names[:2] == [M._variant("baseline", quick.baseline_lr),
                         M._variant("ngpt", quick.ngpt_lr)]
    assert sorted(names[2:]) == sorted(M._variant("baseline", lr) for lr in quick.lr_grid
                                       if lr != quick.baseline_lr)


def test_the_ngpt_arm_is_the_official_codes_settings():
    """nGPT: placement 'ngpt' with no norm layers, unit embeddings, no weight decay and no
    warmup (NVIDIA/ngpt train.py); the baseline keeps the recipe's."""
    pts = dict((name, over) for name, over, _ in M._points(_config(), [0]))
    over = pts[M._variant("ngpt", _config().ngpt_lr)]
    assert over["model.placement"] == "ngpt" and over["model.norm"] == "none"
    assert over["weight_decay"] == 0.0 and over["warmup"] == 0
    assert "model.placement" not in pts[M._variant("baseline", _config().baseline_lr)]
    E.configure(M, "tiny").base.with_overrides({k: v for k, v in over.items()
                                                if k.startswith("model.")})


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="placement 'pre'"):
        E.configure(M, "tiny", overrides={"base.model.placement": "post"})
    with pytest.raises(ValueError, match="baseline_lr: one of lr_grid"):
        E.configure(M, "tiny", overrides={"baseline_lr": 0.5})
    with pytest.raises(ValueError, match="lr_grid: at least three"):
        E.configure(M, "tiny", overrides={"lr_grid": (1e-2, 3e-2)})
    with pytest.raises(ValueError, match="seeds: at least 2"):
        E.configure(M, "tiny", overrides={"seeds": 1})
    with pytest.raises(ValueError, match="ngpt_lr"):
        E.configure(M, "tiny", overrides={"ngpt_lr": 0.0})
