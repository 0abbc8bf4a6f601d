"""quantize kernel: bit-exact with normlab.precision.quantize for every format, rounding mode and
overflow mode (stochastic rounding included, for the same generator state); unbiased."""

import numpy as np
import pytest

from normlab import kernels as K
from normlab.precision import quantize as Q

FORMATS = ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn",
           "float4_e2m1fn", "float8_e8m0fnu", "float32", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "float8_e4m3b11fnuz"]
MODES = ["nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "up", "down",
         "stochastic"]


def _values(rng, dtype):
    """Every binade from float32's subnormals to its overflow, plus the specials."""
    x = rng.normal(size=6000) * np.exp2(rng.uniform(-150, 130, size=6000))
    x = x.astype(dtype)
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 3.0]
    return x


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("overflow", [None, "saturate"])
def test_bit_exact_with_the_reference(rng, src, fmt, rounding, overflow):
    with np.errstate(over="ignore"):
        x = _values(rng, src)
    kw = dict(rounding=rounding, overflow=overflow)
    a = K.quantize(x, fmt, rng=np.random.default_rng(3), **kw)
    b = Q(x, fmt, rng=np.random.default_rng(3), **kw)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn",
                                 "float8_e8m0fnu"])
@pytest.mark.parametrize("k", [1, 3, 8, 13])
def test_k_bit_stochastic_rounding_is_bit_exact_with_the_reference(rng, src, fmt, k):
    with np.errstate(over="ignore"):
        x = _values(rng, src)
    a = K.quantize(x, fmt, rounding="stochastic", rng=np.random.default_rng(4), sr_bits=k)
    b = Q(x, fmt, rounding="stochastic", rng=np.random.default_rng(4), sr_bits=k)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_flush_and_low_precision_inputs(rng):
    with np.errstate(over="ignore"):
        x = _values(rng, np.float32).astype(np.float16)
    for sub in (True, False):
        a = K.quantize(x, "float8_e4m3fn", subnormals=sub)
        b = Q(x, "float8_e4m3fn", subnormals=sub)
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn"])
def test_stochastic_rounding_is_unbiased(fmt):
    """E[q(x)] = x: the mean of many roundings of one value is within 5 standard errors."""
    rng = np.random.default_rng(9)
    x = np.full(200_000, 1.0 + 1.0 / 3.0, np.float32)
    q = K.quantize(x, fmt, rounding="stochastic", rng=rng).astype(np.float64)
    assert len(np.unique(q)) == 2  # the two neighbours only
    se = q.std() / np.sqrt(q.size)
    assert abs(q.mean() - float(x[0])) < 5 * se


def test_stochastic_needs_rng():
    with pytest.raises(TypeError, match="needs rng"):
        K.quantize(np.ones(3, np.float32), "bfloat16", rounding="stochastic")


# The float32 fast path: a C-contiguous float32 ndarray with arguments seen before skips the
# checks (remembered per argument key) and, below PARALLEL_MIN elements, calls the
# single-thread kernel with the format's constants compiled in.

FAST = [("bfloat16", "nearest_even", None, True), ("float16", "nearest_even", None, True),
        ("float8_e4m3fn", "nearest_even", None, True), ("float8_e5m2", "nearest_even", None, True),
        ("float8_e4m3fn", "nearest_even", "saturate", True),
        ("float8_e5m2", "nearest_even", None, False), ("float16", "up", None, False),
        ("float8_e4m3fnuz", "nearest_even", None, True), ("float4_e2m1fn", "down", None, True),
        ("float32", "nearest_even", None, True), ("float32", "toward_zero", "saturate", True)]


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("fmt, rounding, overflow, subnormals", FAST)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3000,), (5, 3, 4), ()])
def test_small_arrays_take_the_fast_path_bit_exact(rng, fmt, rounding, overflow, subnormals,
                                                   shape):
    with np.errstate(over="ignore"):
        x = _values(rng, np.float32)[:int(np.prod(shape))].reshape(shape)
    kw = dict(rounding=rounding, overflow=overflow, subnormals=subnormals)
    want = Q(x, fmt, **kw)
    for _ in range(2):  # the first call plans and remembers, the second takes the fast path
        got = K.quantize(x, fmt, **kw)
        _same_bits(got, want)
        assert got.flags.c_contiguous and got is not x and not np.shares_memory(got, x)


def test_a_repeated_call_is_checked_and_planned_once(rng, monkeypatch):
    from normlab.kernels import rounding as R

    x = rng.standard_normal((4, 50)).astype(np.float32)
    gen = np.random.default_rng(0)  # passed to deterministic roundings: checked, unused
    calls = [(x, "bfloat16", {}), (x[1], "bfloat16", {"overflow": "saturate"}),
             (x, "float16", {}), (x[1], "float16", {"subnormals": False}),
             (x, "float16", {"rng": gen})]
    wants = [Q(v, fmt, **kw) for v, fmt, kw in calls]
    plans = []

    def plan_quantize(*args, **kwargs):
        plans.append(kwargs)
        return plan(*args, **kwargs)

    plan = R._ref.plan_quantize
    monkeypatch.setattr(R, "_RUNS", {})
    monkeypatch.setattr(R._ref, "plan_quantize", plan_quantize)
    for _ in range(3):
        for (v, fmt, kw), want in zip(calls, wants):
            _same_bits(K.quantize(v, fmt, **kw), want)
    assert len(plans) == 5
    K.quantize(x.T, "bfloat16")  # not C-contiguous: planned at every call
    K.quantize(x.T, "bfloat16")
    assert len(plans) == 7


