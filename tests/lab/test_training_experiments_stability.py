"""The training experiments on stability and precision (attention-logit-growth,
output-logit-divergence, precision-recipes) at their tiny size (seconds): the Result's structure,
the verdict rule, the divergence path (a diverged run is recorded and every check still
evaluates), and the direction of each effect where it shows at that size."""

import json
import math

import pytest

from normlab.lab import framework as E

NAMES = ("attention-logit-growth", "output-logit-divergence", "precision-recipes")
_CACHE = {}


def tiny(name, executor="serial", **overrides):
    """Each experiment once per session at the tiny size (with overrides), its sweep in this
    process."""
    key = (name, tuple(sorted(overrides.items())))
    if key not in _CACHE:
        _CACHE[key] = E.run_experiment(name, size="tiny", seed=0, executor=executor,
                                       overrides=overrides or None, plots=False).result
    return _CACHE[key]


@pytest.mark.parametrize("name", NAMES)
def test_result_structure_and_verdict_rule(name, tmp_path):
    r = tiny(name)
    assert name in E.registry() and r.name == name and r.size == "tiny"
    assert r.verdict == E.verdict_of(r.checks) and r.verdict_rule == E.VERDICT_RULE
    counted = [c for c in r.checks if c.counted]
    assert len(counted) >= 2 and any(c.passed is None for c in r.checks)
    for c in r.checks:
        assert c.claim and c.published and c.measured and c.rule and c.source
    assert r.notes and "sweep" in r.setting
    runs = r.data["runs"]
    assert runs and all(x["status"] in ("done", "diverged") for x in runs)
    json.dumps(r.to_json(), allow_nan=False)
    files = E.load(name).plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_sweep_store_and_process_pool_give_the_same_numbers(tmp_path):
    # the runs go through run_sweep; a process pool and a store change where they run, not the
    # numbers, and a rerun reads the finished runs back from the store
    serial = tiny("output-logit-divergence")
    pooled = E.run_experiment("output-logit-divergence", size="tiny", seed=0, out_dir=tmp_path,
                              executor="pool:2", plots=False).result
    assert pooled.data == serial.data
    store = tmp_path / "output-logit-divergence" / "sweep" / pooled.cache_key
    status = [json.loads(p.read_text()) for p in store.rglob("status.json")]
    assert len(status) == len(serial.data["runs"]) and all(s["status"] == "done" for s in status)


# ---- attention-logit-growth --------------------------------------------------------------------
def test_attention_logits_grow_at_the_top_lr_and_qk_norm_holds_them_seed_by_seed():
    d = tiny("attention-logit-growth").data
    w = d["widths"][0]
    base, qk = d["per"][f"baseline d={w}"], d["per"][f"qk-norm d={w}"]
    j = d["lrs"].index(d["top_lr"])
    for b, q in zip(base["peak"], qk["peak"]):  # every seed: orders of magnitude apart
        assert b[j] > 10 * q[j] > 0
        assert b[j] > 10 * b[0]  # and the baseline's grow with the learning rate
    growth = next(c for c in tiny("attention-logit-growth").checks if "grow" in c.claim)
    assert growth.passed is True and growth.interval[0] > 1  # log10 ratio over the seeds


def test_attention_experiment_records_diverged_runs_and_still_judges():
    r = tiny("attention-logit-growth")
    d = r.data
    diverged = [x for x in d["runs"] if x["status"] == "diverged"]
    assert diverged and all(x["lr"] == d["top_lr"] for x in diverged)  # LR 3 at the tiny size
    w = d["widths"][0]
    p = d["per"][f"baseline d={w}"]
    j = d["lrs"].index(d["top_lr"])
    assert all(row[j] for row in p["diverged"]) and all(row[j] is None for row in p["loss"])
    # a diverged run counts as the loss at init: the sensitivity is at least its share of it
    for sens, loss0, losses in zip(p["sens"], p["loss0"], p["loss"]):
        best = min(v for v in losses if v is not None)
        assert sens >= (loss0 - best) / len(losses) - 1e-12
    sens = next(c for c in r.checks if "LR sensitivity" in c.claim)
    assert sens.counted and len(sens.interval) == 2 and all(map(math.isfinite, sens.interval))
    assert "baseline diverged at LR 3: 2/2" in sens.note
    cap = next(c for c in r.checks if c.claim.startswith("soft-capping"))
    assert cap.identity and cap.passed is True and not cap.counted


