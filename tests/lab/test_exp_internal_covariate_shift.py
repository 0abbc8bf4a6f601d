"""internal-covariate-shift: the MLP's hand-written backward (float64 finite differences, every
arm, the noise frozen), the direction of the covariate shift at the tiny size, and a diverged
run that is recorded as its first loss while the checks still evaluate."""

import dataclasses

import numpy as np
import pytest

from normlab.lab import framework as F
from normlab.lab import stats
from normlab.lab.experiments import internal_covariate_shift as X
from normlab.testing import gradcheck

SMALL = X.Config(depth=2, width=5, context=1, batch=6)


@pytest.mark.parametrize("arm", X.ARMS)
def test_the_mlp_backward_matches_finite_differences(arm, rng):
    net = X._Net(arm, SMALL, 7, 4, seed=3, dtype=np.float64)
    x = rng.normal(size=(6, 7))
    y = rng.integers(0, 4, size=6)
    names = list(net.params)

    def forward(*values):
        for n, v in zip(names, values):
            net.params[n][...] = v
        for i, m in enumerate(net.noise):  # the same noise draw at every evaluation
            m.rng = np.random.default_rng([9, i])
        return np.array(net.forward(x, y)), None

    def backward(dout, cache):
        net.backward()
        return tuple(float(dout) * net.grads[n].copy() for n in names)

    values = {n: p.copy() for n, p in net.params.items()}
    for n in values:  # random gains and shifts, never the ones and zeros they start at
        if values[n].ndim == 1:
            values[n] = rng.normal(1.0 if n.endswith("weight") else 0.0, 0.3, values[n].shape)
    report = gradcheck(forward, backward, values, rng=rng, rtol=1e-5)
    assert report.passed, str(report)


def test_a_probe_leaves_the_weights_and_the_training_noise_alone():
    cfg = dataclasses.replace(SMALL, probe_steps=(0.1, 0.4))
    net = X._Net("noisy", cfg, 7, 4, seed=1)
    before = {k: p.copy() for k, p in net.params.items()}
    rngs = [m.rng for m in net.noise]
    x = np.eye(7, dtype=np.float32)[np.arange(6) % 7]
    out = X._probe(net, x, np.arange(6) % 4, cfg.probe_steps, freeze=0)
    assert all(np.array_equal(before[k], p) for k, p in net.params.items())
    assert [m.rng for m in net.noise] == rngs
    assert out["loss_range"] > 0 and out["grad_change"] > 0 and out["beta"] > 0


@pytest.fixture(scope="module")
def tiny():
    return F.run_experiment("internal-covariate-shift", size="tiny", seed=0).result


def test_tiny_direction_of_the_covariate_shift(tiny):
    """Noise after BatchNorm moves the next layer's input statistics more than the standard
    network's drift, and BatchNorm alone less (the premise of Santurkar et al.'s test)."""
    per = tiny.data["per"]
    noisy = X.noisy_name(X.SIZES["tiny"]["noises"][-1])
    for s, b, n in zip(per["standard"]["log_shift"], per["batchnorm"]["log_shift"],
                       per[noisy]["log_shift"]):
        assert b < s < n
    assert len(tiny.data["seeds"]) >= 3 and all(
        len(per[a]["train_loss"]) == 3 for a in tiny.data["arms"])
    premise = next(c for c in tiny.checks if c.premise)
    assert premise.passed is True and tiny.verdict != F.NOT_TESTED


def test_the_premise_gates_the_verdict_both_ways(tiny):
    """When the noise does not shift the layer inputs more than the standard network's own
    drift, Santurkar's test is not made: the verdict is 'not tested', and that noise size's
    claim row (a claim by its record) is not judged and not counted."""
    import copy

    data = copy.deepcopy(tiny.data)
    noisy = data["arms"][-1]
    data["per"][noisy]["log_shift"] = [v - 5.0 for v in data["per"]["standard"]["log_shift"]]
    checks = X.judge(data, F.configure(X, "tiny"))
    assert F.verdict_of(checks) == F.NOT_TESTED
    row = next(c for c in checks if "still trains faster" in c.claim)
    assert row.kind == F.CLAIM and row.status == "shown" and not row.counted
    assert row.id == X.noisy_id(noisy)
    from normlab.lab import register

    register.check_rows(X, checks, "tiny")  # the undecided row keeps to its record


