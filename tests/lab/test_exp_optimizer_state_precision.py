"""optimizer-state-precision: the arms' policies are amp_bf16 with one role changed, the tiny size
end to end (premise first: the arms of one role run only when both roles in bf16 fall behind),
the rows on hand-made data where each verdict can come out, and bad configs refused by name."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.contract import Check
from normlab.lab.experiments import optimizer_state_precision as M
from normlab.precision import get_policy
from normlab.precision.policy import PrecisionPolicy


def test_each_arm_is_amp_bf16_with_its_roles_in_bf16():
    pol = M.policies()
    assert pol["fp32 state"] == "amp_bf16"
    amp = get_policy("amp_bf16")
    got = {a: PrecisionPolicy.from_json(pol[a]) for a in M.ARMS[1:]}
    for arm, roles in (("bf16 both", {"optimizer", "master"}), ("bf16 master", {"master"}),
                       ("bf16 moments", {"optimizer"})):
        p = got[arm]
        for role in ("params", "compute", "accumulate", "activations", "gradients",
                     "communication", "optimizer", "master"):
            want = "bfloat16" if role in roles else str(getattr(amp, role))
            assert str(getattr(p, role)) == want, (arm, role)
        assert p.loss_scaling == amp.loss_scaling


def data(**loss) -> dict:
    base = [1.90, 1.92, 1.88]
    d = {"seeds": [0, 1, 2], "loss": {"fp32 state": base}}
    for arm, gap in loss.items():
        d["loss"][arm] = [b + g for b, g in zip(base, gap, strict=True)]
    return d


def verdict(d: dict) -> tuple[str, list[Check]]:
    rows = M.judge(d, E.configure(M, "quick"))
    register.check_rows(M, rows, "quick")
    return E.verdict_of(rows), rows


def test_each_verdict_can_come_out_on_hand_made_data():
    both = {"bf16 both": [0.10, 0.11, 0.12]}
    v, rows = verdict(data(**both, **{"bf16 master": [0.08, 0.09, 0.10],
                                      "bf16 moments": [0.05, 0.06, 0.07]}))
    assert v == E.REPRODUCED
    row = next(c for c in rows if c.id == "bf16-master-falls-behind")
    assert row.estimate == pytest.approx(0.09)
    assert (row.form, row.threshold, row.side) == ("superiority", [0.02], "above")
    moments_track = {"bf16 master": [0.08, 0.09, 0.10], "bf16 moments": [0.0, 0.001, -0.001]}
    assert verdict(data(**both, **moments_track))[0] == E.PARTLY
    neither = {"bf16 master": [0.0, 0.002, 0.001], "bf16 moments": [0.0, 0.001, -0.001]}
    assert verdict(data(**both, **neither))[0] == E.NOT_REPRODUCED
    wide = {"bf16 master": [0.0, 0.09, 0.05], "bf16 moments": [-0.02, 0.08, 0.03]}
    assert verdict(data(**both, **wide))[0] == E.INCONCLUSIVE


def test_premise_first_bf16_state_that_tracks_float32_tests_nothing():
    v, rows = verdict({**data(**{"bf16 both": [0.0, 0.001, -0.001]}), "tested": False})
    assert v == E.NOT_TESTED
    claims = [c for c in rows if c.kind == E.CLAIM]
    assert [c.id for c in claims] == ["bf16-master-falls-behind", "bf16-moments-fall-behind"]
    assert all(c.passed is None and c.measured.startswith("not run") for c in claims)


def test_tiny_runs_end_to_end_and_the_single_roles_wait_for_the_premise(monkeypatch, tmp_path):
    r = E.run_experiment("optimizer-state-precision", size="tiny", seed=0, executor="serial",
                         plots=False).result
    premise = next(c for c in r.checks if c.kind == E.PREMISE)
    assert set(r.data["loss"]) == set(M.ARMS if premise.passed else M.ARMS[:2])
    rec = M.RECORDS["bf16-state-falls-behind-here"]
    monkeypatch.setattr(M, "RECORDS", {**M.RECORDS, rec.id: dataclasses.replace(
        rec, margin=(-50.0,))})
    monkeypatch.setattr(M, "REGISTER", tuple(M.RECORDS[x.id] for x in M.REGISTER))
    every = E.run_experiment("optimizer-state-precision", size="tiny", seed=0,
                             executor="serial", plots=False).result
    assert set(every.data["loss"]) == set(M.ARMS)
    assert every.data["loss"]["fp32 state"] == r.data["loss"]["fp32 state"]  # seeded
    assert all(len(v) == 2 and np.all(np.isfinite(v)) for v in every.data["loss"].values())
    files = M.plot(every, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000
    register.validate(M)


@pytest.mark.parametrize("overrides,message", [
    ({"base.precision": "amp_bf16"}, "base: precision must be left at 'fp32'"),
    ({"seeds": 1}, "seeds: at least 2"),
])
def test_bad_configs_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        E.configure(M, "tiny", overrides=overrides)
