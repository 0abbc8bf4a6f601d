"""PrecisionPolicy: presets, JSON round trips, validation with clear errors, applying roles."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normlab.precision import (
    FORMATS,
    PRESETS,
    ROLES,
    DelayedScaling,
    DynamicLossScaler,
    FloatFormat,
    LossScaling,
    MXScaling,
    Precision,
    PrecisionPolicy,
    TensorScaling,
    get_policy,
    mx_quantize,
    quantize,
)


def test_presets():
    assert set(PRESETS) == {"fp32", "amp_bf16", "amp_fp16", "pure_bf16", "fp8_hybrid", "mxfp8"}
    fp32 = get_policy("fp32")
    assert all(not getattr(fp32, r).rounds for r in ROLES if r != "master")
    assert fp32.master is None and fp32.loss_scaling is None
    amp = PrecisionPolicy.preset("amp_fp16")
    assert amp.compute.format is FORMATS["float16"] and amp.master.format is FORMATS["float32"]
    scaler = amp.make_loss_scaler()
    assert isinstance(scaler, DynamicLossScaler)
    assert (scaler.scale, scaler.growth_factor, scaler.backoff_factor,
            scaler.growth_interval) == (65536.0, 2.0, 0.5, 2000)
    assert get_policy("amp_bf16").make_loss_scaler() is None
    pure = get_policy("pure_bf16")
    assert pure.master is None and pure.optimizer.format.name == "bfloat16"
    hybrid = get_policy("fp8_hybrid")
    assert hybrid.compute.format.name == "float8_e4m3fn"
    assert hybrid.gradients.format.name == "float8_e5m2"
    assert hybrid.compute.scaling == DelayedScaling(margin=0, amax_history_len=1024,
                                                    amax_compute_algo="max")
    mx = get_policy("mxfp8")
    assert isinstance(mx.compute.scaling, MXScaling) and mx.compute.scaling.block_size == 32
    assert "delayed scaling" in hybrid.describe() and "no master copy" in pure.describe()


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_json(name):
    p = PRESETS[name]
    text = p.to_json()
    assert PrecisionPolicy.from_json(text) == p
    assert PrecisionPolicy.from_json(json.loads(text)) == p


def test_custom_policy_round_trip():
    e3m3 = FloatFormat(3, 3, bias=2, inf_nan="fn", name="e3m3")
    p = PrecisionPolicy(
        "custom", params="bfloat16",
        compute=Precision("float8_e4m3fn", overflow="saturate",
                          scaling=TensorScaling(margin=1, power_of_two=True)),
        accumulate=Precision("bfloat16"), activations=e3m3,
        gradients={"format": "float8_e5m2", "rounding": "stochastic",
                   "scaling": {"kind": "delayed", "amax_history_len": 16,
                               "amax_compute_algo": "most_recent"}},
        optimizer=Precision("bfloat16", rounding="stochastic"), master=None,
        communication="float32", loss_scaling={"kind": "static", "init_scale": 1024.0},
        accumulate_every=4)
    q = PrecisionPolicy.from_json(p.to_json())
    assert q == p
    assert q.activations.format == e3m3 and q.activations.format.name == "e3m3"
    assert q.gradients.scaling == DelayedScaling(amax_history_len=16,
                                                 amax_compute_algo="most_recent")
    assert q.loss_scaling == LossScaling(kind="static", init_scale=1024.0)
    assert q.replace(accumulate_every=8).accumulate_every == 8


def _preset_dict(**changes):
    d = PRESETS["amp_bf16"].to_dict()
    d.update(changes)
    return d


@pytest.mark.parametrize("change, exc, match", [
    (dict(weights="bfloat16"), ValueError, "unknown role or key 'weights'.*roles: params"),
    (dict(compute="bf16"), ValueError, "compute: unknown format 'bf16'; known formats"),
    (dict(compute={"format": "bfloat16", "rounding": "round"}), ValueError,
     "compute: rounding must be one of"),
    (dict(compute={"format": "float8_e4m3fn", "overflow": "inf"}), ValueError,
     "compute: overflow='inf'"),
    (dict(compute={"rounding": "up"}), ValueError, "compute needs a 'format'"),
    (dict(compute={"format": "bfloat16", "scale": 2}), ValueError,
     r"compute: unknown field\(s\) \['scale'\]"),
    (dict(compute={"format": "bfloat16", "scaling": {"kind": "block"}}), ValueError,
     "compute.scaling.kind must be one of"),
    (dict(compute={"format": "bfloat16", "scaling": {"kind": "mx", "blocks": 16}}), ValueError,
     r"compute.scaling: unknown field\(s\) \['blocks'\]"),
    (dict(compute={"format": "bfloat16", "scaling": {"kind": "mx", "scale_rule": "round"}}),
     ValueError, "scale_rule must be one of"),
    (dict(compute={"format": {"exponent_bits": 9, "mantissa_bits": 2}}), ValueError,
     "compute.format: exponent_bits must be an integer in"),
    (dict(compute={"format": {"exp": 4, "mantissa_bits": 2}}), ValueError,
     "unknown format field"),
    (dict(compute=None), ValueError, "role 'compute' needs a format"),
    (dict(compute=3), TypeError, "compute must be a format name or an object"),
    (dict(loss_scaling={"kind": "dynamic", "init": 2}), ValueError, "loss_scaling: unknown"),
    (dict(loss_scaling={"kind": "adaptive"}), ValueError, "loss_scaling.kind must be"),
    (dict(loss_scaling={"growth_factor": 0.5}), ValueError, "loss_scaling: growth_factor"),
    (dict(accumulate_every=0), ValueError, "accumulate_every must be an integer >= 1"),
])
def test_bad_policies(change, exc, match):
    with pytest.raises(exc, match=match):
        PrecisionPolicy.from_dict(_preset_dict(**change))


def test_bad_policy_documents():
    d = PRESETS["amp_bf16"].to_dict()
    del d["gradients"]
    with pytest.raises(ValueError, match="the policy has no 'gradients'"):
        PrecisionPolicy.from_dict(d)
    with pytest.raises(ValueError, match="not valid JSON"):
        PrecisionPolicy.from_json("{params: bfloat16")
    with pytest.raises(TypeError, match="a policy must be a JSON object"):
        PrecisionPolicy.from_json("[1, 2]")
    with pytest.raises(ValueError, match="unknown policy 'bf16'; presets: fp32, amp_bf16"):
        PrecisionPolicy.preset("bf16")
    with pytest.raises(ValueError, match="unknown role 'weights'"):
        PRESETS["fp32"].role("weights")


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=15))
def test_any_unknown_key_is_named(key):
    if key in ROLES or key in ("name", "loss_scaling", "accumulate_every", "norm_accumulate",
                               "softmax_accumulate", "accumulate_chunk"):
        return
    with pytest.raises(ValueError, match="unknown role or key"):
        PrecisionPolicy.from_dict(_preset_dict(**{key: "bfloat16"}))


def test_apply_roles():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    amp = get_policy("amp_bf16")
    np.testing.assert_array_equal(amp.compute.apply(x), quantize(x, "bfloat16"))
    np.testing.assert_array_equal(amp.master.apply(x), x)
    sr = Precision("bfloat16", rounding="stochastic")
    with pytest.raises(TypeError, match="stochastic rounding needs rng"):
        sr.apply(x)
    np.testing.assert_array_equal(sr.apply(x, rng=np.random.default_rng(1)),
                                  quantize(x, "bfloat16", rounding="stochastic",
                                           rng=np.random.default_rng(1)))
    hybrid = get_policy("fp8_hybrid")
    with pytest.raises(TypeError, match="delayed scaling: pass state="):
        hybrid.compute.apply(x)
    state = hybrid.compute.new_state()
    y = hybrid.compute.apply(x, state=state)
    np.testing.assert_array_equal(y, np.clip(quantize(x, "float8_e4m3fn", overflow="saturate"),
                                             -448, 448))  # scale 1 at the first step
    assert state.amax_history[0] == np.abs(x).max()
    mx = get_policy("mxfp8")
    np.testing.assert_array_equal(mx.compute.apply(x), mx_quantize(
        x, "float8_e4m3fn", scale_rule="ceil").dequantize())
    t = Precision("float8_e5m2", scaling=TensorScaling())
    yt = t.apply(x * 1e-6)
    assert np.abs(yt - x * 1e-6).max() <= 0.125 * np.abs(x * 1e-6).max()


def test_k_bit_stochastic_rounding_in_a_precision():
    """sr_bits reaches every element rounding (unscaled, per-tensor, MX), survives JSON, and
    is refused without stochastic rounding."""
    from normlab.precision import MXScaling, Precision, TensorScaling, mx_quantize, quantize

    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    p = Precision("float8_e4m3fn", "stochastic", sr_bits=3)
    got = p.apply(x, rng=np.random.default_rng(1))
    want = quantize(x, "float8_e4m3fn", rounding="stochastic", rng=np.random.default_rng(1),
                    sr_bits=3)
    np.testing.assert_array_equal(got, want)
    assert Precision.from_value(p.to_value()) == p and "3 random bits" in str(p)
    mx = Precision("float4_e2m1fn", "stochastic", scaling=MXScaling(), sr_bits=2)
    np.testing.assert_array_equal(
        mx.apply(x, rng=np.random.default_rng(2)),
        mx_quantize(x, "float4_e2m1fn", rounding="stochastic", rng=np.random.default_rng(2),
                    sr_bits=2).dequantize())
    t = Precision("float8_e5m2", "stochastic", scaling=TensorScaling(), sr_bits=4)
    assert t.apply(x, rng=np.random.default_rng(3)).shape == x.shape
    with pytest.raises(ValueError, match="sr_bits applies to rounding='stochastic'"):
        Precision("bfloat16", sr_bits=3)
    with pytest.raises(ValueError, match="sr_bits"):
        Precision("bfloat16", "stochastic", sr_bits=0)
