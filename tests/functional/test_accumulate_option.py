"""The ops' ``accumulate=`` option (a policy's norm_accumulate / softmax_accumulate): the default
changes nothing bit for bit; a low-precision accumulator gives the statistics of its definition
(Accumulation.sum, itself tested against a scalar loop) and the errors of a 16-bit sum; bad
values are refused before any work."""

import numpy as np
import pytest

from normlab.functional import (
    cross_entropy_forward,
    layer_norm_forward,
    rms_norm_forward,
    softmax_forward,
)
from normlab.functional.softmax import capped_softmax_forward
from normlab.precision import Accumulation

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 6, 96)).astype(np.float32)
W = RNG.standard_normal(96).astype(np.float32)
B = RNG.standard_normal(96).astype(np.float32)
T = RNG.integers(0, 96, (4, 6))


def _bits(a):
    return np.asarray(a).tobytes()


def _calls(acc):
    return {
        "rms": lambda: rms_norm_forward(X, W, eps=1e-6, accumulate=acc)[0],
        "prms": lambda: rms_norm_forward(X, W, partial=0.25, accumulate=acc)[0],
        "ln": lambda: layer_norm_forward(X, W, B, accumulate=acc)[0],
        "softmax": lambda: softmax_forward(X, axis=1, accumulate=acc)[0],
        "capped": lambda: capped_softmax_forward(X[..., :6], softcap=3.0, causal=True,
                                                 accumulate=acc)[0],
        "ce": lambda: cross_entropy_forward(X, T, accumulate=acc)[1].log_z,
    }


@pytest.mark.parametrize("op", sorted(_calls(None)))
def test_the_default_changes_nothing(op):
    want = _calls(None)[op]()
    assert _bits(_calls(Accumulation())[op]()) == _bits(want)
    assert _bits(_calls(Accumulation("float32"))[op]()) == _bits(want)


@pytest.mark.parametrize("acc", [Accumulation("bfloat16"), Accumulation("float16", 16),
                                 Accumulation("float32", 7)])
def test_statistics_are_the_accumulations(acc):
    x = X.reshape(-1, 96)
    ms = (acc.sum(x * x).astype(np.float32) / np.float32(96))[:, None]
    want = x * (1.0 / np.sqrt(ms + np.float32(1e-6))) * W
    assert _bits(rms_norm_forward(x, W, eps=1e-6, accumulate=acc)[0]) == _bits(want)
    mean = (acc.sum(x).astype(np.float32) / np.float32(96))[:, None]
    c = x - mean
    var = (acc.sum(c * c).astype(np.float32) / np.float32(96))[:, None]
    _, cache = layer_norm_forward(x, W, B, accumulate=acc)
    assert _bits(cache.mean) == _bits(mean)
    assert _bits(cache.rstd) == _bits(1.0 / np.sqrt(var + np.float32(1e-5)))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    assert _bits(softmax_forward(x, accumulate=acc)[0]) == _bits(e / acc.sum(e).astype(
        np.float32)[:, None])
    log_z = x.max(axis=-1) + np.log(acc.sum(e).astype(np.float32))
    assert _bits(cross_entropy_forward(x, T.reshape(-1), accumulate=acc)[1].log_z) == \
        _bits(log_z)


def test_a_16_bit_softmax_sum_is_off_and_chunks_fix_it():
    """A wide softmax row summed in bfloat16 under-counts its denominator (the row of p then sums
    above 1, tenstorrent/tt-metal#52045's symptom seen from the other side); promoted to float32
    every 32 terms the error is within a few bfloat16 ulps of the chunk sums."""
    z = np.random.default_rng(0).standard_normal((8, 4096)).astype(np.float32)
    one = softmax_forward(z, accumulate=Accumulation("bfloat16"))[0].astype(np.float64)
    assert (one.sum(axis=-1) > 1.2).all()
    chunked = softmax_forward(z, accumulate=Accumulation("bfloat16", 32))[0].astype(np.float64)
    assert (np.abs(chunked.sum(axis=-1) - 1) < 2e-2).all()


@pytest.mark.parametrize("value, exc, match", [
    ("bfloat16", TypeError, "accumulate must be None or a normlab.precision.Accumulation"),
    (16, TypeError, "accumulate must be None"),
])
def test_bad_accumulate(value, exc, match):
    for call in _calls(value).values():
        with pytest.raises(exc, match=match):
            call()
