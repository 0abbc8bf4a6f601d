"""Low-precision accumulation in the kernels equals the reference bit for bit, per format, chunk
and rounding: ``kernels.accumulate_sum`` against ``precision.accumulate_sum``, and the norm,
softmax and cross-entropy kernels with ``accumulate=`` against ``normlab.functional``. The norms
are compared in this process (their element-wise steps round alike everywhere); the softmax ops
in float64 under ``normlab.portable`` (where NumPy's exp is libm's, as the kernels' is)."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from normlab import functional as F
from normlab import kernels as K
from normlab import portable
from normlab.functional.softmax import capped_softmax_forward as ref_capped
from normlab.precision import Accumulation, accumulate_sum

ACCS = [Accumulation("bfloat16"), Accumulation("bfloat16", 32), Accumulation("float16", 100),
        Accumulation("float16", None, "toward_zero"), Accumulation("float32", 7),
        Accumulation("float8_e5m2", 4, "nearest_away", "saturate"),
        Accumulation("bfloat16", None, every=32), Accumulation("float16", 96, every=5)]
DTYPES = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "float8_e4m3fn", "float32",
                                 "float6_e2m3fn"])
@pytest.mark.parametrize("chunk", [None, 1, 7, 128])
@pytest.mark.parametrize("rounding", ["nearest_even", "toward_zero", "up", "nearest_away"])
def test_accumulate_sum_kernel_is_the_reference(fmt, chunk, rounding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 300)) * np.exp(rng.uniform(-4, 4, (6, 300)))
    x[0, 5], x[1, 9], x[2, 0] = np.inf, np.nan, -np.inf
    want = accumulate_sum(x, fmt, chunk=chunk, rounding=rounding)
    assert _same(K.accumulate_sum(x, fmt, chunk=chunk, rounding=rounding), want)
    assert _same(K.accumulate_sum(x.T, fmt, axis=0, chunk=chunk, rounding=rounding), want)


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2",
                                 "float8_e4m3fnuz", "float8_e5m2fnuz", "float32"])
@pytest.mark.parametrize("overflow", [None, "saturate"])
@pytest.mark.parametrize("chunk", [None, 4])
def test_accumulate_sum_kernel_at_the_range_edges(fmt, overflow, chunk):
    """Running sums that cross each edge of the format's normal range, where the kernel leaves
    its inline nearest-even rounding for the general one: past the largest finite value (inf,
    NaN or saturation), down into the subnormals and to exact zeros of either sign; against
    the reference's one algorithm (``_running_sums``), which takes ``overflow``."""
    from normlab.kernels.accumulate import _sum_rows, acc_spec
    from normlab.precision import get_format
    from normlab.precision.accumulate import _running_sums

    info = ml_dtypes.finfo(np.float32 if fmt == "float32" else fmt)
    big, tiny = float(info.max), float(info.smallest_normal)
    rng = np.random.default_rng(6)
    rows = [np.full(40, big / 7), np.full(40, -big / 7),  # overflow, both signs
            np.r_[np.full(8, big / 3), np.full(8, -big / 3)],  # up to the edge and back
            tiny * rng.uniform(-3, 3, 40),  # partials in and out of the subnormals
            np.r_[tiny, -tiny, tiny / 2, -tiny / 2, 1.0, -1.0, 0.0, -0.0] * 5,  # exact zeros
            rng.standard_normal(40) * np.exp(rng.uniform(-30, 30, 40))]
    x = np.stack([np.resize(r, 40) for r in rows]).astype(np.float32)
    acc = Accumulation(fmt, chunk, "nearest_even", overflow)
    got = np.empty(len(x))
    _sum_rows(x, got, acc_spec(acc), 1)
    with np.errstate(over="ignore", invalid="ignore"):
        want = _running_sums(x.astype(np.float64), get_format(fmt), chunk or 40,
                             get_format("float32"), "nearest_even", overflow, None)
    assert _same(got, want)


