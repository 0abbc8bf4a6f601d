"""The residual-growth experiment: at its tiny size the direction of each effect (Pre-LN's
stream grows by about d per layer, Post-LN's x^{post,5} stays at 1.5 d while it does, no norm
grows fastest), and on constructed profiles that its rules tell a linear growth from a quadratic
one and 1.5 d from another level."""

import numpy as np

from normlab.lab import framework as E
from normlab.lab import stats as S
from normlab.lab.experiments import residual_growth as R

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("residual-growth", size="tiny", seed=0).result
    return _CACHE["r"]


def test_pre_ln_grows_by_about_d_per_layer_and_post_ln_does_not():
    d = tiny().data
    layers = np.arange(1, d["n_layers"] + 1)
    pre = np.asarray(d["per_seed"]["pre"])
    slope = S.slopes(layers, pre, log=False)  # E||x_l||^2/d per layer, one per seed
    assert np.all((slope > R.SLOPE_BAND[0]) & (slope < R.SLOPE_BAND[1]))  # Lemma 2's bounds
    post5 = np.asarray(d["post5_per_seed"])
    post_slope = S.slopes(layers, post5, log=False)
    assert np.all(np.abs(post_slope) < 0.25 * slope)  # x^{post,5} does not grow with l
    assert abs(post5.mean() - 1.5) < 0.2  # ... and sits near 1.5 d
    none = np.asarray(d["profile"]["none"])
    assert none[-1] / none[0] > pre.mean(0)[-1] / pre.mean(0)[0]  # no norm grows fastest


def test_identities_and_kinds():
    """Lemma 2 checked in the lemma's own model is a derivation (lab-audit.md row 1): the four
    decided rows are counted apart, no row is a counted claim, every row names its record."""
    r = tiny()
    kinds = {c.id: c.kind for c in r.checks}
    assert kinds["chapter-aligned-sum-is-20"] == E.IDENTITY
    assert kinds["sandwich-and-deepnorm-streams"] == E.SHOWN
    assert not [c for c in r.checks if c.kind == E.CLAIM]
    decided = [c for c in r.checks if c.kind == E.DERIVATION and c.form]
    assert sorted(c.id for c in decided) == [
        "post-ln-stream-held-at-1-5-d", "pre-ln-stream-grows-linearly-not-quadratically",
        "pre-ln-stream-slope-within-lemma-bounds",
        "pre-ln-stream-within-lemma-bounds-at-every-layer"]
    assert {E.MODEL_COMPARISON, E.EQUIVALENCE, E.BAND} <= {c.form for c in decided}
    assert r.verdict == E.HOLDS


def test_the_register_holds_every_row_and_the_first_registration():
    from normlab.lab import register as reg

    reg.validate(R)
    assert {c.id for c in tiny().checks} == {r.id for r in R.REGISTER}
    first = {a.id: a for a in sorted(R.AMENDMENTS, key=lambda a: a.date) if a.date < "2026-12-07"}
    # the four rows were counted claims as first registered; the seed raise has no result before
    assert all(a.before["kind"] == "claim" and not a.results_before for a in first.values())
    derived = [a for a in R.AMENDMENTS if a.date == "2026-12-07"]
    assert len(derived) == 4 and all(a.results_before["full"]["status"] == "pass"
                                     for a in derived)


def _data(pre: np.ndarray, post5: np.ndarray) -> dict:
    """A measurement of ``len(pre)`` seeds and L layers with the given per-seed profiles."""
    L = pre.shape[1]
    layers = np.arange(1, L + 1)
    flat = np.ones(L)
    none = 1.6 ** layers
    return {"chapter": {"aligned": [20.0], "orthogonal": [2 * np.sqrt(10)]},
            "profile": {"none": none, "pre": pre.mean(0), "post": flat, "sandwich": flat,
                        "deepnorm": flat},
            "per_seed": {"pre": pre}, "post5_per_seed": post5, "post5": post5.mean(0),
            "bounds": {"lo": 1 + layers / 2, "hi": 1 + 1.5 * layers}, "n_layers": L}


def _checks(pre, post5):
    cfg = R.Config(n_layers=pre.shape[1], seeds=pre.shape[0])
    return R.judge(_data(pre, post5), cfg)


def _row(checks, start):
    hits = [c for c in checks if c.claim.startswith(start)]
    assert len(hits) == 1, (start, [c.claim for c in checks])
    return hits[0]


def test_the_form_rule_tells_linear_growth_from_quadratic():
    rng = np.random.default_rng(50000)
    layers = np.arange(1, 13)
    noise = rng.normal(0, 0.1, (24, 12))
    post5 = 1.5 + rng.normal(0, 0.02, (24, 12))
    linear = _checks(1 + layers + noise, post5)
    quad = _checks(1.5 + 0.09 * layers**2 + noise, post5)  # inside the bounds until l = 12
    grows = "Pre-LN: E||x_l||^2 grows"
    assert _row(linear, grows).passed is True and _row(linear, grows).form == E.MODEL_COMPARISON
    assert _row(quad, grows).passed is False


def test_the_equivalence_rule_reads_both_bounds():
    rng = np.random.default_rng(50001)
    layers = np.arange(1, 13)
    pre = 1 + layers + rng.normal(0, 0.1, (24, 12))
    at = _checks(pre, 1.5 + rng.normal(0, 0.02, (24, 12)))
    high = _checks(pre, 1.8 + rng.normal(0, 0.02, (24, 12)))
    low = _checks(pre, 1.2 + rng.normal(0, 0.02, (24, 12)))
    row = "Post-LN holds the stream fixed"
    assert _row(at, row).passed is True and _row(at, row).form == E.EQUIVALENCE
    assert _row(high, row).passed is False and _row(low, row).passed is False
