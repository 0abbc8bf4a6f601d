"""The accumulation roles of a policy: Accumulation (format, chunk), its JSON, its validation,
its sum against a scalar loop written from the definition, and the matmul's promotion interval
(``accumulate_chunk``) against the same definition."""

import json

import numpy as np
import pytest

from normlab.precision import (
    ACCUMULATION_ROLES,
    PRESETS,
    Accumulation,
    PrecisionPolicy,
    accumulate_sum,
    matmul,
    quantize,
)


def _loop(terms, fmt, chunk, rounding="nearest_even", every=1):
    """The definition, one scalar at a time: each addition in float64, rounded once; groups of
    ``every`` terms summed in float32 first; partial sums added in float64, rounded to float32."""
    total, n = 0.0, len(terms)
    k = n if chunk is None else chunk
    for start in range(0, n, k):
        acc = 0.0
        chunk_terms = terms[start:start + k]
        for g in range(0, len(chunk_terms), every):
            group = chunk_terms[g:g + every]
            part = float(group[0])
            if len(group) > 1:
                part = float(np.float32(part))
                for t in group[1:]:
                    part = float(np.float32(part + float(t)))
            acc = float(quantize(np.float64(acc + part), fmt, rounding=rounding))
        total = acc if start == 0 else float(quantize(np.float64(total + acc), "float32"))
    return total


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "float32", "float8_e5m2"])
@pytest.mark.parametrize("chunk", [None, 1, 5, 64])
@pytest.mark.parametrize("rounding", ["nearest_even", "toward_zero"])
@pytest.mark.parametrize("every", [1, 4, 32])
def test_sum_is_the_definition(fmt, chunk, rounding, every):
    """float64 terms are taken as they are (not rounded to float32 first, unlike
    accumulate_sum); float32 terms give accumulate_sum's result."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 150)) * np.exp(rng.uniform(-2, 2, (2, 150)))
    acc = Accumulation(fmt, chunk, rounding, every=every)
    np.testing.assert_array_equal(acc.sum(x), [_loop(r, fmt, chunk, rounding, every)
                                               for r in x])
    np.testing.assert_array_equal(acc.sum(x.T, axis=0), acc.sum(x))
    if every == 1:
        x32 = x.astype(np.float32)
        np.testing.assert_array_equal(acc.sum(x32), accumulate_sum(x32, fmt, chunk=chunk,
                                                                   rounding=rounding))


def test_default_and_json():
    assert Accumulation().default and Accumulation("float32").default
    assert not Accumulation("float32", 64).default and not Accumulation("bfloat16").default
    for acc in (Accumulation(), Accumulation("bfloat16"), Accumulation("float16", 128),
                Accumulation("bfloat16", 32, "toward_zero", "saturate"),
                Accumulation("bfloat16", every=32)):
        assert Accumulation.from_value(json.loads(json.dumps(acc.to_value()))) == acc
    assert Accumulation("bfloat16").to_value() == "bfloat16"
    assert Accumulation("bfloat16", 128).to_value() == {"format": "bfloat16", "chunk": 128}
    assert str(Accumulation("bfloat16", 128)) == "bfloat16, chunks of 128, promoted to float32"


@pytest.mark.parametrize("value, exc, match", [
    ({"format": "bf16"}, ValueError, "norm_accumulate: .*unknown format 'bf16'"),
    ({"format": "bfloat16", "chunk": 0}, ValueError, "norm_accumulate: chunk must be"),
    ({"format": "bfloat16", "chunk": 2.5}, TypeError, "norm_accumulate: chunk must be"),
    ({"format": "bfloat16", "rounding": "stochastic"}, ValueError,
     "norm_accumulate: an accumulation's rounding must be one of"),
    ({"format": "bfloat16", "every": 0}, ValueError, "norm_accumulate: every must be"),
    ({"format": "bfloat16", "each": 4}, ValueError, r"unknown field\(s\) \['each'\]"),
    (3, TypeError, "norm_accumulate: must be a format name"),
])
def test_bad_accumulations_name_the_role(value, exc, match):
    d = PRESETS["amp_bf16"].to_dict()
    d["norm_accumulate"] = value
    with pytest.raises(exc, match=match):
        PrecisionPolicy.from_dict(d)


def test_policy_roles_round_trip_and_presets_unchanged():
    """A policy without accumulation roles writes the JSON it wrote before them; with them, they
    round-trip; accumulate_chunk is checked."""
    for name, pol in PRESETS.items():
        d = pol.to_dict()
        assert not set(d) & {*ACCUMULATION_ROLES, "accumulate_chunk"}, name
        assert pol.norm_accumulate.default and pol.softmax_accumulate.default
        assert pol.accumulate_chunk is None
    p = PRESETS["amp_bf16"].replace(norm_accumulate=Accumulation("bfloat16", 256),
                                    softmax_accumulate="float16", accumulate="bfloat16",
                                    accumulate_chunk=128)
    q = PrecisionPolicy.from_json(p.to_json())
    assert q == p and q.softmax_accumulate == Accumulation("float16")
    assert "norm_accumulate bfloat16, chunks of 256" in p.describe()
    with pytest.raises(ValueError, match="accumulate_chunk must be None or an integer >= 1"):
        PRESETS["fp32"].replace(accumulate_chunk=0)


def _dot_loop(a, b, fmt, every, chunk):
    """One output of the emulated matmul, from the definition: groups of ``every`` products
    summed in float32, added to the accumulator and rounded to ``fmt``; the accumulator restarts
    every ``chunk`` products and its sums are added in float32."""
    K = len(a)
    C = chunk or K
    total = None
    for c0 in range(0, K, C):
        acc = None
        for g0 in range(c0, min(K, c0 + C), every):
            g1 = min(g0 + every, c0 + C, K)
            part = float(np.dot(a[g0:g1], b[g0:g1]).astype(np.float32))
            acc = float(quantize(np.float64(part if acc is None else acc + part), fmt))
        total = acc if total is None else float(quantize(np.float64(total + acc), "float32"))
    return total


@pytest.mark.parametrize("every, chunk", [(1, None), (1, 32), (4, 32), (8, 20), (1, 1000)])
def test_matmul_promotion_interval_is_the_definition(every, chunk):
    rng = np.random.default_rng(5)
    a = quantize(rng.standard_normal((1, 300)), "bfloat16")
    b = quantize(rng.standard_normal((300, 2)), "bfloat16")
    pol = PRESETS["fp32"].replace(accumulate="bfloat16", accumulate_every=every,
                                  accumulate_chunk=chunk)
    got = matmul(a, b, pol)
    want = [_dot_loop(a[0], b[:, j], "bfloat16", every, chunk) for j in range(2)]
    np.testing.assert_array_equal(got[0], want)


def test_promotion_recovers_a_stalled_sum():
    """bfloat16 accumulation of 4096 products of 1 x 1 stalls at 256; promoted every 128
    products it is exact; with a float32 accumulate role the chunk changes nothing."""
    a, b = np.ones((1, 4096), np.float32), np.ones((4096, 1), np.float32)
    low = PRESETS["fp32"].replace(accumulate="bfloat16")
    assert matmul(a, b, low)[0, 0] == 256.0
    assert matmul(a, b, low.replace(accumulate_chunk=128))[0, 0] == 4096.0
    assert matmul(a, b, PRESETS["fp32"].replace(accumulate_chunk=128))[0, 0] == 4096.0
