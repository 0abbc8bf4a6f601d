"""The training experiments warmup, dyt and norm-placement-depth at their tiny size (seconds, in
this process): the Result, the verdict rule, and the direction of the effects that are robust at
that size; the S-curve fit on known curves; the run context and the flags that pick a sweep's
executor and store."""

import argparse
import copy
import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab.cli import UsageError
from normlab.lab.experiments import dyt, norm_placement_depth
from normlab.lab.sweep.executors import check_executor, executor_from_args

NAMES = ("warmup", "dyt", "norm-placement-depth")
# rows counted at the tiny size: dyt's matches against RMSNorm and LayerNorm are judged from
# the quick size up (their pilot cannot resolve them in 40 steps), so they are shown here
MIN_COUNTED = {"warmup": 3, "dyt": 1, "norm-placement-depth": 3}
_CACHE = {}


def tiny(name):
    if name not in _CACHE:
        _CACHE[name] = E.run_experiment(name, size="tiny", seed=0, executor="serial").result
    return _CACHE[name]


@pytest.mark.parametrize("name", NAMES)
def test_result_and_verdict(name, tmp_path):
    r = tiny(name)
    assert r.name == name
    counted = [c for c in r.checks if c.counted]
    assert len(counted) >= MIN_COUNTED[name] and any(c.status == "shown" for c in r.checks)
    assert all("[" in c.measured and "(n=" in c.measured for c in counted)  # decided from an
    #                                           interval over seeds, shown beside the number
    assert r.verdict == E.verdict_of(r.checks)
    assert r.setting.startswith(E.load(name).CARD.method) and "tiny size: " in r.setting
    assert "base.steps=40" in r.setting  # the size's recipe, written from the config
    json.dumps(r.data, allow_nan=False)
    files = E.load(name).plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_norm_placement_direction():
    """Twelve blocks without any norm end worse than ReZero; DeepNorm and ReZero stay within
    the tolerance of Pre-LN (a deeper tiny config, 60 steps)."""
    m = E.load("norm-placement-depth")
    cfg = E.configure(m, "tiny", overrides={"depths": (1, 12), "base.steps": 60,
                                           "base.warmup": 12})
    r = E.evaluate(m, cfg, E.RunContext(executor="serial"), "tiny")
    none, rz = (norm_placement_depth._seeds(r.data, p)[:, -1] for p in ("none", "rezero"))
    assert np.mean(none - rz) > 0.1
    rows = {c.claim.split(" trains")[0]: c for c in r.checks}
    # within the tolerance of Pre-LN in the mean over the two seeds (an interval of n = 2 is
    # wide: t = 12.7)
    assert all(rows[p].passed is not False and rows[p].estimate < norm_placement_depth.TOL
               for p in ("DeepNorm", "ReZero"))
    # Post-LN: fine at one block (the premise), clearly worse than Pre-LN at twelve
    post, pre = (norm_placement_depth._seeds(r.data, p) for p in ("post", "pre"))
    assert np.all(post[:, -1] - pre[:, -1] > 0.1) and abs(np.mean(post[:, 0] - pre[:, 0])) < 0.1
    assert rows["Post-LN"].kind == E.PREMISE and rows["Post-LN"].passed is not False
    assert abs(rows["Post-LN"].estimate) < norm_placement_depth.TOL


def test_norm_placement_premise_gates_the_verdict_both_ways():
    """Post-LN must train when shallow before its failure when deep says anything about depth.
    The tiny size's own data (two seeds: an interval too wide to decide) leaves the premise
    undecided, so nothing is judged. With Post-LN's shallowest losses set to Pre-LN's the premise
    holds and the claims are judged; with them 1 nat above Pre-LN's (a Post-LN that fails
    everywhere) it fails and the verdict is 'not tested at this size'."""
    r = tiny("norm-placement-depth")
    cfg = E.configure(norm_placement_depth, "tiny")
    assert next(c for c in r.checks if c.premise).passed is None
    assert r.verdict == E.NOT_TESTED
    for shift, holds in ((0.0, True), (1.0, False)):
        data = copy.deepcopy(r.data)
        pre = data["seed_loss"]["pre"][0]
        data["seed_loss"]["post"][0] = [v + shift for v in pre]
        checks = norm_placement_depth.judge(data, cfg)
        assert next(c for c in checks if c.premise).passed is holds
        assert (E.verdict_of(checks) != E.NOT_TESTED) is holds


def test_norm_placement_rows_keep_to_the_register():
    """One row per record: the shallow Post-LN row is the premise, the deep one, the five
    "trains at every depth" rows and "no norm does worse than ReZero" are counted claims, the
    gap to the floor is shown; the full size's move to Liu et al.'s learning rate is an
    amendment of every decided row, with its result at 1e-2."""
    r = tiny("norm-placement-depth")
    kinds = {c.id: c.kind for c in r.checks}
    assert kinds == {r.id: r.kind for r in norm_placement_depth.REGISTER}
    assert [i for i, k in kinds.items() if k == E.PREMISE] == ["post-ln-trains-shallow"]
    assert sum(k == E.CLAIM for k in kinds.values()) == 7
    lr = {a.id for a in norm_placement_depth.AMENDMENTS if a.date == "2026-12-05"}
    assert lr == {i for i, k in kinds.items() if k != E.SHOWN}
    admin = next(a for a in norm_placement_depth.AMENDMENTS
                 if a.id == "admin-trains-at-every-depth")
    assert admin.results_before["full"]["status"] == "FAIL" and admin.remeasure