def test_the_register_holds_every_row_and_the_first_registration(tiny):
    """Every row names its record; as first registered there was one noise size, (1, 2), and the
    shift premise was a counted claim; the other two sizes came with the grid."""
    from normlab.lab import register

    register.validate(X)
    kinds = {r.id: r.kind for r in X.REGISTER}
    assert all(kinds[c.id] == c.kind for c in tiny.checks)
    assert kinds["largest-noise-shifts-layer-inputs-more"] == F.PREMISE
    first = {}
    for a in sorted(X.AMENDMENTS, key=lambda a: a.date):
        first.setdefault(a.id, a)
    assert first["largest-noise-shifts-layer-inputs-more"].before["kind"] == F.CLAIM
    assert first[X.noisy_id("noisy 1/2")].results_before["quick"]["status"] == "FAIL"
    assert [first[X.noisy_id(f"noisy {m}")].before for m in ("0.25/1.25", "0.5/1.5")] == [
        {"kind": None}, {"kind": None}]


def test_the_probe_moves_every_arm_the_same_distance():
    """The landscape is probed at step lengths along -g/||g||: the move's length is the
    probe's, whatever the gradient's norm."""
    cfg = dataclasses.replace(SMALL, probe_steps=(0.3,))
    net = X._Net("standard", cfg, 7, 4, seed=1, dtype=np.float64)
    x = np.eye(7)[np.arange(6) % 7]
    y = np.arange(6) % 4
    before = {k: p.copy() for k, p in net.params.items()}
    seen = []
    real = net.forward

    def spy(xx, yy):
        seen.append(np.sqrt(sum(float(np.sum((net.params[k] - before[k]) ** 2))
                                for k in before)))
        return real(xx, yy)

    net.forward = spy
    X._probe(net, x, y, cfg.probe_steps, freeze=0)
    assert seen[0] == 0.0 and seen[1] == pytest.approx(0.3, rel=1e-9)


def test_a_diverged_run_counts_as_its_first_loss_and_the_checks_still_evaluate():
    cfg = F.configure(X, "tiny", overrides={"lr": 1e4, "seeds": 2})
    data = X.measure(cfg, F.RunContext())
    runs = data["runs"]
    assert any(r["diverged"] for r in runs)
    for r in runs:
        if r["diverged"]:
            assert r["train_loss"] == r["loss0"] and np.isfinite(r["loss0"])
    result = F.result_of(X, cfg, data, "tiny")
    assert result.verdict in F.VERDICTS
    assert all(c.passed in (True, False, None) for c in result.checks)


def test_the_noise_is_in_units_of_the_activations_spread():
    """Santurkar et al. add the noise to the BatchNorm output, a unit-variance activation: a
    channel twice as spread gets twice the shift, the same draws (y(k x) = k y(x))."""
    rng = np.random.default_rng(3)
    x = rng.normal(0.5, 1.0, size=(16, 5))
    outs = []
    for k in (1.0, 3.0):
        m = X.RelativeShiftNoise(1.0, 2.0, 0.1, rng=np.random.default_rng(11))
        outs.append(m(k * x))
    np.testing.assert_allclose(outs[1], 3.0 * outs[0], rtol=1e-12)
    plain = X.ShiftNoise(1.0, 2.0, 0.1, rng=np.random.default_rng(11))(x / x.std(axis=0))
    np.testing.assert_allclose(outs[0], plain * x.std(axis=0), rtol=1e-12)


def test_the_probe_steps_eta_g_as_the_paper_and_equal_lengths_beside_it():
    cfg = dataclasses.replace(SMALL, probe_steps=(0.1, 0.4))
    net = X._Net("batchnorm", cfg, 7, 4, seed=1)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 7)).astype(np.float32), rng.integers(0, 4, size=6)
    p = X._probe(net, x, y, cfg.probe_steps, freeze=0)
    assert {"loss_range", "loss_range_eta", "grad_change", "grad_change_eta"} <= set(p)
    # eta' g moves ||g|| times as far as the equal-length step: the betas are per unit length
    assert p["grad_norm"] > 0 and p["beta_eta"] > 0 and p["beta"] > 0


def test_rows_the_quick_pilot_cannot_resolve_are_not_judged_there():
    quick = F.configure(X, "quick")
    from normlab.lab.experiments import _pilots as P

    pilots = X.PILOTS[quick.steps]
    assert set(pilots) == {X.noisy_id("noisy 0.5/1.5"), "batchnorm-gradient-more-predictive"}
    assert not any(P.resolves(p, quick.seeds, X.MARGIN) for p in pilots.values())
    row = F.Check.superiority(claim="c", published="p", side="above",
                              interval=stats.Interval(0.03, -0.01, 0.07, 5, "m"),
                              id="batchnorm-gradient-more-predictive")
    gated = P.gate(row, pilots[row.id], quick.seeds, X.MARGIN, "d")
    assert gated.kind == F.CLAIM and gated.passed is None and not gated.counted