def test_attention_experiment_uses_the_paper_recipe_in_every_run():
    r = tiny("attention-logit-growth")
    cfg = E.configure(E.load("attention-logit-growth"), "tiny")
    from normlab.lab.experiments.attention_logit_growth import _points

    for _, over, own in _points(cfg):  # weight decay independent of the LR: lambda = wd * lr
        assert over["weight_decay"] * over["lr"] == pytest.approx(cfg.independent_wd)
        assert set(own) == {"arm"}  # the point names its arm as a field
    m = cfg.base.model
    assert (m.init, m.positions, m.norm_eps, m.z_loss, cfg.base.data) == (
        "fan_in", "rope", 1e-6, 1e-4, "pydoc")
    assert set(r.data["per"]) == {f"{arm} d={d}" for arm in ("baseline", "qk-norm", "soft-cap")
                                  for d in cfg.widths}


# ---- output-logit-divergence -------------------------------------------------------------------
def test_rare_tokens_logits_fall_below_the_mean_and_the_head_grows_without_decay():
    d = tiny("output-logit-divergence").data
    p = d["per"]["no fix"]
    for unseen, mean in zip(p["unseen"], p["mean_logit"]):  # Adam pushes rare tokens down
        assert unseen < mean < 0
    V = d["vocab"]
    assert all(h > 2 * math.sqrt(V) for h in p["head_norm"])  # init: about sqrt(V)
    assert d["log_z0"] == pytest.approx(math.log(V), abs=1.0)  # logits ~ N(0, 1) at init


def test_output_experiment_records_diverged_runs_and_still_judges():
    r = tiny("output-logit-divergence", **{"base.lr": 30.0})
    runs = r.data["runs"]
    assert any(x["status"] == "diverged" for x in runs)
    for _arm, p in r.data["per"].items():
        for diverged, loss, loss0 in zip(p["diverged"], p["loss"], p["loss0"]):
            if diverged:  # read as the loss at init, never NaN
                assert loss == loss0 and math.isfinite(loss)
    counted = [c for c in r.checks if c.counted]
    assert len(counted) == 4 and all(c.interval and all(map(math.isfinite, c.interval))
                                     for c in counted)
    assert r.verdict in E.VERDICTS


def test_output_experiment_arms_differ_only_in_their_fix():
    from normlab.lab.experiments.output_logit_divergence import _points

    cfg = E.configure(E.load("output-logit-divergence"), "tiny")
    pts = {arm: over for arm, over, own in _points(cfg) if over["seed"] == cfg.seed}
    assert pts["no fix"] == {"seed": 0} and cfg.base.weight_decay == 0
    assert pts["z-loss"] == {"model.z_loss": 1e-4, "seed": 0}
    assert pts["soft-cap"] == {"model.final_softcap": 30.0, "seed": 0}
    assert pts["weight decay"] == {"weight_decay": 0.1, "seed": 0}
    assert cfg.base.schedule == "constant" and cfg.base.markov_zipf > 0


def test_precision_recipes_directions():
    r = tiny("precision-recipes")
    per = r.data["per"]
    assert per["fp32"]["gap"] == 0
    assert abs(per["amp_bf16"]["gap"]) < 0.02 and abs(per["amp_fp16"]["gap"]) < 0.02
    # small gradients: fp16 without a loss scale falls behind the scaled run
    assert per["fp16 x1e-4, no loss scaling"]["gap"] > per["fp16 x1e-4, loss scale 2^16"]["gap"]
    # without master weights, updates below half a bf16 ulp are lost as the LR decays
    assert per["pure_bf16"]["late_update_rms"] < per["amp_bf16"]["late_update_rms"]
    assert per["amp_fp16"]["skipped"] >= 0 and per["fp32"]["skipped"] == 0
