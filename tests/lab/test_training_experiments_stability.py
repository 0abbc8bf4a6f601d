"""The training experiments on stability and precision (attention-logit-growth,
output-logit-divergence, precision-recipes) at their tiny size (seconds): the Result's structure,
the verdict rule, and the direction of each effect where it is robust at that size."""

import json
import math

import pytest

from normlab.lab import framework as E

NAMES = ("attention-logit-growth", "output-logit-divergence", "precision-recipes")
_CACHE = {}


def tiny(name, executor="serial"):
    """Each experiment once per session at the tiny size, its sweep in this process."""
    if name not in _CACHE:
        _CACHE[name] = E.run_experiment(name, size="tiny", seed=0, executor=executor).result
    return _CACHE[name]


@pytest.mark.parametrize("name", NAMES)
def test_result_structure_and_verdict_rule(name, tmp_path):
    r = tiny(name)
    assert name in E.registry() and r.name == name and r.size == "tiny"
    assert r.verdict == E.verdict_of(r.checks) and r.verdict_rule == E.VERDICT_RULE
    counted = [c for c in r.checks if c.passed is not None]
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
                              executor="pool:2").result
    assert pooled.data == serial.data
    store = tmp_path / "output-logit-divergence" / "sweep" / pooled.cache_key
    status = [json.loads(p.read_text()) for p in store.rglob("status.json")]
    assert len(status) == len(serial.data["runs"]) and all(s["status"] == "done" for s in status)


def test_attention_logits_grow_with_lr_and_qk_norm_holds_them():
    r = tiny("attention-logit-growth")
    d = r.data
    w = d["widths"][0]
    base, qk = d["per"][f"baseline d={w}"], d["per"][f"qk-norm d={w}"]
    assert base["end_logit"][-1] > 10 * base["end_logit"][0]  # grows with the learning rate
    assert base["top_end_logit"] > 10 * abs(qk["top_end_logit"])  # QK-norm holds it
    cap = d["softcap"]
    for run in d["runs"]:
        if run["variant"].startswith("soft-cap"):  # raw logits grow; capped ones stay <= cap
            assert cap * math.tanh(run["peaks"]["max_logit"] / cap) <= cap
    assert all(p["sens"] >= 0 for p in d["per"].values())


def test_output_log_z_starts_at_log_vocab_and_the_cap_bounds_it():
    r = tiny("output-logit-divergence")
    d = r.data
    assert d["log_z0"] == pytest.approx(math.log(16), abs=0.1)  # logits ~ 0 at init: log Z = ln V
    cap = d["per"]["soft-cap"]
    assert all(v is not None and v <= 30 + math.log(16) for v in cap["log_z_max"])
    assert all(x["final_val_loss"] < x["loss_at_init"] + 0.2 for x in d["runs"])


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