def test_accumulate_sum_kernel_edges_and_errors():
    assert K.accumulate_sum(np.ones(1000, np.float32), "bfloat16") == 256.0
    assert K.accumulate_sum(np.zeros((2, 0)), "bfloat16").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="chunk must be"):
        K.accumulate_sum(np.ones(4), "bfloat16", chunk=0)
    with pytest.raises(ValueError, match="unknown format"):
        K.accumulate_sum(np.ones(4), "bf16")
    rng = np.random.default_rng(2)  # stochastic rounding runs the reference
    s = K.accumulate_sum(np.ones(100), "bfloat16", rounding="stochastic", rng=rng)
    assert s == accumulate_sum(np.ones(100), "bfloat16", rounding="stochastic",
                               rng=np.random.default_rng(2))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("acc", ACCS, ids=str)
def test_norm_kernels_are_the_reference(dtype, acc):
    rng = np.random.default_rng(4)
    x = (0.3 + 0.05 * rng.standard_normal((3, 7, 257))).astype(dtype)
    w = rng.standard_normal(257).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    for kw in ({}, {"partial": 0.3}, {"offset": 1.0}):
        r, rc = F.rms_norm_forward(x, w, eps=1e-6, accumulate=acc, **kw)
        k, kc = K.rms_norm_forward(x, w, eps=1e-6, accumulate=acc, **kw)
        assert _same(r, k) and _same(rc.rstd, kc.rstd), kw
    r, rc = F.layer_norm_forward(x, w, b, accumulate=acc)
    k, kc = K.layer_norm_forward(x, w, b, accumulate=acc)
    assert _same(r, k) and _same(rc.mean, kc.mean) and _same(rc.rstd, kc.rstd)


def test_the_default_is_the_kernels_own_sum():
    x = np.random.default_rng(5).standard_normal((5, 300)).astype(np.float32)
    w = np.ones(300, np.float32)
    assert _same(K.rms_norm_forward(x, w, accumulate=Accumulation())[0],
                 K.rms_norm_forward(x, w)[0])
    assert _same(K.softmax_forward(x, accumulate=Accumulation())[0], K.softmax_forward(x)[0])
    with pytest.raises(TypeError, match="accumulate must be None or"):
        K.layer_norm_forward(x, accumulate="bfloat16")


@pytest.mark.parametrize("acc", ACCS[:3], ids=str)
def test_softmax_kernels_float32_agree_within_exps(acc):
    """In float32 NumPy's exp and the kernels' differ by an ulp here and there, and a 16-bit
    running sum can turn that into one ulp of the accumulator: agreement within 2 ulps of it."""
    x = np.random.default_rng(6).standard_normal((4, 300)).astype(np.float32) * 3
    tol = 2 * 2.0 ** -acc.format.mantissa_bits
    np.testing.assert_allclose(K.softmax_forward(x, accumulate=acc)[0],
                               F.softmax_forward(x, accumulate=acc)[0], rtol=tol)


def _softmax_cases():
    """Every softmax-family kernel against its reference in float64 (run under portable)."""
    rng = np.random.default_rng(7)
    bad = []
    for acc in ACCS:
        z = rng.standard_normal((4, 300)) * 3
        s = rng.standard_normal((2, 3, 16, 16))
        t = rng.integers(0, 300, 4)
        pairs = {
            "softmax": (F.softmax_forward(z, accumulate=acc)[0],
                        K.softmax_forward(z, accumulate=acc)[0]),
            "capped": (ref_capped(s, causal=True, accumulate=acc)[0],
                       K.capped_softmax_forward(s, causal=True, accumulate=acc)[0]),
            "ce": (F.cross_entropy_forward(z, t, accumulate=acc)[1].log_z,
                   K.cross_entropy_forward(z, t, accumulate=acc)[1].log_z),
        }
        bad += [f"{name} {acc}" for name, (a, b) in pairs.items() if not _same(a, b)]
    return bad


def test_softmax_kernels_are_the_reference_in_float64_under_portable(tmp_path):
    why = portable.unsupported()
    if why is not None:
        pytest.skip(why)
    env = portable.environ()
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    out = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


if __name__ == "__main__":  # the portable subprocess
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    print(_softmax_cases())
