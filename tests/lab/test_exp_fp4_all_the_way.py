"""fp4-all-the-way at its tiny size (seconds, in this process) and its probe: the measured run is
bit for bit the unmeasured one, the noise is the FP4 step's gradient minus the full-precision
one on the same batch, the switch to bf16 changes only the rounding; judge's rows on hand-made
data where each verdict can come out; the FP4 arm is the library's nvfp4_recipe; bad configs
refused."""

import json
import math

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import _fp4_noise as N
from normlab.lab.experiments import fp4_all_the_way as M
from normlab.precision import PrecisionPolicy, nvfp4_recipe
from normlab.train import TrainConfig
from normlab.train.trainer import Trainer, train


def _tiny(steps: int = 8, precision: str | None = None) -> TrainConfig:
    cfg = E.configure(M, "tiny").base
    return cfg.with_overrides({"steps": steps, "eval_interval": steps,
                               "precision": precision or M.fp4_policy()})


def test_the_probe_leaves_the_run_as_it_is():
    cfg = _tiny()
    measured = N.train_measured({"config": cfg.to_dict(), "every": 2})
    plain = train(cfg)
    assert measured["nll"] == [h["nll"] for h in plain.history]
    assert measured["val_loss"] == plain.final_val_loss
    assert measured["steps_measured"] == [0, 2, 4, 6]
    assert all(n > 0 for n in measured["noise_norm"])


def _grads(trainer: Trainer, names: list[str]) -> dict[str, np.ndarray]:
    """The trainer's gradients of its first batch at its current weights (no update)."""
    x, y = trainer.next_batch()
    trainer.model.forward(x, y)
    trainer._zero_grads()
    trainer.model.backward(1.0)
    return {n: trainer.grads[n].astype(np.float64) for n in names}


def test_the_noise_is_the_fp4_gradient_minus_the_full_precision_one():
    # at full precision the two gradients are one computation: no noise
    t = Trainer(_tiny(precision="fp32"))
    rec = N.measured_step(t, N.quantized_names(t))
    assert rec["noise_norm"] == 0.0 and rec["grad_norm_fp"] > 0
    # under FP4: against two fresh runs of the same seed, one FP4 (the same batch and the same
    # stochastic draws), one at full precision given the FP4 run's (bf16-stored) weights
    probed = Trainer(_tiny())
    names = N.quantized_names(probed)
    assert names and all(n.startswith("blocks.") for n in names)
    rec = N.measured_step(probed, names)
    q_run, fp_run = Trainer(_tiny()), Trainer(_tiny(precision="fp32"))
    for p, q in zip(fp_run.params.values(), q_run.params.values(), strict=True):
        p[...] = q
    gq, g = _grads(q_run, names), _grads(fp_run, names)
    norm = math.sqrt(sum(float(np.vdot(g[n], g[n])) for n in names))
    noise = math.sqrt(sum(float(np.vdot(gq[n] - g[n], gq[n] - g[n])) for n in names))
    assert rec["grad_norm_fp"] == pytest.approx(norm, rel=1e-6)
    assert rec["noise_norm"] == pytest.approx(noise, rel=1e-6)
    assert 0 < noise < norm


def test_switching_to_bf16_keeps_the_weights_and_changes_the_rounding():
    cfg = _tiny(steps=10)
    fp4 = N.train_measured({"config": cfg.to_dict()})
    qaf = N.train_measured({"config": cfg.to_dict(), "switch_at": 6, "switch_to": "amp_bf16"})
    assert qaf["nll"][:6] == fp4["nll"][:6]
    assert qaf["nll"][6:] != fp4["nll"][6:]
    t = Trainer(cfg)
    with pytest.raises(ValueError, match="loss scaler"):
        N.switch_precision(t, "amp_fp16")


def test_the_tiny_size_runs_end_to_end(tmp_path):
    r = E.run_experiment("fp4-all-the-way", size="tiny", seed=0, executor="serial",
                         plots=False).result
    d = r.data
    cfg = E.configure(M, "tiny")
    assert set(d["loss"]) == set(M.ARMS)
    assert all(len(v) == cfg.seeds for v in d["loss"].values())
    assert all(len(n) == cfg.base.steps for n in d["nll"]["fp4"])
    # the QAF arm is the FP4 arm up to its switch (same seed, same batches, same draws)
    for f, q in zip(d["nll"]["fp4"], d["nll"]["qaf"], strict=True):
        assert f[:cfg.qaf_at] == q[:cfg.qaf_at]
    register.check_rows(M, r.checks, "tiny")
    assert [c.id for c in r.checks][:3] == list(M._PREMISES)
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def _probe(start: float, end: float, n: int = 20, every: int = 10) -> dict:
    """A probe whose ratio falls linearly from ``start`` to ``end``."""
    ratio = np.linspace(start, end, n)
    return {"steps_measured": list(range(0, n * every, every)),
            "grad_norm": list(ratio), "noise_norm": [1.0] * n}


