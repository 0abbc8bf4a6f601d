"""Per-tensor, delayed (TransformerEngine) and MX block scaling (OCP MX v1.0)."""

import numpy as np
import pytest

from normlab.precision import (
    FORMATS,
    DelayedScaling,
    FloatFormat,
    MXScaling,
    TensorScaling,
    amax,
    error_stats,
    mx_dequantize,
    mx_quantize,
    mx_scale,
    quantize,
    scaled_qdq,
    tensor_scale,
)

F32MAX = float(np.finfo(np.float32).max)


def test_amax():
    assert amax(np.array([-3.0, 2.0], np.float32)) == 3.0
    assert np.isnan(amax(np.array([1.0, np.nan])))
    assert amax(np.zeros((0, 4))) == 0.0


def test_tensor_scale():
    e4 = "float8_e4m3fn"
    assert tensor_scale(2.0, e4) == 224.0
    assert tensor_scale(2.0, e4, margin=2) == 56.0
    assert tensor_scale(3.0, e4) == float(np.float32(448) / np.float32(3))  # float32 division
    assert tensor_scale(3.0, e4, power_of_two=True) == 128.0
    assert tensor_scale(0.0, e4, previous=7.0) == 7.0  # amax 0: keep the previous scale
    assert tensor_scale(np.inf, e4, previous=7.0) == 7.0
    assert tensor_scale(np.nan, e4) == 1.0
    assert tensor_scale(1e-44, e4) == F32MAX  # an infinite scale becomes float32's max (TE #786)


def test_scaled_qdq_is_two_float32_multiplications_around_a_saturating_cast():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32) * 100
    s = 1.7
    want = quantize(x * np.float32(s), "float8_e4m3fn", overflow="saturate") * (
        np.float32(1) / np.float32(s))
    np.testing.assert_array_equal(scaled_qdq(x, "float8_e4m3fn", s), want)
    assert np.abs(scaled_qdq(x, "float8_e4m3fn", 100.0)).max() <= 4.48 * 1.0001


def test_tensor_scaling_recipe():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4096).astype(np.float32) * 1e-5  # far below e4m3's range
    t = TensorScaling().quantize(x, "float8_e4m3fn")
    y, s = t.dequantize(), t.scale
    assert s == tensor_scale(amax(x), "float8_e4m3fn")
    np.testing.assert_array_equal(TensorScaling().qdq(x, "float8_e4m3fn"), y)
    st = error_stats(x, y, "float8_e4m3fn", s)
    assert t.stats(x) == st
    assert st.saturated == 0 and st.flushed < 0.01 and st.rel_error < 0.05
    unscaled = quantize(x, "float8_e4m3fn")
    assert error_stats(x, unscaled, "float8_e4m3fn").flushed > 0.9  # why scaling exists


def test_delayed_scaling_uses_the_history_like_transformer_engine():
    """history length 3, 'max': a spike of 8 rules the scale for exactly 3 updates; the scale
    used in step t is the one computed after step t-1."""
    st = DelayedScaling(amax_history_len=3).new_state("float8_e4m3fn")
    used, after = [], []
    for a in (2.0, 8.0, 1.0, 1.0, 1.0, 0.0):
        used.append(st.scale)
        st.qdq(np.array([a, -a / 2], np.float32))
        after.append(st.update())
    assert used[0] == 1.0 and used[1:] == after[:-1]
    assert after == [224.0, 56.0, 56.0, 56.0, 448.0, 448.0]
    recent = DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent").new_state(
        "float8_e4m3fn")
    out = []
    for a in (2.0, 8.0, 1.0, 0.0):
        recent.qdq(np.array([a], np.float32))
        out.append(recent.update())
    assert out == [224.0, 56.0, 448.0, 448.0]  # amax 0 keeps the previous scale


def test_delayed_scaling_accumulates_micro_batches_and_rolls():
    st = DelayedScaling(amax_history_len=4, margin=1).new_state("float8_e5m2")
    st.qdq(np.array([3.0], np.float32))
    st.qdq(np.array([-5.0], np.float32))  # a second micro-batch in the same step
    np.testing.assert_array_equal(st.amax_history, [5, 0, 0, 0])
    assert st.update() == float(np.float32(57344) / np.float32(5)) / 2
    np.testing.assert_array_equal(st.amax_history, [0, 0, 0, 5])


def test_delayed_scaling_saturates_what_the_stale_scale_cannot_hold():
    st = DelayedScaling(amax_history_len=1).new_state("float8_e4m3fn")
    st.qdq(np.array([1.0], np.float32))
    st.update()  # scale 448 for amax 1
    y = st.qdq(np.array([10.0], np.float32))  # a jump the delayed scale did not see
    assert y[0] == 1.0  # clipped to 448 / 448


# --- MX ---------------------------------------------------------------------------------------

