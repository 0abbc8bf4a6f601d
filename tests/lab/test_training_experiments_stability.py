"""The training experiments on stability and precision (attention-logit-growth,
output-logit-divergence, precision-recipes) at their tiny size (seconds): the Result's structure,
the verdict rule, the divergence path (a diverged run is recorded and every check still
evaluates), and the direction of each effect where it shows at that size."""

import json
import math

import pytest

from normlab.lab import framework as E
from normlab.lab.experiments.output_logit_divergence import ARMS

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
    counted = [c for c in r.checks if c.counted]  # (none where a premise did not hold)
    assert len(counted) >= 2 or r.verdict == E.NOT_TESTED
    assert any(c.passed is None for c in r.checks)
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
    store = tmp_path / "output-logit-divergence" / "sweep" / E.training_hash()
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
    growth = next(c for c in tiny("attention-logit-growth").checks if "small" in c.claim)
    # a derivation (QK-norm bounds a logit by sqrt(D) g_q g_k): shown apart, not counted
    assert growth.kind == E.DERIVATION and growth.form == E.SUPERIORITY and growth.estimate > 1
    assert growth.id == f"qk-norm-logits-10x-below-baseline-d{w}" and not growth.counted
    counted = [c.id for c in tiny("attention-logit-growth").checks if c.kind == E.CLAIM]
    assert counted == [f"qk-norm-lowers-lr-sensitivity-d{w}"]


def _rejudged(name, edit):
    """The tiny result's data edited by ``edit`` and judged again: the verdict and the checks."""
    import copy

    r = tiny(name)
    data = copy.deepcopy(r.data)
    edit(data)
    module = E.load(name)
    checks = module.judge(data, E.configure(module, "tiny"))
    return E.verdict_of(checks), checks


def test_attention_premise_gates_the_verdict_both_ways():
    """The logits grow by orders of magnitude at the tiny size (the direction); with a growth
    far above one order in every seed the claims are judged, with none the experiment is 'not
    tested at this size'."""
    r = tiny("attention-logit-growth")
    premise = next(c for c in r.checks if c.premise)
    assert premise.estimate > 1 and premise.form == E.SUPERIORITY  # log10: > 10x at tiny
    d = r.data["widths"][0]
    lrs = r.data["lrs"]
    lo, hi = lrs.index(min(lrs)), lrs.index(0.3)

    def grow(data, factor):
        for k, row in enumerate(data["per"][f"baseline d={d}"]["peak"]):
            row[hi] = row[lo] * factor * (1 + 0.01 * k)

    verdict, checks = _rejudged("attention-logit-growth", lambda data: grow(data, 1e4))
    assert verdict != E.NOT_TESTED and next(c for c in checks if c.premise).passed is True
    verdict, checks = _rejudged("attention-logit-growth", lambda data: grow(data, 1.0))
    assert verdict == E.NOT_TESTED and next(c for c in checks if c.premise).passed is False


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
    sens = next(c for c in r.checks if c.claim.startswith("QK-norm lowers"))
    assert sens.kind == E.CLAIM and sens.form == E.SUPERIORITY
    assert len(sens.interval) == 2 and all(map(math.isfinite, sens.interval))
    assert "baseline diverged at LR 3: 2/2" in sens.note
    div = next(c for c in r.checks if c.claim.startswith("the divergence LR"))
    assert div.kind == E.SHOWN and "baseline d=16: 3, 3" in div.measured


def test_attention_tiny_qk_norm_keeps_the_logits_an_order_below_the_baselines():
    """The effect's direction where the tiny size shows it: at the claim grid's top LR every
    seed's baseline peak logit is more than ten times its QK-norm twin's (the tiny size's two
    seeds are too few for the interval, and its sensitivities too close to read)."""
    r = tiny("attention-logit-growth")
    d, w = r.data, r.data["widths"][0]
    j = d["lrs"].index(max(lr for lr in d["lrs"] if lr <= 0.3))
    base = [row[j] for row in d["per"][f"baseline d={w}"]["peak"]]
    qk = [row[j] for row in d["per"][f"qk-norm d={w}"]["peak"]]
    assert all(b > 10 * q for b, q in zip(base, qk)), (base, qk)


def test_attention_soft_cap_is_read_from_the_models_attention():
    """The probe's raw logits are far above the cap; what the op's softmax saw (cap x its cached
    tanh) stays at or below the cap, and its probabilities are the softmax of those."""
    r = tiny("attention-logit-growth")
    probe, cap = r.data["cap_probe"], r.data["softcap"]
    assert min(probe["raw"]) > 10 * cap and max(probe["seen"]) <= cap
    assert max(probe["p_err"]) < 1e-5
    row = next(c for c in r.checks if c.claim.startswith("soft-capping"))
    assert row.kind == E.IDENTITY and row.passed is True and not row.counted


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


