"""Each experiment at its tiny size (seconds): the Result's fields, the verdict rule, and the
numbers' signs and orders of magnitude."""

import json

import pytest

from normlab.lab import framework as E

_CACHE = {}


def tiny(name):
    """Run an experiment once per test session at the tiny size (no files)."""
    if name not in _CACHE:
        _CACHE[name] = E.run_experiment(name, size="tiny", seed=0).result
    return _CACHE[name]


@pytest.mark.parametrize("name", list(E.registry()))
def test_result_fields(name, tmp_path):
    r = tiny(name)
    assert r.name == name and r.size == "tiny"
    for field in ("title", "claim", "citation", "published", "setting", "measured"):
        assert isinstance(getattr(r, field), str) and getattr(r, field).strip(), field
    assert r.checks and any(c.counted or c.identity for c in r.checks)  # decided, inconclusive
    #                                                 or an identity: never only shown rows
    for c in r.checks:
        assert c.claim and c.published and c.measured and c.rule
        assert c.passed in (True, False, None)
    assert r.verdict in E.VERDICTS and r.verdict == E.verdict_of(r.checks)
    assert r.config["seed"] == 0 and r.wall_s > 0
    json.dumps(r.to_json(), allow_nan=False)
    files = E.load(name).plot(r, tmp_path)
    assert files and all((tmp_path / f).stat().st_size > 1000 for f in files)


def test_seeded_and_pure():
    a = E.run_experiment("dropout", size="tiny", seed=1).result
    b = E.run_experiment("dropout", size="tiny", seed=1).result
    c = E.run_experiment("dropout", size="tiny", seed=2).result
    assert a.data == b.data and a.data != c.data


# ---- per experiment --------------------------------------------------------------------------
def test_dropout_numbers():
    r = tiny("dropout")
    for row in r.data["rows"]:
        assert abs(row["mean_ratio"] - 1) < 0.05
        assert row["var_ratio"] == pytest.approx(row["p"] / (1 - row["p"]), rel=0.1)
    assert r.data["relu_train"] > r.data["relu_eval"] > 0  # Jensen: dropout noise survives ReLU
    assert r.checks[3].passed  # eval is exactly the identity


def test_batchnorm_vs_layernorm_numbers():
    d = tiny("batchnorm-vs-layernorm").data
    rows = d["padding"]["rows"]
    assert all(r["bn"] > 0.1 for r in rows[1:])  # padding moves real tokens by O(1)
    assert max(r["bn_masked"] for r in rows) < 1e-12 and max(r["ln"] for r in rows) < 1e-12
    assert rows[-1]["bn"] > rows[0]["bn"]  # more padding, more damage
    comp = d["companions"]["rows"]
    assert all(0.01 < r["bn_spread"] < 1 for r in comp) and all(
        r["ln_spread"] < 1e-12 for r in comp
    )
    te = d["train_eval"]["rows"]
    assert te[0]["mismatch"] > te[-1]["mismatch"] > 0 and d["train_eval"]["ln_gap"] == 0
    for r in te:  # E[biased var] = (m-1)/m sigma^2, the running variance corrects it
        assert r["biased_ratio"] == pytest.approx(r["expected_biased"], abs=0.05)
        assert r["unbiased_ratio"] == pytest.approx(1.0, abs=0.05)
    dec = d["decoding"]
    assert "more than 1 value per channel" in dec["single_token_error"]
    assert dec["bn_step_vs_train"] > 0.01 and dec["ln_step_vs_full"] < 1e-12
    assert dec["leak_bn"] > 1e-6 and dec["leak_ln"] == 0


def test_invariances_and_cost_numbers():
    r = tiny("invariances-and-cost")
    d = r.data
    for name, expected in d["table"].items():  # exact, deterministic: every cell as the paper
        for inv, v in zip(expected, d["grid"][name]):
            assert (v < 1e-9) if inv else (v > 1e-2), (name, inv, v)
    assert all(v < 1e-8 for v in d["implicit_lr"].values())
    for row in d["estimation"]["rows"]:
        assert row["rel_std"] == pytest.approx(row["theory"], rel=0.25)
    assert d["estimation"]["rms_eq_ln_zero_mean"] < 1e-12
    for row in d["speed"]["rows"]:  # times are measured, never asserted: only their sanity
        assert row["layernorm_s"] > 0 and row["rmsnorm_s"] > 0 and -5 < row["rms_saving"] < 1
    assert r.checks[0].passed and r.checks[1].passed and r.checks[3].passed


