"""Headroom statistics: the kernel and the NumPy reference agree; the fractions are exact."""

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.nn.numerics import FULL_PRECISION, Numerics, PolicyNumerics, numerics_scope
from normlab.precision import quantize
from normlab.precision.headroom import (
    FORMAT_SCALINGS,
    HEADROOM_FORMATS,
    format_window,
    tensor_stats,
)


def _sample(rng, shape=(3, 70)):
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-40, 20, shape)).astype(np.float32)
    x.flat[:5] = [0.0, np.inf, np.nan, 65520.0, 2.0**-25]
    return x


@pytest.mark.parametrize("shape", [(3, 70), (5, 64), (2, 3, 33), (70,), (1,), (4, 1)])
def test_kernel_equals_reference(rng, shape):
    x = _sample(rng, shape) if np.prod(shape) >= 5 else rng.standard_normal(shape).astype(
        np.float32)
    assert tensor_stats(x, impl="kernel") == tensor_stats(x, impl="reference")
    assert (tensor_stats(x, delayed_amax=3.0, impl="kernel")
            == tensor_stats(x, delayed_amax=3.0, impl="reference"))


@pytest.mark.parametrize("x", [np.zeros((3, 0), np.float32), np.float32(2.5),
                               np.full((2, 40), np.nan, np.float32), np.zeros((2, 40))])
def test_kernel_equals_reference_at_the_edges(x):
    assert tensor_stats(x, impl="kernel") == tensor_stats(x, impl="reference")


def test_the_extremes_equal_their_reference(rng):
    from normlab.precision import headroom as ph

    x = _sample(rng, (6, 45))
    assert ph._extremes(x.reshape(-1), True) == ph._extremes(x.reshape(-1), False)
    assert ph._extremes(np.array([0.0, np.nan], np.float32), True) == (0, 0xFFFFFFFF)


@pytest.mark.parametrize("fmt", HEADROOM_FORMATS)
def test_unscaled_fractions_are_what_quantize_does(rng, fmt):
    x = _sample(rng)
    s = tensor_stats(x)["formats"][f"{fmt}/none"]
    finite = np.isfinite(x) & (x != 0)
    v = x[finite]
    q = quantize(v, fmt, overflow="inf" if fmt in ("bfloat16", "float16", "float8_e5m2")
                 else "nan")
    w = format_window(fmt)
    over = ~np.isfinite(q)
    flush = q == 0
    sub = np.isfinite(q) & (q != 0) & (np.abs(q) < 2.0 ** w["min_normal"])
    n = v.size
    assert s == {"overflow": over.sum() / n, "flush": flush.sum() / n, "subnormal": sub.sum() / n}


def test_every_scaling_is_reported(rng):
    s = tensor_stats(_sample(rng))
    assert set(s["formats"]) == {k for k, _, _ in FORMAT_SCALINGS}
    assert s["nonfinite"] == 2 and s["zeros"] == 1


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        tensor_stats(np.arange(4))
    with pytest.raises(ValueError, match="impl"):
        tensor_stats(np.ones(4, np.float32), impl="fast")
    with pytest.raises(ValueError, match="delayed_amax"):
        tensor_stats(np.ones(4, np.float32), delayed_amax=-1.0)
    with pytest.raises(ValueError, match="delayed_amax must be None or a finite number"):
        tensor_stats(np.ones(4, np.float32), delayed_amax=float("inf"))


def test_numerics_scope_restores_what_was_there():
    model = GPT(GPTConfig(vocab_size=16, seq_len=8, d_model=16, n_heads=2, n_layers=1),
                rng=np.random.default_rng(0))
    mine = PolicyNumerics("amp_bf16")
    model.set_numerics(mine)
    with numerics_scope(model, FULL_PRECISION) as n:
        assert n is FULL_PRECISION and model.numerics_root is FULL_PRECISION
    assert model.numerics_root is mine
    with pytest.raises(RuntimeError):
        with numerics_scope(model, Numerics()):
            raise RuntimeError("inside")
    assert model.numerics_root is mine
    with pytest.raises(TypeError, match="numerics must be a Numerics"):
        with numerics_scope(model, "amp_bf16"):
            pass


def _at_every_threshold(amax: float, delayed: float) -> np.ndarray:
    """float32 values at, just below and just above every threshold of every format and
    scaling for a tensor of this amax (and the MX thresholds of a block scaled by 2^0)."""
    from normlab.precision import headroom as ph
    from normlab.precision.formats import get_format

    ts = []
    for _, f, s in FORMAT_SCALINGS:
        ref = {"none": None, "tensor": amax, "delayed": delayed, "mx": None}[s]
        scale = 1.0 if ref is None else get_format(f).max_finite / ref
        ts += [t for t, _ in ph._tests(f, scale)]
    v = np.array(ts, np.float64)
    v = v[v < 3e38].astype(np.float32)
    v = np.concatenate([v, np.nextafter(v, np.float32(0)), np.nextafter(v, np.float32(np.inf))])
    return np.concatenate([v[(v > 0) & (v <= amax)], [amax]]).astype(np.float32)