def _premise_every_run_clears(monkeypatch):
    """The premise's margin at -1 nats, in the module and in its record (the register refuses a
    rule that is not its record's)."""
    import dataclasses

    from normlab.lab.experiments import output_logit_divergence as od

    monkeypatch.setattr(od, "LATE_RISE", -1.0)
    monkeypatch.setattr(od, "REGISTER", tuple(
        dataclasses.replace(r, margin=(-1.0,)) if r.id == "no-fix-loss-rises-late" else r
        for r in od.REGISTER))


def _every_arm(monkeypatch, **overrides):
    """The tiny output-logit-divergence with a premise margin every run clears (-1 nats: a late
    rise is never negative), so that the fix arms run; its sweeps in this process."""
    _premise_every_run_clears(monkeypatch)
    return E.run_experiment("output-logit-divergence", size="tiny", seed=0, executor="serial",
                            overrides=overrides or None, plots=False).result


def test_output_experiment_records_diverged_runs_and_still_judges(monkeypatch):
    """Every run diverged (LR 30): each is read as its loss at init, and every row is still
    decided. Then 'z-loss prevents the late rise' and 'z-loss does not cost loss' both read the
    interval [0, 0] (each run's final loss is its loss at init), one effect, which the register
    refuses to count twice: the rows are judged here directly, and the register's refusal is
    asserted."""
    from normlab.lab.contract import RunContext
    from normlab.lab.experiments import output_logit_divergence as od
    from normlab.lab.register import RegisterError, check_rows

    _premise_every_run_clears(monkeypatch)
    cfg = E.configure(od, "tiny", 0, {"base.lr": 30.0})
    data = json.loads(json.dumps(od.measure(cfg, RunContext(executor="serial"))))
    runs = data["runs"]
    assert any(x["status"] == "diverged" for x in runs)
    for _arm, p in data["per"].items():
        for diverged, loss, loss0 in zip(p["diverged"], p["loss"], p["loss0"]):
            if diverged:  # read as the loss at init, never NaN
                assert loss == loss0 and math.isfinite(loss)
    checks = od.judge(data, cfg)
    decided = [c for c in checks if c.kind in (E.CLAIM, E.PREMISE)]
    assert len(decided) == 5 and all(c.interval and all(map(math.isfinite, c.interval))
                                     for c in decided)
    assert E.verdict_of(checks) in E.VERDICTS
    with pytest.raises(RegisterError, match="reads the same interval"):
        check_rows(od, checks, "tiny")


def test_output_rise_of_a_run_stopped_before_its_first_evaluation():
    """A diverged run counts as its loss at init; its late rise is that loss minus the lowest
    on the way: its lowest validation loss, or, when it stopped before its first evaluation,
    its lowest training loss (not 0, as a rise measured against itself would read)."""
    from normlab.lab.experiments import _training as T
    from normlab.lab.experiments import output_logit_divergence as od

    def run(seed, status, evals, nll):
        return T.Run(variant="no fix", lr=0.1, seed=seed, status=status, reason=None,
                     final_val_loss=None if status != "done" else 4.0, loss_at_init=8.0,
                     entropy_floor=None, steps_done=30, skipped_steps=0,
                     steps=list(range(0, 10 * len(nll), 10)), curves={"nll": nll},
                     evals=[{"step": 10 * (i + 1), "val_loss": v} for i, v in enumerate(evals)])

    per = od._arm([run(0, "diverged", [], [8.0, 5.5, 3.0, None, math.nan]),
                   run(1, "diverged", [6.0, 5.0], [8.0, 2.0, math.inf]),
                   run(2, "done", [5.0, 4.5], [8.0, 3.0, 3.5])])
    assert per["loss"] == [8.0, 8.0, 4.0]
    assert per["rise"] == [5.0, 3.0, 0.0]  # 8 - 3 (training), 8 - 5 (validation), 4 - 4
    assert per["diverged"] == [True, True, False]