def test_residual_growth_numbers():
    r = tiny("residual-growth")
    d = r.data
    assert d["chapter"]["aligned"][-1] == 20.0  # the chapter's 10 x 2
    assert abs(d["chapter"]["orthogonal"][-1] - 2 * 10**0.5) < 1e-12
    prof = d["profile"]
    assert all(b > a for a, b in zip(prof["none"], prof["none"][1:]))  # no norm: grows
    assert all(abs(v - 1) < 1e-3 for v in prof["post"])  # Post-LN: LN output, RMS 1
    assert all(abs(v - 1.5) < 0.3 for v in d["post5"])  # Lemma 2: 1.5 d (noisy at tiny size)
    lo, hi = d["bounds"]["lo"], d["bounds"]["hi"]
    assert all(a <= v <= b for a, v, b in zip(lo, prof["pre"], hi))  # Lemma 2 bounds
    rows = {c.claim.split(":")[0]: c for c in r.checks}
    assert rows["Pre-LN"].passed and rows["x_L = x_0 + sum F_l"].passed


def test_gradients_at_init_numbers():
    d = tiny("gradients-at-init").data
    for p in ("post", "pre"):
        assert all(0 < v < 10 for v in d["last"][p])
    assert all(a > b for a, b in zip(d["last"]["post"], d["last"]["pre"]))  # post > pre
    from normlab.lab.experiments.gradients_at_init import _stats

    st = _stats(d)
    slope = st["slope"]  # log-log slopes vs L, one per seed
    assert slope["pre"].mean < -0.2  # pre shrinks with depth
    assert abs(slope["post"].mean) < abs(slope["pre"].mean)  # post much flatter
    # per layer: Pre-LN falls toward the output (the source's "flat" disconfirmed), well below
    # Post-LN's profile (about flat at the tiny size, growing at the quick one)
    assert st["pslope"]["pre"].mean < -0.2 and st["pslope_gap"].mean > 0.2
    rows = {c.claim.split(":")[0].split(" (")[0]: c for c in tiny("gradients-at-init").checks}
    flat = rows["Pre-LN's per-layer gradient is 'almost the same' at every layer"]
    assert flat.kind == "claim" and flat.form == "equivalence" and flat.counted


def test_output_change_numbers():
    d = tiny("output-change").data
    m = d["mean"]
    assert all(v > 0 for p in m for v in m[p])
    assert m["post"][-1] > m["pre"][-1] > m["deepnorm"][-1]  # at the largest depth
    assert m["pre"][-1] > m["pre"][0]  # pre grows (slowly)
    assert m["deepnorm"][-1] < 2 * m["deepnorm"][0]  # DeepNorm: about flat in depth


def test_precision_basics_numbers():
    r = tiny("precision-basics")
    d = r.data
    for key in ("init", "trained"):
        rows = d["grads"][key]["rows"]
        assert rows[0]["scale"] == 1.0 and 0 < rows[0]["flushed"] < 0.5
        assert rows[-1]["flushed"] < rows[0]["flushed"]  # scaling recovers underflow
        assert all(row["overflow"] == 0 for row in rows)
    assert d["traj"]["sum_bf16"][-1] == 256.0
    assert d["traj"]["updates"]["direct"][-1] == 1.0
    assert d["traj"]["updates"]["master"][-1] < 0.9
    # the exact checks (formats, range, tiny gradient, stagnation, fp16 update, sum)
    exact = [c for c in r.checks if c.rule.startswith(("exact", "float16 both", "0 exactly",
                                                       "direct ==", "bfloat16 =="))]
    assert len(exact) == 6 and all(c.passed for c in exact)