def _data(end_ratio: float, fp4_gap: float, qaf_gap: float, kink: float,
          seeds: int = 8) -> dict:
    """Hand-made runs of 200 steps: bf16's NLL falls; FP4's gap to it grows by ``kink``
    nats/100 steps more after step 100 than before; the final losses offset by the gaps."""
    rng = np.random.default_rng(0)
    t = np.arange(200)
    bf16: list[list[float]] = []
    fp4: list[list[float]] = []
    loss: dict[str, list[float]] = {"bf16": [], "fp4": [], "qaf": []}
    for _ in range(seeds):
        b = 3.0 - t / 100 + 0.01 * rng.standard_normal(200)
        gap = 0.0001 * t + kink / 100 * np.clip(t - 100, 0, None)
        bf16.append(list(b))
        fp4.append(list(b + gap + 0.001 * rng.standard_normal(200)))
        base = 2.0 + 0.02 * rng.standard_normal()
        loss["bf16"].append(base)
        loss["fp4"].append(base + fp4_gap + 0.002 * rng.standard_normal())
        loss["qaf"].append(base + qaf_gap + 0.002 * rng.standard_normal())
    probe = [_probe(4.5, end_ratio + 0.01 * i) for i in range(seeds)]
    return {"seeds": list(range(seeds)), "steps": 200, "loss": loss,
            "nll": {"bf16": bf16, "fp4": fp4, "qaf": fp4}, "probe": probe}


@pytest.mark.parametrize("kink, qaf_gap, verdict", [
    (0.05, 0.0, E.REPRODUCED),        # less effective after the crossing, QAF recovers
    (-0.05, 0.08, E.NOT_REPRODUCED),  # the gap grows slower after, QAF recovers nothing
    (0.05, 0.08, E.PARTLY),           # the threshold holds, QAF does not recover
    (0.0, 0.02, E.INCONCLUSIVE),      # both on their margins
])
def test_judge_on_hand_made_data(kink, qaf_gap, verdict):
    cfg = E.configure(M, "full")
    rows = M.judge(_data(1.0, 0.1, qaf_gap, kink), cfg)
    register.check_rows(M, rows, "full")
    assert E.verdict_of(rows) == verdict


@pytest.mark.parametrize("end_ratio, fp4_gap", [(2.0, 0.1), (1.0, 0.0)])
def test_judge_when_a_premise_fails_on_hand_made_data(end_ratio, fp4_gap):
    rows = M.judge(_data(end_ratio, fp4_gap, 0.0, 0.05), E.configure(M, "full"))
    register.check_rows(M, rows, "full")
    assert E.verdict_of(rows) == E.NOT_TESTED
    claims = [c for c in rows if c.kind == E.CLAIM]
    assert [c.passed for c in claims] == [None, None]
    assert all(c.measured.startswith("not judged: a premise did not hold") for c in claims)


def test_the_crossing_and_the_slope_change():
    p = _probe(3.0, 1.0, n=11)  # ratio 3.0, 2.8, ..., 1.0 at steps 0, 10, ..., 100
    steps, m = M.smoothed_ratio(p, 1)
    assert steps[0] == 0 and m[0] == pytest.approx(3.0)
    assert M.crossing(p, 1) == 70  # 1.6 < sqrt(3) < 1.8
    assert M.crossing(p, 3) == 80  # the mean of 2.0, 1.8, 1.6 is above; of 1.8, 1.6, 1.4 below
    assert M.crossing(_probe(3.0, 2.0), 1) is None
    t = np.arange(100)
    bf16 = [0.0] * 100
    fp4 = [float(v) for v in 0.001 * t + 0.002 * np.clip(t - 50, 0, None)]
    assert M.slope_change(fp4, bf16, 50, 20) == pytest.approx(0.2)


def test_the_fp4_arm_is_the_library_recipe():
    policy = PrecisionPolicy.from_json(json.loads(M.fp4_policy()))
    assert policy == nvfp4_recipe(rht=False, two_d=False, sr=True, keep_layers=("head",))
    assert policy.name == "nvfp4-rht-2d+keep1"


def test_the_full_size_seed_count_and_its_amendment():
    # 10 seeds at the full size since 2026-12-07 (6 before), the quick size's 3 unchanged; every
    # record that reads the seeds is amended, with the committed full-size row where there was one
    assert E.configure(M, "full").seeds == 10 and E.configure(M, "quick").seeds == 3
    amended = {a.id: a for a in M.AMENDMENTS if a.date == "2026-12-07"}
    assert set(amended) == {r.id for r in M.REGISTER if r.seeds}
    assert all(a.remeasure and a.commit == "27349cc" for a in amended.values())
    ends = amended["ratio-ends-below-threshold"].results_before["full"]
    assert ends["status"] == "inconclusive" and ends["interval"][1] > M.SQRT3 > ends["interval"][0]
    for r in M.REGISTER:
        if r.seeds_from:
            assert "10 seeds at the full size" in r.seeds_from
            assert "6 seeds at the full size" in amended[r.id].before["seeds_from"]
    register.validate(M)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="multiples of 16"):
        E.configure(M, "tiny", overrides={"base.model.d_model": 24, "base.model.n_heads": 2})
    with pytest.raises(ValueError, match=r"base\.precision"):
        E.configure(M, "tiny", overrides={"base.precision": "amp_bf16"})
    with pytest.raises(ValueError, match="qaf_at"):
        E.configure(M, "tiny", overrides={"qaf_at": 24})
    with pytest.raises(ValueError, match="seeds"):
        E.configure(M, "tiny", overrides={"seeds": 1})
    with pytest.raises(ValueError, match="window"):
        E.configure(M, "tiny", overrides={"window": 1})
    register.validate(M)