def test_output_premise_first_runs_the_fix_arms_only_when_it_holds(monkeypatch):
    """Premises first: at the tiny size the no-fix arm's loss does not degrade late, so only
    that arm is trained and the claims are not judged ('not tested at this size', each claim
    kept with why); when the premise holds, every arm runs and the claims are judged in their
    forms. The no-fix runs are the same runs either way, bit for bit."""
    gated = tiny("output-logit-divergence")
    assert gated.verdict == E.NOT_TESTED and gated.data["tested"] is False
    assert list(gated.data["per"]) == ["no fix"]
    assert {x["variant"] for x in gated.data["runs"]} == {"no fix"}
    claims = [c for c in gated.checks if c.kind == E.CLAIM]
    assert len(claims) == 4 and all(c.passed is None and not c.inconclusive
                                    and c.measured.startswith("not run: the premise did not hold")
                                    for c in claims)
    assert next(c for c in gated.checks if c.premise).passed is False
    every = _every_arm(monkeypatch)
    assert "tested" not in every.data and list(every.data["per"]) == list(ARMS)
    forms = {c.claim: c.form for c in every.checks if c.kind == E.CLAIM}
    assert sorted(forms.values()) == sorted([E.EQUIVALENCE, E.SUPERIORITY, E.SUPERIORITY,
                                             E.NON_INFERIORITY])
    ids = ["z-loss-holds-log-z-near-0", "log-z-drifts-10x-without-a-fix",
           "z-loss-prevents-the-late-loss-rise", "z-loss-costs-no-loss"]
    assert [c.id for c in claims] == [c.id for c in every.checks if c.kind == E.CLAIM] == ids
    assert every.data["per"]["no fix"] == gated.data["per"]["no fix"]
    assert [x for x in every.data["runs"] if x["variant"] == "no fix"] == gated.data["runs"]

    def rise(values):
        def edit(data):
            data["per"]["no fix"]["rise"] = list(values)
        return edit

    monkeypatch.undo()  # the premise's own margin again
    module = E.load("output-logit-divergence")
    for values, holds in (([1.0, 1.1], True), ([0.0, 0.001], False)):
        data = json.loads(json.dumps(every.data))
        rise(values)(data)
        checks = module.judge(data, E.configure(module, "tiny"))
        assert (E.verdict_of(checks) != E.NOT_TESTED) is holds
        assert next(c for c in checks if c.premise).passed is holds


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
    assert abs(per["amp_bf16"]["gap"]) < 0.02 and abs(per["amp_fp16"]["gap"]) < 0.02
    # small gradients: fp16 without a loss scale falls behind the scaled run (by 0.011 nats at
    # the tiny size's 40 steps, 1.6-1.8 at the quick size's 1000)
    assert per["fp16 x1e-4, no loss scaling"]["gap"] > 0.005 + per[
        "fp16 x1e-4, loss scale 2^16"]["gap"]
    # without master weights, updates below half a bf16 ulp are lost as the LR decays
    assert per["pure_bf16"]["late_update_rms"] < 0.8 * per["amp_bf16"]["late_update_rms"]


def test_precision_recipes_rows_have_the_claims_forms():
    """'matches fp32' is an equivalence in +-0.02 nats, 'falls behind' a superiority over fp32
    beyond that same band (a gap inside it is 'tracks' by the experiment's own rule); the three
    x1e-4 rows hold by construction (derivations, counted apart); the shown rows are not
    counted. The counted claims are the two AMP recipes; pure bf16's gap is shown (its claim is
    counted in optimizer-state-precision, on a task whose arms end apart), with the floor."""
    from normlab.lab.experiments import precision_recipes as X

    r = tiny("precision-recipes")
    by = {c.claim: c for c in r.checks}
    for c in by.values():
        if "tracks fp32" in c.claim or "brings fp16 back" in c.claim or "needs no" in c.claim:
            assert c.form == E.EQUIVALENCE and c.threshold == [-X.TOLERANCE, X.TOLERANCE]
        elif "falls behind" in c.claim:
            assert c.form == E.SUPERIORITY and c.threshold == [X.TOLERANCE] and c.margin_source
        else:
            assert c.kind == E.SHOWN and not c.counted
    assert [c.id for c in r.checks if c.kind == E.CLAIM] == [
        "amp-bf16-tracks-fp32", "amp-fp16-tracks-fp32"]
    pure = next(c for c in r.checks if c.id == "pure-bf16-gap-on-the-markov-source")
    assert pure.passed is None and "above the source's floor" in pure.measured
    assert "differs from fp32's by up to" in pure.note  # the AMP recipes' largest swing
    assert next(r for r in X.REGISTER if r.id == "pure-bf16-falls-behind").untested
    small = [c for c in r.checks if c.claim.startswith("small gradients")]
    assert len(small) == 3 and all(c.kind == E.DERIVATION and not c.counted for c in small)
    unscaled = next(c for c in r.checks if "loses them" in c.claim)
    assert unscaled.estimate > 0 and unscaled.interval is not None