def test_the_fast_path_keeps_nothing_of_one_call_for_another(rng):
    """Calls with other arguments in between: each is the reference's result for its own."""
    from ml_dtypes import bfloat16

    from normlab.precision import FORMATS, FloatFormat

    with np.errstate(over="ignore"):
        x = _values(rng, np.float32)
    e4m3 = FORMATS["float8_e4m3fn"]
    calls = [("bfloat16", {}), ("float16", {}), (np.dtype(bfloat16), {}),
             ("float8_e4m3fn", {}), ("float8_e4m3fn", {"overflow": "saturate"}),
             ("float8_e4m3fn", {"subnormals": False}), ("float8_e4m3fn", {"rounding": "up"}),
             (e4m3, {}), (FloatFormat(4, 3, inf_nan="fn", name="other e4m3fn"), {}),
             (FloatFormat(4, 3, bias=8, inf_nan="fn"), {}),
             ("float16", {"subnormals": np.True_}), ("unit_scaling_e4m3", {})]
    for _ in range(2):
        for fmt, kw in calls:
            _same_bits(K.quantize(x, fmt, **kw), Q(x, fmt, **kw))
    y = x[::-1].copy()  # other values, same arguments
    _same_bits(K.quantize(y, "float8_e4m3fn"), Q(y, "float8_e4m3fn"))


BAD = [(dict(fmt="bfloat17"), ValueError), (dict(fmt=[8, 7]), TypeError),
       (dict(rounding="nearest"), ValueError), (dict(rounding=0), TypeError),
       (dict(overflow="inf", fmt="float8_e4m3fn"), ValueError), (dict(overflow=1), TypeError),
       (dict(subnormals=1), TypeError), (dict(subnormals="yes"), TypeError),
       (dict(sr_bits=3), ValueError), (dict(rng=np.random.default_rng(0)), None),
       (dict(rounding="stochastic"), TypeError), (dict(rng=3), TypeError),
       (dict(fmt="float32", rounding="stochastic"), TypeError),
       (dict(x=np.arange(4)), TypeError), (dict(x=[1, "a"]), TypeError)]


@pytest.mark.parametrize("bad, error", BAD)
def test_bad_arguments_raise_as_the_reference_after_good_calls(rng, bad, error):
    """The same errors (type and message) as ``precision.quantize``, before any work, also
    when the fast path already knows the good arguments around them."""
    x = rng.standard_normal(64).astype(np.float32)
    args = dict(x=x, fmt="bfloat16", rounding="nearest_even", overflow=None, subnormals=True)
    K.quantize(x, "bfloat16")
    K.quantize(x, "bfloat16", subnormals=True, rng=np.random.default_rng(0))
    K.quantize(x, "float8_e4m3fn")
    K.quantize(x, "float32", rounding="stochastic", rng=np.random.default_rng(0))  # a copy
    args.update(bad)
    if error is None:  # accepted (an unused rng): the reference's result
        _same_bits(K.quantize(**args), Q(**args))
        return
    with pytest.raises(error) as want:
        Q(**args)
    with pytest.raises(error) as got:
        K.quantize(**args)
    assert str(got.value) == str(want.value)


def test_other_inputs_take_the_full_path(rng):
    """float64, float16, non-contiguous, Fortran-ordered, read-only, big-endian, subclass and
    list inputs: the reference's result, before and after the fast path knows the arguments."""
    with np.errstate(over="ignore"):
        x = _values(rng, np.float32)[:2400]
    m = x.reshape(40, 60)
    ro = x.copy()
    ro.flags.writeable = False
    with np.errstate(over="ignore"):
        half = x.astype(np.float16)
    inputs = [x.astype(np.float64), half, x[::2], m.T, np.asfortranarray(m), m[:, 10:20], ro,
              x.astype(">f4"), np.ma.masked_array(x), x[:5].tolist(), np.float32(1.5), 2.5]
    for fmt in ("bfloat16", "float8_e5m2"):
        for i in (0, 1):
            if i:
                K.quantize(x, fmt)  # the arguments now known to the fast path
            for v in inputs:
                got, want = K.quantize(v, fmt), Q(v, fmt)
                _same_bits(np.asarray(got), np.asarray(want))


def test_arrays_above_the_parallel_threshold(rng, monkeypatch):
    """The parallel kernels (several 64K-element blocks), with the threshold lowered."""
    from normlab.kernels import rounding as R

    monkeypatch.setattr(R, "PARALLEL_MIN", 1 << 16)
    with np.errstate(over="ignore"):
        x = np.tile(_values(rng, np.float32), 30)[:150_001]
    for fmt, kw in [("bfloat16", {}), ("float16", {"rounding": "up"}),
                    ("float8_e4m3fn", {"rounding": "stochastic"})]:
        for _ in range(2):  # planned, then remembered (not stochastic rounding)
            if kw.get("rounding") == "stochastic":
                kw["rng"] = np.random.default_rng(1)
            got = K.quantize(x, fmt, **kw)
            if "rng" in kw:
                kw["rng"] = np.random.default_rng(1)
            _same_bits(got, Q(x, fmt, **kw))