def test_mx_worked_example_amax_7_in_e2m1():
    """pytorch/ao#436: the floor rule clips the block maximum, the ceil rule does not."""
    x = np.array([7.0] + [0.5] * 31, np.float32)
    floor = mx_quantize(x, "float4_e2m1fn")
    ceil = mx_quantize(x, "float4_e2m1fn", scale_rule="ceil")
    assert floor.scales[0] == 1.0 and floor.dequantize()[0] == 6.0
    assert ceil.scales[0] == 2.0 and ceil.dequantize()[0] == 8.0
    assert floor.stats(x).saturated == 1 / 32 and ceil.stats(x).saturated == 0  # 7 > 6 + 1
    near = mx_quantize(x, "float4_e2m1fn", scale_rule="nearest")  # 7/6 -> E8M0 nearest: 1
    assert near.scales[0] == 1.0


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float6_e3m2fn",
                                  "float6_e2m3fn", "float4_e2m1fn"])
def test_mx_scale_rules(name):
    fmt = FORMATS[name]
    assert fmt.emax == {"float8_e4m3fn": 8, "float8_e5m2": 15, "float6_e3m2fn": 4,
                        "float6_e2m3fn": 2, "float4_e2m1fn": 2}[name]  # microxcaling's emax
    rng = np.random.default_rng(2)
    a = np.exp(rng.uniform(-80, 80, 20000))
    a = np.concatenate([a, a.astype(np.float32), fmt.max_finite * 2.0 ** np.arange(-60, 60.0),
                        np.nextafter(fmt.max_finite * 2.0 ** np.arange(-60, 60.0), np.inf)])
    X = mx_scale(a, fmt, "floor")
    inner = (X > 2.0**-127) & (X < 2.0**127)  # not clamped to E8M0's range
    assert inner.mean() > 0.9
    assert (X * 2.0**fmt.emax <= a)[inner].all() and (a < 2 * X * 2.0**fmt.emax)[inner].all()
    assert (X[~inner] == 2.0**-127).all()
    X = mx_scale(a, fmt, "ceil")  # the smallest power of two with a / X <= max
    inner = X > 2.0**-127
    assert (a / X <= fmt.max_finite).all() and (a / (X / 2) > fmt.max_finite)[inner].all()
    X = mx_scale(a, fmt, "nearest")
    np.testing.assert_array_equal(X, quantize(a / fmt.max_finite, "float8_e8m0fnu"))


def test_torchao_rules_on_the_e2m1_worked_example():
    """amax = 7, 5, 6 in E2M1 (max 6, emax 2): torchao's EVEN rounds 7 = 1.75 2^2 up to 8 and
    5 = 1.25 2^2 to 6 (same binade), CEIL takes the next power of two, RCEIL is ceil(log2(a/6))."""
    a = [7.0, 5.0, 6.0, 0.0, np.inf]
    tiny = 2.0**-127
    want = {"floor": [1, 1, 1, tiny, np.nan], "ceil": [2, 1, 1, tiny, np.nan],
            "rceil": [2, 1, 1, tiny, np.nan], "even": [2, 1, 1, tiny, np.nan],
            "ceil_amax": [2, 2, 2, tiny, np.nan]}
    for rule, X in want.items():
        np.testing.assert_array_equal(mx_scale(a, "float4_e2m1fn", rule), X, err_msg=rule)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float6_e3m2fn",
                                  "float6_e2m3fn", "float4_e2m1fn"])
