"""gradients-at-init's register: which rows count, and the per-layer 'grows' rule that must clear
the band in which the same experiment calls a profile flat, on constructed gradient norms."""

import numpy as np
import pytest

from normlab.lab import register as reg
from normlab.lab.contract import CLAIM, DERIVATION, NOT_REPRODUCED, PARTLY
from normlab.lab.experiments import gradients_at_init as G


def _data(post_layer_slope: float, seeds: int = 24, seed: int = 50000) -> dict:
    """Norms whose log-log slopes are known: the last layer flat (Post-LN) and as L^-1/2
    (Pre-LN); per layer Post-LN as l^post_layer_slope, Pre-LN as l^-0.46; a little noise."""
    rng = np.random.default_rng(seed)
    depths = [6, 8, 12, 24, 48]
    L, layers = np.array(depths, float), np.arange(1, 13, dtype=float)
    noise = lambda n: np.exp(rng.normal(0, 0.02, (seeds, n)))  # noqa: E731
    last = {"post": 0.45 * noise(len(depths)), "pre": 0.45 * L**-0.5 * noise(len(depths))}
    prof = {"post": 0.3 * layers**post_layer_slope * noise(12),
            "pre": 0.3 * layers**-0.46 * noise(12)}
    return {"depths": depths, "last_per_seed": last,
            "last": {p: v.mean(0) for p, v in last.items()}, "profile_per_seed": prof,
            "profile": {p: v.mean(0) for p, v in prof.items()}, "profile_depth": 12}


def _rows(post_layer_slope: float) -> dict:
    checks = G.judge(_data(post_layer_slope), G.Config())
    reg.check_rows(G, checks, "quick")  # every row keeps to its record
    return {c.id: c for c in checks}


def test_the_theorem_s_consequences_are_derivations_and_three_rows_count():
    rows = _rows(0.3)
    assert {i for i, c in rows.items() if c.kind == DERIVATION} == {
        "pre-ln-last-layer-gradient-shrinks-with-depth",
        "post-ln-last-layer-gradient-above-pre-ln"}
    assert {i for i, c in rows.items() if c.kind == CLAIM} == {
        "post-ln-last-layer-gradient-independent-of-depth", "post-ln-gradient-grows-with-layer",
        "pre-ln-gradient-flat-across-layers"}
    assert all(rows[i].passed for i in rows if rows[i].kind == DERIVATION)


@pytest.mark.parametrize("slope, passed", [(0.3, True), (0.1, False), (0.15, None)])
def test_grows_with_the_layer_must_clear_the_flat_band(slope, passed):
    """A per-layer slope of 0.1 grows, but inside the 0 +- 0.15 band the Pre-LN row calls flat:
    it fails; 0.3 clears it; a slope on the edge is inconclusive."""
    row = _rows(slope)["post-ln-gradient-grows-with-layer"]
    assert row.threshold == [G.FLAT] and row.side == "above" and row.passed is passed


def test_the_verdict_as_amended_reads_the_committed_intervals():
    """Re-judged from the committed intervals (8ed4d62): at quick the Post-LN slope and the
    per-layer growth straddle their edges and Pre-LN's flat fails, so no counted row passes."""
    from normlab.lab import stats
    from normlab.lab.contract import Check, verdict_of

    records = {r.id: r for r in G.REGISTER}
    slope, grows, flat = ("post-ln-last-layer-gradient-independent-of-depth",
                          "post-ln-gradient-grows-with-layer", "pre-ln-gradient-flat-across-layers")

    def state(rec, lo, hi):
        r, iv = records[rec], stats.Interval((lo + hi) / 2, lo, hi, 20, "t")
        return (stats.within(iv, *r.margin) if len(r.margin) == 2
                else stats.decide(iv, r.margin[0], r.side))

    def verdict(states):
        return verdict_of([Check(claim="c", published="", measured="", rule="", passed=p,
                                 inconclusive=p is None) for p in states])

    quick = [state(slope, 0.0234273768530166, 0.15701018459550217),
             state(grows, 0.08310820530788522, 0.21134535105811597),
             state(flat, -0.49768475118050975, -0.444714008529237)]
    full = [state(slope, 0.0814338485695501, 0.11745480820349341),
            state(grows, 0.13554942170338463, 0.18016278191136975),
            state(flat, -0.47354701746274713, -0.4553488348556897)]
    assert quick == [None, None, False] and full == [True, None, False]
    assert verdict(quick) == NOT_REPRODUCED and verdict(full) == PARTLY


def test_the_register_validates_and_names_every_amended_record():
    reg.validate(G)
    ids = {r.id for r in G.REGISTER}
    assert {a.id for a in G.AMENDMENTS} <= ids
    first = {}
    for a in sorted(G.AMENDMENTS, key=lambda a: a.date):
        first.setdefault(a.id, a)
    # as first registered: six seeds at quick, Pre-LN's flat profile shown
    assert first["pre-ln-gradient-flat-across-layers"].before["kind"] == "shown"
    assert all("quick" in a.results_before for a in first.values())