def test_a_diverged_run_is_an_outcome():
    """At a learning rate of 30 runs diverge: they are recorded as diverged, counted at their
    loss at init, and every check still evaluates to a state, never NaN."""
    m = E.load("norm-placement-depth")
    cfg = E.configure(m, "tiny", overrides={"depths": (1, 2), "base.steps": 20, "base.lr": 30.0,
                                           "base.warmup": 0, "base.eval_interval": 5})
    r = E.evaluate(m, cfg, E.RunContext(executor="serial"), "tiny")
    assert sum(sum(v) for v in r.data["diverged"].values()) > 0
    for p in norm_placement_depth.PLACEMENTS:
        assert np.isfinite(norm_placement_depth._seeds(r.data, p)).all()
    assert r.verdict in E.VERDICTS and all("nan" not in c.measured for c in r.checks)


def test_dyt_direction():
    """At the tiny size DyT with the paper's LLaMA recipe ends above LayerNorm and RMSNorm on
    every seed (the direction the quick size measures: the parity claim fails), and the
    S-curve fits exist per seed and norm."""
    d = tiny("dyt").data
    for ref in ("layernorm", "rmsnorm"):
        assert all(a > b for a, b in zip(d["losses"]["dyt"], d["losses"][ref]))
    assert len(d["fits_per_seed"]) == 3 and all(len(f) == 2 * 2 + 1 for f in d["fits_per_seed"])


def test_s_curve_fit_tells_tanh_from_a_line():
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 2.0, 5000)
    s = dyt.fit_tanh_vs_linear(x, np.tanh(x))
    assert s["r2_tanh"] > 0.999 and s["gain"] > 0.05 and s["b"] == pytest.approx(1.0, rel=0.05)
    line = dyt.fit_tanh_vs_linear(x, 3.0 * x + rng.normal(0.0, 0.1, x.size))
    assert abs(line["gain"]) < 1e-3 and line["c"] == pytest.approx(3.0, rel=1e-2)


def test_layernorm_s_curve_per_token():
    """LayerNorm is linear per token; tokens with a larger spread get a smaller slope, so the
    cloud over tokens bends: the tanh fit wins over all tokens, not within one."""
    rng = np.random.default_rng(1)
    h = rng.normal(0, 1, (400, 32)) * rng.lognormal(0, 1, (400, 1))  # (tokens, C)
    y = (h - h.mean(-1, keepdims=True)) / h.std(-1, keepdims=True)
    assert dyt.fit_tanh_vs_linear(h, y)["gain"] > 0.01
    assert abs(dyt.fit_tanh_vs_linear(h[0], y[0])["gain"]) < 1e-3


# ---- the run context and the executor flags --------------------------------------------------
@pytest.mark.parametrize("spec", ["pool", "pool:3", "serial", "ray:auto", "ray:local",
                                  "ray:local:2", "ray:10.0.0.1:6379"])
def test_executor_names_accepted(spec):
    assert E.RunContext(executor=spec).executor == spec == check_executor(spec)


@pytest.mark.parametrize("spec, error", [("", ValueError), ("pool:0", ValueError),
                                         ("pool:x", ValueError), ("gpu", ValueError),
                                         ("ray:", ValueError), (None, TypeError), (2, TypeError)])
def test_executor_names_refused(spec, error):
    with pytest.raises(error, match="executor must be"):
        E.RunContext(executor=spec)


def test_executor_flags():
    def ns(**kw):
        return argparse.Namespace(**{"workers": None, "ray": None, **kw})

    assert executor_from_args(ns()) == "pool"
    assert executor_from_args(ns(workers="3")) == "pool:3"
    assert executor_from_args(ns(ray="auto")) == "ray:auto"
    assert executor_from_args(ns(ray="local", workers="2")) == "ray:local:2"
    assert executor_from_args(ns(ray="ray://10.0.0.1:10001")) == "ray:ray://10.0.0.1:10001"
    for bad, flag in ((ns(workers="0"), "--workers"), (ns(workers="x"), "--workers"),
                      (ns(workers="2", ray="auto"), "--workers"), (ns(ray="bogus"), "--ray"),
                      (ns(ray="host:99999"), "--ray")):
        with pytest.raises(UsageError, match=flag):
            executor_from_args(bad)


def test_the_context_reaches_the_experiment_and_the_store_is_kept(tmp_path, monkeypatch):
    seen = []
    module = E.load("norm-placement-depth")
    real = module.measure

    def spy(config, ctx):
        seen.append(ctx)
        return real(config, ctx)

    monkeypatch.setattr(module, "measure", spy)
    E.run_experiment("norm-placement-depth", size="tiny", out_dir=tmp_path,
                     executor="serial", plots=False)
    store = tmp_path / "norm-placement-depth" / "sweep" / E.training_hash()
    assert (seen[-1].executor, seen[-1].store) == ("serial", store)
    runs = list((store / "placement-depth" / "runs").iterdir())
    assert len(runs) == len(norm_placement_depth.PLACEMENTS) * 2 * 2  # tiny: two depths, seeds
    stale = store.parent / "0123456789abcdef"
    stale.mkdir()
    E.run_experiment("norm-placement-depth", size="tiny", out_dir=tmp_path, executor="serial",
                     plots=False, use_cache=False)  # recomputed: every store removed first
    assert not stale.exists() and store.is_dir()
    assert seen[-1].store == store and len(seen) == 2
