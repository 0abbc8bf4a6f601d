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


def test_the_first_pass_equals_its_reference(rng):
    from normlab.kernels import headroom as kh
    from normlab.precision import headroom as ph

    x = _sample(rng, (6, 45))  # 45: each row's second MX block padded
    counts = np.zeros(1 << 18, np.int64)
    block_max = np.zeros(6 * 2, np.uint32)
    bits, nonfinite, nonzero, top = kh.first_pass(x.reshape(-1).view(np.uint32), 45, 13,
                                                  counts, block_max)
    want = ph._first_pass(x.reshape(-1), x.shape, 13, "reference")
    assert np.array_equal(bits, want[0]) and (nonfinite, nonzero) == want[1:3] == (2, 267)
    assert np.array([top], np.uint32).view(np.float32)[0] == want[3]
    assert np.array_equal(counts, want[4]) and np.array_equal(block_max.view(np.float32), want[5])


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


@pytest.mark.parametrize("sh", [13, 18])
def test_the_two_passes_equal_their_references(rng, sh):
    from normlab.kernels import headroom as kh
    from normlab.precision import headroom as ph

    bits = (rng.standard_normal((40, 32)).astype(np.float32).view(np.uint32)
            & np.uint32(0x7FFFFFFF))
    bits[3, :5] = 0
    shift = rng.integers(-200, 200, 40).astype(np.int64) << (23 - sh)
    size = 1 << (31 - sh)
    a = np.zeros(size, np.int64)
    b = np.zeros(size, np.int64)
    kh.count_buckets(bits, shift, a, sh)
    ph.count_buckets_reference(bits, shift, b, sh)
    assert np.array_equal(a, b) and a.sum() == np.count_nonzero(bits)
    table = np.zeros(size, np.bool_)
    table[rng.integers(0, size, size // 50)] = True
    table[:10] = table[-10:] = True
    m = int(a[table].sum())
    got, want = kh.gather_buckets(bits, shift, table, m, sh), ph.gather_buckets_reference(
        bits, shift, table, m, sh)
    assert got[0].size == m > 0
    for x, y in zip(got, want):
        assert np.array_equal(x, y)


def test_the_bucket_width_does_not_change_a_count(rng, monkeypatch):
    """Wide buckets (small tensors) and narrow ones (large) give the same exact fractions."""
    from normlab.precision import headroom as ph

    x = (rng.standard_normal((64, 96)) * np.exp(rng.normal(0, 6, (64, 1)))).astype(np.float32)
    x[0, :3] = [0.0, np.inf, np.nan]
    x[1, :4] = [448.0, 464.0, 2.0**-10, 2.0**-9 * 0.75]  # at E4M3's thresholds
    got = {}
    for small in (0, 1 << 40):  # every tensor narrow, every tensor wide
        monkeypatch.setattr(ph, "_SMALL", small)
        got[small] = ph.tensor_stats(x, delayed_amax=2.0)
    assert got[0] == got[1 << 40]
