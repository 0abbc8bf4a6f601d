"""frontier-numerics at its tiny size (seconds) and its rows on hand-made data: 4/6's row behind
its premise, DeepSeek-V3's accumulator counted only where both guessed pipelines agree, its
"nearly 2%" shown, and bad configs refused."""

import copy

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import frontier_numerics as M
from normlab.precision import FloatFormat, nvfp4_quantize

_CACHE: dict = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("frontier-numerics", size="tiny", seed=0,
                                       executor="serial", plots=False).result
    return _CACHE["r"]


def test_the_tiny_size_runs_end_to_end(tmp_path):
    r = tiny()
    assert r.verdict == E.REPRODUCED
    ids = [c.id for c in r.checks]
    assert ids == [rec.id for rec in M.REGISTER]
    assert {c.id for c in r.checks if c.kind == E.SHOWN} >= {
        "deepseek-error-at-4096-truncation", "deepseek-error-at-4096-rounding"}
    register.check_rows(M, r.checks, "quick")
    register.validate(M)
    assert (tmp_path / M.plot(r, tmp_path)[0]).stat().st_size > 1000


def test_the_four_over_six_numbers_are_the_quantizers_errors():
    """One draw's plain MSE is nvfp4_quantize's own error, and 4/6's MSE choice is never worse
    on a block than the map-to-6 candidate at the same E4M3 bound would be overall."""
    cfg = E.configure(M, "tiny")
    out = M.four_over_six(cfg, 3, "gaussian")
    x = M._draw("gaussian", cfg.fos_shape, np.random.default_rng([3, 0, 1]))
    plain = nvfp4_quantize(x).dequantize().astype(np.float64)
    assert out["mse_plain"] == pytest.approx(float(np.mean((plain - x) ** 2)))
    assert out["mse_mse"] < out["mse_plain"] and 0 < out["to4"] < 1


def test_an_exact_accumulation_errs_nowhere():
    """Integer terms whose partial sums fit 14 bits: both pipelines are exact, so the error
    measures are 0 (the emulation adds no error of its own)."""
    cfg = E.configure(M, "tiny")
    errs = M.gemm_errors(cfg, 0, 64)
    assert all(v["norm"] >= 0 for v in errs.values())
    terms = np.arange(1.0, 65.0)[None, None, :]
    from normlab import kernels as K
    for rounding in M.PIPELINES.values():
        assert float(K.accumulate_sum(terms, M.TC14, rounding=rounding)[0, 0]) == 2080.0
    assert M.TC14 == FloatFormat(8, 13, name="tensor-core 14-bit")


def test_judge_each_verdict_on_hand_made_data():
    r = tiny()
    cfg = E.configure(M, "tiny")
    data = copy.deepcopy(r.data)
    for draw in data["fos"]:  # plain NVFP4 errs least near the maximum: the premise fails
        for d in draw.values():
            d["near_plain"] = 0.5 * d["rest_plain"]
    rows = M.judge(data, cfg)
    assert E.verdict_of(rows) == E.NOT_TESTED
    assert next(c for c in rows if c.id == "four-over-six-reduces-error").passed is None
    data = copy.deepcopy(r.data)
    for draw in data["fos"]:  # 4/6 worse on one distribution: the claim fails
        draw["student-t"]["mse_mse"] = 1.2 * draw["student-t"]["mse_plain"]
    chunk = str(cfg.ds_chunk)
    for draw in data["gemm"]:  # rounding gains nothing from promotion: the worse pipeline counts
        for k in draw.values():
            k[f"rounding/{chunk}"] = dict(k["rounding/none"])
    judged = M.judge(data, cfg)
    by_id = {c.id: c for c in judged}
    assert by_id["four-over-six-reduces-error"].passed is False
    assert by_id["promotion-every-128-improves"].passed is False
    assert by_id["accumulation-error-grows-with-k"].passed is True
    assert E.verdict_of(judged) == E.PARTLY


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        E.configure(M, "tiny", overrides={"fos_shape": (4, 20)})
    with pytest.raises(ValueError, match="distributions"):
        E.configure(M, "tiny", overrides={"distributions": ("cauchy",)})
    with pytest.raises(ValueError, match="ds_chunk"):
        E.configure(M, "tiny", overrides={"ds_chunk": 4096})
    with pytest.raises(ValueError, match="seeds"):
        E.configure(M, "tiny", overrides={"seeds": 1})
