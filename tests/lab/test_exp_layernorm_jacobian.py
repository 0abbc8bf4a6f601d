"""The layernorm-jacobian experiment at its tiny size: the power iteration on normlab's VJPs
against the closed forms (identities), and the direction of the mechanism: the final LayerNorm's
Jacobian shrinks with depth in Pre-LN and not in Post-LN."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab.experiments import layernorm_jacobian as lj


@pytest.fixture(scope="module")
def result():
    return E.run_experiment("layernorm-jacobian", size="tiny", seed=0).result


def test_power_iteration_meets_the_closed_forms(result):
    for r in result.data["unit"]:
        assert r["power"] == pytest.approx(r["closed"], rel=1e-9)
        assert r["power"] <= r["sqrt_d_over_centred"] * (1 + 1e-12)  # Lemma 3, exactly
    for r in result.data["gain"]:
        assert r["power"] == pytest.approx(r["svd"], rel=1e-6) and r["svd"] <= r["bound"] * 1.0001
    assert all(c.passed for c in result.checks if c.kind == E.IDENTITY)


def test_pre_lns_final_norm_shrinks_with_depth_post_lns_does_not(result):
    s = result.data["stream"]
    pre, post = (np.asarray(s[p]["jac"]).mean(axis=0) for p in ("pre", "post"))
    assert np.all(np.diff(pre) < 0) and pre[-1] < 0.7 * pre[0]
    assert abs(np.log(post[-1] / post[0])) < 0.2
    sq = np.asarray(s["pre"]["sq"]).mean(axis=0)
    assert np.all(np.diff(sq) > 0)  # the stream the norm reads grows (Lemma 2)


def test_a_wrong_backward_is_caught(monkeypatch):
    """The identity rows test normlab's backward: a backward off by 1% fails them."""
    real = lj.layer_norm_backward
    monkeypatch.setattr(lj, "layer_norm_backward",
                        lambda v, cache: (1.01 * real(v, cache)[0],) + real(v, cache)[1:])
    config = E.configure(lj, "tiny", overrides={"depths": (2, 4), "seeds": 2})
    checks = lj.judge(lj.measure(config, E.RunContext()), config)
    assert not checks[1].passed  # ||J_LN|| against the closed form



def test_the_stream_is_counted_once(result):
    """The depth slopes follow from Lemma 3 and the stream's growth (Lemma 2, a derivation in
    residual-growth too): derivations here, so no row of this experiment is a counted claim."""
    assert not any(c.counted for c in result.checks)
    assert result.verdict == E.HOLDS
    slopes = [c for c in result.checks if c.form]
    assert sorted(c.id for c in slopes) == [
        "post-ln-last-layernorm-jacobian-independent-of-depth",
        "pre-ln-final-layernorm-jacobian-shrinks-with-depth"]
    assert all(c.kind == E.DERIVATION for c in slopes)


def test_the_register_holds_every_row_and_the_slopes_first_registration(result):
    from normlab.lab import register

    register.validate(lj)
    assert [c.id for c in result.checks] == [r.id for r in lj.REGISTER]
    first = {a.id: a for a in lj.AMENDMENTS if a.date == "2026-12-03"}
    # as first registered the two depth slopes were counted claims, both passing
    assert len(first) == 2 and all(a.before == {"kind": "claim"}
                                   and a.results_before["quick"]["status"] == "pass"
                                   for a in first.values())


def test_every_row_is_an_identity_a_derivation_or_shown(result):
    """No row reads as an undecided claim of the source: the uncentered-input row has no rule to
    decide and is shown context."""
    assert {c.kind for c in result.checks} <= {E.IDENTITY, E.DERIVATION, E.SHOWN}
    uncentered = next(c for c in result.checks if c.claim.startswith("For an uncentered input"))
    assert uncentered.kind == E.SHOWN and uncentered.status == "shown"