@pytest.mark.parametrize("amax", [1.0, 3.0, 448.0, 2.0**-20])
def test_values_on_a_threshold_are_counted_as_the_definition_says(amax):
    """The kernel turns each test into a bound on the bits: values at, below and above every
    threshold (and the tensor's own amax) count as the NumPy reference compares them."""
    v = _at_every_threshold(amax, 7.0)
    x = np.resize(v, (max(v.size // 32, 1) + 1, 32))  # whole MX blocks, each with its own amax
    for d in (None, 7.0, amax):
        assert (tensor_stats(x, delayed_amax=d, impl="kernel")
                == tensor_stats(x, delayed_amax=d, impl="reference"))


@pytest.mark.parametrize("shape", [(7, 1000), (3, 4097), (5000,), (2, 31, 33), (1100, 1)])
def test_chunks_rows_and_tiny_blocks_do_not_change_a_count(rng, shape):
    """Rows that do not fill a chunk or a block, a tensor over many chunks, and blocks whose
    amax is so small (down to the subnormals) that the kernel counts them test by test."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-140, 40, shape[:-1] + (1,))).astype(np.float32)
    x.flat[::97] = 0.0
    x.flat[5] = np.inf
    for d in (None, 1e-30):
        assert (tensor_stats(x, delayed_amax=d, impl="kernel")
                == tensor_stats(x, delayed_amax=d, impl="reference"))


def test_the_mx_fractions_are_what_the_mx_quantizer_does(rng):
    """MXFP8 and MXFP4 flush and subnormal fractions against normlab.precision's MX block
    quantizer, whose scale rule (floor) they share: what becomes 0, what lands below the
    element format's normal range."""
    from normlab.precision import mx_quantize

    x = (rng.standard_normal((16, 64)) * np.exp2(rng.integers(-30, 30, (16, 1)))).astype(
        np.float32)
    x[0, :32] *= np.exp2(-np.arange(32.0)).astype(np.float32)  # one block down to 2^-31 amax
    s = tensor_stats(x)["formats"]
    for key, fmt in (("mxfp8", "float8_e4m3fn"), ("mxfp4", "float4_e2m1fn")):
        p = np.abs(mx_quantize(x, fmt).elements)
        w = format_window(fmt)
        assert s[key]["flush"] == np.count_nonzero(p == 0) / x.size > 0
        assert s[key]["subnormal"] == np.count_nonzero(
            (p > 0) & (p < 2.0 ** w["min_normal"])) / x.size > 0


@pytest.mark.parametrize("k", [0, -100, -112, -121, -127])
def test_mx_values_on_a_threshold_in_blocks_of_any_scale(k):
    """Blocks with shared scale X = 2^k (their amax 2^(emax + k)) holding t X and its float32
    neighbours for every MX threshold t: small k takes the kernel's test-by-test path and,
    below 2^-126, the subnormal bounds."""
    from normlab.precision import headroom as ph
    from normlab.precision.formats import get_format

    rows = []
    for _, fmt in ph._mx():
        top = np.float32(2.0 ** (get_format(fmt).emax + k))
        for t, _ in ph._tests(fmt, 1.0):
            v = np.float32(t * 2.0**k)
            rows.append([top, v, np.nextafter(v, np.float32(0)),
                         np.nextafter(v, np.float32(1))] + [0.0] * 28)
    x = np.array(rows, np.float32)
    assert tensor_stats(x, impl="kernel") == tensor_stats(x, impl="reference")


@pytest.mark.parametrize("shape", [(3, 70), (300, 45), (1 << 17,), (2, 5, 8)])
def test_the_rms_is_the_float64_rms_of_the_finite_values(rng, shape):
    """The squares are summed in float64 in a fixed order (the same on any machine and in
    both implementations): within a few float64 roundings of the exactly rounded RMS."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
    x.flat[:2] = [np.inf, np.nan]
    v = np.where(np.isfinite(x), x, 0).astype(np.float64).reshape(-1)
    exact = float(np.sqrt(np.sum(v * v) / v.size))
    got = tensor_stats(x)["rms"]
    assert got == tensor_stats(x, impl="reference")["rms"]
    assert abs(got - exact) <= 1e-13 * exact