def test_rceil_even_and_ceil_amax_by_their_definitions(name):
    """rceil agrees with the exact ceil rule on random float32 amax and on max 2^k and its
    neighbours; ceil_amax is 2^(ceil(log2 a) - emax); even is floor applied to a rounded half
    up to the element's precision (checked with quantize's nearest_away on that precision)."""
    fmt = FORMATS[name]
    rng = np.random.default_rng(5)
    a = rng.integers(1, 0x7F000000, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = (fmt.max_finite * 2.0 ** np.arange(-120, 110.0)).astype(np.float32)
    inf, zero = np.float32(np.inf), np.float32(0)
    a = np.concatenate([a, b, np.nextafter(b, inf), np.nextafter(b, zero)])
    a64 = a.astype(np.float64)
    np.testing.assert_array_equal(mx_scale(a, fmt, "rceil"), mx_scale(a, fmt, "ceil"))
    e = np.ceil(np.log2(a64)) - fmt.emax
    exact = np.ldexp(1.0, np.clip(e, -127, 127).astype(int))
    np.testing.assert_array_equal(mx_scale(a, fmt, "ceil_amax"), exact)
    up = quantize(a, FloatFormat(8, fmt.mantissa_bits), rounding="nearest_away").astype(float)
    np.testing.assert_array_equal(mx_scale(a, fmt, "even"), mx_scale(up, fmt, "floor"))


def test_even_rule_still_saturates_in_e4m3_and_never_in_e2m1():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((400, 32)).astype(np.float32)
    e2 = mx_quantize(x, "float4_e2m1fn", scale_rule="even")
    assert e2.stats(x).saturated == 0
    floor = mx_quantize(x, "float4_e2m1fn", scale_rule="floor")
    assert floor.stats(x).saturated > 0
    y = np.full(32, 1.0, np.float32)
    y[0] = 470.0  # 470 -> 486 at E4M3 precision: still below 512, X = 1, 470 saturates to 448
    t = mx_quantize(y, "float8_e4m3fn", scale_rule="even")
    assert t.scales[0] == 1.0 and t.dequantize()[0] == 448.0


def test_mx_scale_edges():
    e4 = "float8_e4m3fn"
    np.testing.assert_array_equal(mx_scale([0.0, 1e-45, 3e38], e4, "floor"),
                                  [2.0**-127, 2.0**-127, 2.0**(127 - 8)])
    np.testing.assert_array_equal(mx_scale([0.0, 3e38], e4, "ceil"), [2.0**-127, 2.0**120])
    assert np.isnan(mx_scale([np.inf, np.nan], e4, "floor")).all()
    assert np.isnan(mx_scale([np.inf], e4, "ceil")).all()


def test_mx_quantize_blocks_padding_and_axis():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 70)) * np.exp(rng.uniform(-5, 5, (3, 1)))).astype(np.float32)
    t = mx_quantize(x, "float8_e4m3fn", axis=1)
    assert t.elements.shape == x.shape and t.scales.shape == (3, 3) and t.axis == 1
    for r in range(3):
        for b in range(3):
            blk = x[r, 32 * b: 32 * b + 32]
            X = mx_scale(np.abs(blk).max(), "float8_e4m3fn")
            want = quantize(blk / np.float32(X), "float8_e4m3fn", overflow="saturate")
            np.testing.assert_array_equal(t.elements[r, 32 * b: 32 * b + 32], want)
            assert t.scales[r, b] == X
    grid = FORMATS["float8_e4m3fn"].values()
    assert np.isin(t.elements, grid).all()
    np.testing.assert_array_equal(mx_dequantize(t), t.elements * np.repeat(t.scales, 32,
                                                                           axis=1)[:, :70])
    tt = mx_quantize(x.T, "float8_e4m3fn", axis=0)  # the same blocks along the other axis
    np.testing.assert_array_equal(tt.dequantize().T, t.dequantize())
    np.testing.assert_array_equal(MXScaling().qdq(x, "float8_e4m3fn", axis=1), t.dequantize())


def test_mx_nonfinite_block_is_nan_and_others_are_not():
    x = np.ones((2, 32), np.float32)
    x[0, 5] = np.inf
    y = mx_quantize(x, "float8_e4m3fn").dequantize()
    assert np.isnan(y[0]).all() and (y[1] == 1).all()


def test_mx_ceil_never_saturates_and_floor_does_with_outliers():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    x[:, 0] = 1.9 * 2.0 ** rng.integers(-3, 4, 256)  # block maxima just below a power of two
    floor = mx_quantize(x, "float8_e4m3fn").stats(x)
    ceil = mx_quantize(x, "float8_e4m3fn", scale_rule="ceil").stats(x)
    assert ceil.saturated == 0 and floor.saturated > 0


def test_mx_directed_rounding_is_exact_for_tiny_elements():
    """Elements 2^130 below the block maximum: the scaled values are float32 subnormals, which
    only directed rounding can tell from 0 (mx_quantize then scales in float64)."""
    x = np.zeros(32, np.float32)
    x[0], x[1] = 2.0**100, 2.0**-40
    t = mx_quantize(x, "float8_e4m3fn", rounding="up")
    assert t.elements[1] == 2.0**-9  # the smallest subnormal, not 0
    assert mx_quantize(x, "float8_e4m3fn").elements[1] == 0.0


def test_error_stats():
    x = np.array([1.0, 2.0, 0.01, 1000.0, 464.0, 465.0])
    y = np.array([1.0, 2.0, 0.0, 448.0, 448.0, 448.0])
    st = error_stats(x, y, "float8_e4m3fn")
    assert st.flushed == 1 / 6 and st.saturated == 2 / 6 and st.max_abs_error == 552.0
    assert st.rel_error == pytest.approx(np.linalg.norm(y - x) / np.linalg.norm(x))


def test_bad_arguments():
    x = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="scale_rule must be one of"):
        mx_quantize(x, scale_rule="round")
    with pytest.raises(ValueError, match="block_size must be an integer in"):
        mx_quantize(x, block_size=0)
    with pytest.raises(ValueError, match="axis must be an integer in"):
        mx_quantize(x, axis=1)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        mx_quantize(np.float32(1.0))
    with pytest.raises(ValueError, match="rounding must be one of"):
        mx_quantize(x, rounding="nearest")
    with pytest.raises(ValueError, match="amax_compute_algo must be one of"):
        DelayedScaling(amax_compute_algo="mean")
    with pytest.raises(ValueError, match="amax_history_len must be an integer in"):
        DelayedScaling(amax_history_len=0)
    with pytest.raises(TypeError, match="margin must be an integer"):
        TensorScaling(margin=0.5)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        scaled_qdq(x, "float8_e4m3fn", 0.0)
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        amax(np.arange(3))
    with pytest.raises(TypeError, match="must be an MXTensor"):
        mx_dequantize(x)
