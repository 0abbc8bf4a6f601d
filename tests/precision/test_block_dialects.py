"""The block dialects by name (NVFP4, FP8 blocks and rows, MX's 2D tiles, integer elements and
narrower scales, the Hadamard rotation): each as data in a policy, what sets the dialects apart,
and the properties their tools state. Bit-for-bit agreement with the tools themselves is
test_block_golden.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from normlab.precision import (
    MX_INT_FORMATS,
    MXINT8,
    SCALINGS,
    TE_SIGNS,
    FP8BlockScaling,
    FP8RowScaling,
    HadamardScaling,
    MXScaling,
    NVFP4Scaling,
    Precision,
    PrecisionPolicy,
    Tiling,
    fp8_block_quantize,
    fp8_row_quantize,
    get_policy,
    hadamard_matrix,
    mx_quantize,
    nvfp4_quantize,
    quantize,
    rht,
    rht_inverse,
)

DIALECTS = [
    ("float4_e2m1fn", {"kind": "nvfp4"}),
    ("float4_e2m1fn", {"kind": "nvfp4", "two_d": True}),
    ("float4_e2m1fn", {"kind": "nvfp4", "global_scale": "row", "four_over_six": "mse",
                       "e4m3_max": 256}),
    ("float4_e2m1fn", {"kind": "nvfp4", "dialect": "torchao", "global_scale": "none"}),
    ("float8_e4m3fn", {"kind": "fp8_blocks"}),
    ("float8_e4m3fn", {"kind": "fp8_blocks", "dialect": "te", "two_d": True, "pow2": False}),
    ("float8_e4m3fn", {"kind": "fp8_blocks", "dialect": "torchao"}),
    ("float8_e4m3fn", {"kind": "fp8_rows", "pow2": False}),
    ("float8_e4m3fn", {"kind": "mx", "scale_rule": "rceil", "two_d": True}),
    ("float4_e2m1fn", {"kind": "mx", "scale_bits": 5}),
    ({"exponent_bits": 1, "mantissa_bits": 6, "bias": 1, "inf_nan": "none", "name": "mxint8"},
     {"kind": "mx"}),
    ("float4_e2m1fn", {"kind": "hadamard", "scaling": {"kind": "nvfp4"}}),
]


def _x(shape=(64, 256), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.uniform(-12, 4, shape[:-1] + (1,)))
            ).astype(np.float32)


@pytest.mark.parametrize("fmt, scaling", DIALECTS)
def test_each_dialect_is_data_in_a_policy(fmt, scaling):
    p = Precision.from_value({"format": fmt, "scaling": scaling})
    assert Precision.from_value(json.loads(json.dumps(p.to_value()))) == p
    data = {**get_policy("amp_bf16").to_dict(), "name": "blocks", "compute": p.to_value()}
    pol = PrecisionPolicy.from_json(json.dumps(data))
    assert PrecisionPolicy.from_json(pol.to_json()) == pol
    assert p.scaling.describe() in pol.describe()
    x = _x()
    y = p.apply(x)
    assert y.shape == x.shape and y.dtype == np.float32 and np.isfinite(y).all()
    q = p.quantize(x)
    np.testing.assert_array_equal(q.dequantize(), y)
    assert 0 < q.stats(x).rel_error < 0.5


def test_each_dialect_names_its_source():
    for kind, cls in (("nvfp4", NVFP4Scaling), ("fp8_blocks", FP8BlockScaling),
                      ("fp8_rows", FP8RowScaling)):
        assert SCALINGS[kind] is cls
    assert "reference_nvfp4.py" in NVFP4Scaling().source
    assert "nvfp4_tensor.py" in NVFP4Scaling(dialect="torchao", global_scale="none").source
    assert "per_token_cast_to_fp8" in FP8BlockScaling().source
    assert "BlockwiseQuantizerReference" in FP8BlockScaling(dialect="te").source
    assert "torch_blockwise_scale_act_quant_lhs" in FP8BlockScaling(dialect="torchao").source
    assert "amax_to_scale" in FP8RowScaling().source


def test_mx_json_of_a_recipe_before_two_d_is_unchanged():
    assert MXScaling(scale_rule="ceil").to_dict() == {"kind": "mx", "block_size": 32,
                                                      "scale_rule": "ceil", "axis": -1}
    assert MXScaling(two_d=True).to_dict()["two_d"] is True


@pytest.mark.parametrize("scaling, message", [
    ({"kind": "nvfp4", "dialect": "torchao", "two_d": True}, "two_d=True"),
    ({"kind": "nvfp4", "global_scale": "none"}, "always has a global scale"),
    ({"kind": "nvfp4", "e4m3_max": 256}, "applies to four_over_six only"),
    ({"kind": "nvfp4", "two_d": True, "global_scale": "row"}, "takes 1x16 blocks"),
    ({"kind": "nvfp4", "four_over_six": "max"}, "four_over_six must be one of"),
    ({"kind": "fp8_blocks", "dialect": "torchao", "pow2": True}, "no power-of-two"),
    ({"kind": "fp8_blocks", "dialect": "cublas"}, "dialect must be one of"),
    ({"kind": "mx", "scale_rule": "nearest", "scale_bits": 5}, "8 scale bits"),
    ({"kind": "hadamard"}, "is required"),
    ({"kind": "hadamard", "scaling": {"kind": "nvfp4"}, "size": 12}, "power of two"),
    ({"kind": "hadamard", "scaling": {"kind": "nvfp4"}, "size": 8}, "needs signs='none'"),
])
def test_bad_parameters_are_refused_by_name(scaling, message):
    with pytest.raises(ValueError, match=message):
        Precision.from_value({"format": "float4_e2m1fn", "scaling": scaling})


def test_nvfp4_refuses_other_elements_and_sr_with_4over6():
    p = Precision.from_value({"format": "float8_e4m3fn", "scaling": {"kind": "nvfp4"}})
    with pytest.raises(ValueError, match="must be float4_e2m1fn"):
        p.apply(_x())
    with pytest.raises(ValueError, match="rounding='stochastic' is not defined"):
        nvfp4_quantize(_x(), four_over_six="mae", rounding="stochastic",
                       rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="2D blocks need at least 2 dimensions"):
        nvfp4_quantize(np.ones(16, np.float32), two_d=True)


@pytest.mark.parametrize("quant", [
    lambda x: nvfp4_quantize(x, two_d=True),
    lambda x: nvfp4_quantize(x, two_d=True, four_over_six="mse"),
    lambda x: fp8_block_quantize(x, two_d=True),
    lambda x: fp8_block_quantize(x, dialect="te", two_d=True),
    lambda x: mx_quantize(x, "float8_e4m3fn", two_d=True, scale_rule="rceil"),
])
def test_2d_tiles_quantize_a_matrix_and_its_transpose_alike(quant):
    """The point of 2D weight tiles (TE's NVFP4 and MXFP8 weights, DeepSeek-V3's 128x128):
    the weight the forward reads and its transpose (the data gradient's) are one tensor."""
    x = _x((256, 384), 1)
    a, b = quant(x), quant(np.ascontiguousarray(x.T))
    np.testing.assert_array_equal(a.dequantize().T, b.dequantize())


def test_1d_blocks_differ_row_wise_and_column_wise():
    x = _x((128, 128), 2)
    a = nvfp4_quantize(x).dequantize()
    b = nvfp4_quantize(x, axis=0).dequantize()
    assert (a != b).mean() > 0.3


def test_te_keeps_subnormal_and_zero_e4m3_scales_torchao_clamps_at_2_to_minus_6():
    """A tensor whose blocks span 2^-30 .. 1: TE's block scales reach E4M3's subnormals and 0
    (and its elements keep those blocks' shape); torchao's never go below 2^-6."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 64)) * np.exp2(np.linspace(-30, 0, 64))[:, None]).astype(
        np.float32)
    te, ao = nvfp4_quantize(x), nvfp4_quantize(x, dialect="torchao")
    assert te.scales.min() == 0 and ((te.scales > 0) & (te.scales < 2.0**-6)).any()
    assert ao.scales.min() == 2.0**-6
    sub = (te.scales > 0) & (te.scales < 2.0**-6)
    rows = np.flatnonzero(sub.any(axis=1))
    assert (te.elements[rows] != ao.elements[rows]).any()


def test_te_nvfp4_values_decode_as_its_dequantize_kernel():
    """value = q * ((S_dec_b * amax) * (1 / 2688)), float32 products in that order
    (dequantize_fp4_kernel), with amax the tensor's and S_dec_b the E4M3 block scale."""
    x = _x((8, 64), 4)
    t = nvfp4_quantize(x)
    amax = np.float32(np.abs(x).max())
    d = (t.scales * amax).astype(np.float32) * np.float32(1 / 2688)
    want = t.elements * np.repeat(d.astype(np.float32), 16, axis=1)
    np.testing.assert_array_equal(t.dequantize(), want)
    assert (t.global_scale == amax).all()


def test_fp8_power_of_two_rules_round_the_safe_way():
    """DeepGEMM's UE8M0 rounds the decode scale up, TE's pow2 the encode scale down: neither
    lets a scaled value exceed 448 (no saturation); both scales are powers of two."""
    x = _x((32, 512), 5)
    for dialect in ("deepgemm", "te"):
        t = fp8_block_quantize(x, dialect=dialect, pow2=True)
        m, _ = np.frexp(t.scales)
        assert (m == 0.5).all()
        v = np.abs(x.astype(np.float64) * t.tiling.expand(t.encode))
        assert v.max() <= 448
    dg, te = fp8_block_quantize(x, pow2=True), fp8_block_quantize(x, dialect="te")
    assert ((dg.scales >= te.scales) & (dg.scales <= 2 * te.scales)).all()


def test_fp8_amax_floors():
    """An all-zero block: DeepGEMM's scale from its 1e-4 floor, TE's scale 1, torchao's from
    1e-12 (float64 quotient)."""
    x = np.zeros((1, 128), np.float32)
    assert fp8_block_quantize(x).scales[0, 0] == np.float32(np.float32(1e-4) / np.float32(448))
    assert fp8_block_quantize(x, dialect="te").scales[0, 0] == 1
    assert fp8_block_quantize(x, dialect="torchao").scales[0, 0] == np.float32(1) / np.float32(
        448 / 1e-12)
    for d in ("deepgemm", "te", "torchao"):
        assert (fp8_block_quantize(x, dialect=d).dequantize() == 0).all()


def test_fp8_rows_divide_by_their_scale():
    x = _x((16, 100), 6)
    r = fp8_row_quantize(x)
    assert r.scales.shape == (16, 1)
    np.testing.assert_array_equal(r.dequantize(), r.elements / r.scales)
    assert (np.frexp(r.scales)[0] == 0.5).all()


def test_mxint8_is_the_ocp_integer_grid():
    """MXINT8's values are k / 64 for |k| <= 127 (OCP MX v1.0's implicit scale 2^-6, the
    symmetric range microxcaling clamps to), and its scale rule sees emax 0."""
    v = np.unique(MXINT8.values())
    np.testing.assert_array_equal(v, np.arange(-127, 128) / 64)
    assert MXINT8.emax == 0 and MX_INT_FORMATS["mxint4"].max_finite == 7 / 4
    assert np.array_equal(np.unique(MX_INT_FORMATS["mxint2"].values()), [-1.0, 0.0, 1.0])
    x = _x((4, 64), 7)
    t = mx_quantize(x, MXINT8)
    k = t.elements * 64
    np.testing.assert_array_equal(k, np.round(k))
    X = t.expanded_scales().astype(np.float64)
    want = np.clip(np.round(x / X * 64), -127, 127) / 64  # round half even, as numpy's
    np.testing.assert_array_equal(t.elements, want.astype(np.float32))


def test_mx_scale_bits_narrow_the_shared_exponent():
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 2.0**-40
    assert mx_quantize(x, "float4_e2m1fn").scales[0, 0] == 2.0**-42
    assert mx_quantize(x, "float4_e2m1fn", scale_bits=5).scales[0, 0] == 2.0**-15  # clamped
    x[0, 0] = 2.0**60
    assert np.isnan(mx_quantize(x, "float4_e2m1fn", scale_bits=5).scales[0, 0])  # beyond 15


def test_hadamard_transform_is_tes_rotation_and_orthogonal():
    T = hadamard_matrix()
    np.testing.assert_array_equal(T @ T.T, np.eye(16))
    assert T[:, 0].tolist() == (np.array(TE_SIGNS) / 4).tolist()  # diag(s) H / 4: column 0
    x = quantize(_x((8, 64), 8), "bfloat16")  # bfloat16 values: x @ T is exact in float64
    want = (x.astype(np.float64).reshape(8, 4, 16) @ T).reshape(8, 64).astype(np.float32)
    np.testing.assert_array_equal(rht(x), want)
    np.testing.assert_array_equal(rht_inverse(rht(x)), x)
    y = quantize(_x((16, 64), 8), "bfloat16")
    np.testing.assert_array_equal(rht(y, axis=0), rht(y.T).T)
    assert np.allclose(hadamard_matrix(8, "none") @ hadamard_matrix(8, "none"), np.eye(8))
    with pytest.raises(ValueError, match="multiple of the Hadamard size"):
        rht(np.ones((2, 20), np.float32))


def test_hadamard_dialect_is_the_gemm_of_the_rotated_operands():
    """TE rotates both operands of the weight-gradient GEMM along the axis it sums over and
    multiplies the quantized rotations; the dialect's values (rotated back) give that product:
    (Q(x T) T^T)(T Q(T^T y)) = Q(x T) Q(T^T y), T orthogonal."""
    x, y = _x((32, 64), 9), _x((64, 24), 10)
    exact = x.astype(np.float64) @ y
    np.testing.assert_allclose(rht(x).astype(np.float64) @ rht(y, axis=0), exact, rtol=0,
                               atol=1e-6 * np.abs(exact).max())
    rot = Precision.from_value({"format": "float4_e2m1fn", "scaling": {
        "kind": "hadamard", "scaling": {"kind": "nvfp4"}}})
    qx, qy = rot.quantize(x), rot.quantize(y, axis=0)
    direct = (qx.inner.dequantize().astype(np.float64)
              @ qy.inner.dequantize().astype(np.float64))
    np.testing.assert_allclose(rot.apply(x).astype(np.float64) @ rot.apply(y, axis=0),
                               direct, rtol=1e-5, atol=1e-6 * np.abs(direct).max())
    assert isinstance(rot.scaling, HadamardScaling) and qx.elements.shape == x.shape
    np.testing.assert_array_equal(qx.dequantize(), rht_inverse(qx.inner.dequantize()))


def test_tiling_splits_and_merges():
    x = np.arange(7 * 45, dtype=np.float32).reshape(7, 45)
    for t in (Tiling.of(x.shape, 16, -1), Tiling.of(x.shape, 16, 0), Tiling.of(x.shape, 8,
                                                                               two_d=True)):
        b = t.split(x)
        np.testing.assert_array_equal(t.merge(b), x)
        assert t.to_grid(b[..., 0]).shape == t.grid
        assert t.expand(t.to_grid(b[..., 0])).shape == x.shape
    with pytest.raises(ValueError, match="scalar"):
        Tiling.of((), 16)


def test_normlab_trains_with_block_dialects():
    """normlab's model with NVFP4 weights in 16x16 tiles, FP8 1x128 activations and NVFP4
    gradients with 8-bit stochastic rounding, from the policy's JSON (normlab train
    --precision)."""
    from normlab.train import TrainConfig, Trainer

    nv = {"format": "float4_e2m1fn", "scaling": {"kind": "nvfp4"}}
    data = {**get_policy("amp_bf16").to_dict(), "name": "nvfp4_try",
            "params": {**nv, "scaling": {"kind": "nvfp4", "two_d": True}},
            "compute": {"format": "float8_e4m3fn", "scaling": {"kind": "fp8_blocks",
                                                                "block": 16}},
            "gradients": {**nv, "rounding": "stochastic", "sr_bits": 8}}
    model = {"n_layers": 1, "d_model": 32, "n_heads": 2, "seq_len": 16}
    base = TrainConfig(steps=3, warmup=1, batch_size=2, eval_interval=3, eval_batches=1)
    cfg = base.with_overrides({**{f"model.{k}": v for k, v in model.items()},
                               "precision": json.dumps(data)})
    res = Trainer(cfg).run()
    assert np.isfinite(res.final_val_loss)
