"""accumulation-precision at its tiny size (seconds, in this process): the data's shape, the
swamping facts the checks read (a one-sum bfloat16 accumulator is off, promotion fixes it), the
issue row's explanation (eps, not the sum), the Student-t intervals, the matrix product's inner
sums equal to precision.matmul under the policy, and the three training arms."""

import json

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register, stats
from normlab.lab.experiments import accumulation_precision as X
from normlab.precision import PRESETS, Precision, matmul, quantize

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("accumulation-precision", size="tiny", seed=0).result
    return _CACHE["r"]


def test_data_and_swamping_facts():
    r = tiny()
    d, cfg = r.data, E.configure(X, "tiny")
    assert len(d["ops"]) == cfg.seeds == 2 and set(d["train"][0]) == set(X.TRAIN_ARMS)
    for s in d["ops"]:
        wide = s[str(max(cfg.widths))]
        assert wide["bfloat16/none"]["rowsum"] > 1.5  # the denominator stalls: rows sum above 1
        assert abs(wide["bfloat16/32"]["rowsum"] - 1) < 0.01
        assert wide["bfloat16/none"]["rms"] > 1.2 and abs(wide["bfloat16/32"]["rms"] - 1) < 0.01
        assert wide["float16/none"]["lse"] > wide["float16/32"]["lse"]
    for s in d["matmul"]:
        k = s[str(X.DEEPSEEK_K)]
        assert k[f"tc14/{X.DEEPSEEK_NC}"] < k["tc14/none"] / 2
    json.dumps(r.to_json(), allow_nan=False)


def test_the_issue_row_is_eps_not_accumulation():
    r = tiny()
    issue = r.checks[0]
    assert issue.passed is False and "finfo(bfloat16).eps" in issue.note
    eps = np.mean([v["eps"] for v in r.data["issue"]])
    assert 1.6 < eps < 2.0 and all(abs(v["acc"] - 1) < 0.02 for v in r.data["issue"])


def test_intervals_are_the_labs_student_t():
    iv = X._t_interval([1.0, 2.0, 3.0])
    se = 1.0 / np.sqrt(3)
    assert iv.mean == 2.0 and iv.hi == pytest.approx(2.0 + 4.303 * se, rel=1e-4) and iv.n == 3
    assert X._paired([3.0, 5.0, 4.0], [1.0, 2.0, 3.0]) == stats.paired_interval(
        [3.0, 5.0, 4.0], [1.0, 2.0, 3.0])


def test_recovery_is_judged_only_where_the_harm_occurred():
    """The promotion row is counted when bf16 accumulation is shown to hurt, not judged (with
    why) when it is not: a claim with no decision, its kind still its record's; the harm row
    itself is a counted claim either way."""
    harm = stats.Interval(0.1, 0.05, 0.15, 5, "m")
    none = stats.Interval(-0.1, -0.15, -0.05, 5, "m")
    row = E.Check.superiority(claim="c", published="p", interval=harm, side="above")
    assert X._recovery(row, harm).counted
    shown = X._recovery(row, none)
    assert shown.kind == E.CLAIM and shown.status == "shown" and not shown.counted
    assert "did not occur" in shown.note
    r = tiny()
    gap = next(c for c in r.checks if "hurts" in c.claim)
    assert gap.kind == E.CLAIM and gap.form == E.SUPERIORITY


@pytest.mark.parametrize("chunk", [None, 128])
def test_inner_sums_are_the_policy_matmul(chunk):
    """kernels.accumulate_sum of the exact fp8 products (what the experiment measures) equals
    precision.matmul with accumulate_every=1 and accumulate_chunk under the same format."""
    from normlab import kernels

    rng = np.random.default_rng(0)
    a = quantize(rng.standard_normal((3, 600)), "float8_e4m3fn")
    b = quantize(rng.standard_normal((600, 2)), "float8_e4m3fn")
    pol = PRESETS["fp32"].replace(accumulate=Precision(X.TC14, rounding="toward_zero"),
                                  accumulate_chunk=chunk)
    terms = np.moveaxis(a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None], 1, -1)
    got = kernels.accumulate_sum(terms, X.TC14, chunk=chunk, rounding="toward_zero")
    np.testing.assert_array_equal(got.astype(np.float32), matmul(a, b, pol))


def test_the_register_counts_the_sources_claims_and_derives_the_promotion_rows():
    """The three 'promotion fixes it' rows are arithmetic of the accumulator (lab-audit.md, row
    11): derivations, counted apart; a device's row whose pipeline is guessed (tt-metal's
    softmax, DeepSeek-V3's 14-bit accumulator) is shown; every row names its record."""
    r = tiny()
    kinds = {c.id: c.kind for c in r.checks}
    assert kinds == {
        "pytorch-rmsnorm-off-by-1-7x-from-accumulation": E.CLAIM,
        "bf16-sum-misscales-rmsnorm-where-the-stall-sets-in": E.CLAIM,
        "bf16-rmsnorm-scale-per-width": E.SHOWN,
        "norm-promoted-every-32-within-1-percent": E.DERIVATION,
        "tt-metal-softmax-rows-at-1024": E.SHOWN,  # (8192 is not among the tiny widths)
        "softmax-promoted-every-32-within-1-percent": E.DERIVATION,
        "deepseek-14-bit-accumulation-errs-2-percent": E.SHOWN,
        "deepseek-promotion-halves-the-error": E.DERIVATION,
        "bf16-accumulation-hurts-training": E.CLAIM,
        "promotion-recovers-training": E.CLAIM}
    assert not [c for c in r.checks if c.kind == E.DERIVATION and c.passed is False]
    shown = [c for c in r.checks if c.id.startswith(("tt-metal", "deepseek-14"))]
    assert all(c.passed is None and not c.counted and c.interval for c in shown)
    assert "no GPU" in next(c for c in shown if c.id.startswith("deepseek")).rule


def test_the_norm_row_reads_the_widest_row_and_the_old_row_is_retired():
    """The mis-scale is read where the stall it names sets in, the grid's widest row (issue 58):
    the smallest-width row is retired, its committed FAILs kept as the result before."""
    r, cfg = tiny(), E.configure(X, "tiny")
    row = next(c for c in r.checks if c.id == "bf16-sum-misscales-rmsnorm-where-the-stall-sets-in")
    wide = np.mean([s[str(max(cfg.widths))]["bfloat16/none"]["rms"] for s in r.data["ops"]])
    assert row.estimate == pytest.approx(wide - 1)
    assert "bf16-sum-misscales-rmsnorm-at-smallest-width" in register.retired(X)
    old = next(a for a in X.AMENDMENTS if a.retires)
    assert {k: v["status"] for k, v in old.results_before.items()} == {"quick": "FAIL",
                                                                       "full": "FAIL"}
    new = next(a for a in X.AMENDMENTS
               if a.id == "bf16-sum-misscales-rmsnorm-where-the-stall-sets-in")
    assert new.before == {"kind": None}
    register.validate(X)
