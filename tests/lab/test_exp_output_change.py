"""The output-change experiment: at its tiny size the direction of the effect (Post-LN's change
grows with depth far more than Pre-LN's, DeepNorm's stays flat, Post-LN's curve is better fitted
by a line than by a logarithm), the premise gate both ways, and on constructed curves that the
model comparison tells a logarithm from a line."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import stats as S
from normlab.lab.experiments import output_change as O

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("output-change", size="tiny", seed=0).result
    return _CACHE["r"]


def _rise(d, p):
    v = np.asarray(d["per_seed"][p])
    return np.log(v[:, -1] / v[:, 0])  # ln(change at the deepest / at the shallowest), per seed


def test_post_ln_grows_with_depth_far_more_than_pre_ln_and_deepnorm_stays_flat():
    d = tiny().data
    post, pre, dn = (_rise(d, p) for p in ("post", "pre", "deepnorm"))
    assert S.paired_interval(post, pre).lo > 0  # Post-LN's change rises more, seed by seed
    assert np.all(np.abs(dn) < np.log(O.RISE_MIN))  # DeepNorm: within 2x from N=2 to N_max
    top = np.log(np.asarray(d["per_seed"]["post"])[:, -1] / np.asarray(d["per_seed"]["pre"])[:, -1])
    assert top.mean() > 0  # Post-LN above Pre-LN at the deepest stack
    N = np.asarray(d["sublayers"], dtype=float)
    lin = S.form_comparison(N, d["per_seed"]["post"], claimed=O._linear, other=O._log)
    assert lin.mean > 0  # Post-LN: a line fits better than a logarithm


def test_premise_gates_the_verdict_both_ways():
    r = tiny()
    premise = [c for c in r.checks if c.kind == E.PREMISE]
    assert len(premise) == 1 and premise[0].passed is True  # the tiny stacks show the growth
    assert r.verdict != E.NOT_TESTED
    d = dict(r.data)
    post = np.asarray(d["per_seed"]["post"])
    flat = post[:, :1] * np.exp(0.01 * np.arange(post.shape[1]))  # Post-LN no longer grows
    d["per_seed"] = {**d["per_seed"], "post": flat}
    checks = O.judge(d, E.configure(O, "tiny", 0, None))
    premise = next(c for c in checks if c.kind == E.PREMISE)
    assert premise.passed is False and E.verdict_of(checks) == E.NOT_TESTED


def test_deepnorm_s_bound_is_a_derivation_and_four_claims_count():
    """DeepNorm's alpha and beta make its output about LN(alpha x0) at initialization
    (lab-audit.md row 3): its row is decided but counted apart; Liu et al.'s four rows count."""
    from normlab.lab import register

    r = tiny()
    kinds = {c.id: c.kind for c in r.checks}
    assert kinds["deepnorm-output-change-bounded"] == E.DERIVATION
    assert sorted(i for i, k in kinds.items() if k == E.CLAIM) == [
        "post-ln-amplifies-more-than-pre-ln", "post-ln-output-change-linear-in-depth",
        "post-to-pre-ln-gap-widens-with-depth", "pre-ln-output-change-logarithmic-in-depth"]
    register.validate(O)
    first = {}
    for a in sorted(O.AMENDMENTS, key=lambda a: a.date):
        first.setdefault(a.id, a)
    # the premise and the widening row came after the first result: not in its tally
    assert first["post-ln-output-change-grows-with-depth"].before == {"kind": None}
    assert first["deepnorm-output-change-bounded"].before["kind"] == E.CLAIM


@pytest.mark.parametrize("shape, passes", [("log", True), ("linear", False)])
def test_the_model_comparison_tells_a_logarithm_from_a_line(shape, passes):
    N = np.array([2, 4, 10, 20, 50, 100, 200], dtype=float)
    rng = np.random.default_rng(50000)
    f = np.log(N) if shape == "log" else N / 40
    pre = 0.05 + 0.05 * f * np.exp(rng.normal(0, 0.05, (12, N.size)))
    post = 0.04 * N * np.exp(rng.normal(0, 0.05, (12, N.size)))
    dn = 0.013 * np.exp(rng.normal(0, 0.02, (12, N.size)))
    per = {"post": post, "pre": pre, "deepnorm": dn}
    data = {"sublayers": N.astype(int).tolist(), "per_seed": per,
            "mean": {p: v.mean(0) for p, v in per.items()},
            "sem": {p: S.standard_error(v) for p, v in per.items()}}
    cfg = E.configure(O, "quick", 0, None)
    row = next(c for c in O.judge(data, cfg) if c.claim.startswith("Pre-LN's output change"))
    assert row.form == E.MODEL_COMPARISON and row.passed is passes


def test_config_refuses_what_cannot_be_fitted_or_judged():
    with pytest.raises(ValueError, match="placements"):
        O.validate(O.Config(placements=("post", "pre")))
    with pytest.raises(ValueError, match="increasing"):
        O.validate(O.Config(sublayers=(2, 4)))
    O.validate(O.Config(placements=O.PLACEMENTS))  # admin may be added (the full size)


def test_the_placements_draws_made_once_equal_each_placement_drawing_its_own():
    from normlab.lab.experiments._setups import _Tape, output_change, output_changes

    kw = dict(d=16, n_heads=2, seq_len=8, inputs=2, delta_std=0.02, seed=3)
    placements = ("post", "pre", "deepnorm", "admin")  # deepnorm replays them at another gain
    shared = output_changes(placements, 6, **kw)
    for p in placements:  # each its own np.random.default_rng([seed, N]): NumPy's normal
        alone = output_change(p, 6, **kw)
        assert np.array(shared[p]).tobytes() == np.array(alone).tobytes(), p
    tape = _Tape([0, 1])
    tape.normal(0.0, 2.0, (3, 2))
    with pytest.raises(RuntimeError, match=r"normal\(2, 3\) asked, normal\(3, 2\) recorded"):
        tape.rewind().normal(0.0, 1.0, (2, 3))
