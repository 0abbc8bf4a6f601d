"""normlab.torch.apply: Precision.apply in torch, the same bits for every kind of scaling."""

import numpy as np
import pytest
import torch

from normlab.precision import DelayedScaling, MXScaling, Precision, TensorScaling
from normlab.torch.quantize import Workspace, apply, apply_

PRECISIONS = {
    "bf16": Precision("bfloat16"),
    "fp16_toward_zero": Precision("float16", rounding="toward_zero"),
    "e4m3": Precision("float8_e4m3fn"),
    "e4m3_saturate": Precision("float8_e4m3fn", overflow="saturate"),
    "e5m2_stochastic": Precision("float8_e5m2", rounding="stochastic"),
    "e5m2_sr_bits": Precision("float8_e5m2", rounding="stochastic", sr_bits=8),
    "e4m3_tensor": Precision("float8_e4m3fn", scaling=TensorScaling(margin=1)),
    "e5m2_tensor_pow2": Precision("float8_e5m2", scaling=TensorScaling(power_of_two=True)),
    "e4m3_mx_ceil": Precision("float8_e4m3fn", scaling=MXScaling(scale_rule="ceil")),
    "fp4_mx": Precision("float4_e2m1fn", scaling=MXScaling()),
}


def _inputs(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((6, 64)) * np.exp2(rng.integers(-20, 20, (6, 1)))).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    x[1, :2] = [-0.0, 1e-40]
    return x


def _same(got: torch.Tensor, want: np.ndarray) -> bool:
    return np.array_equal(got.numpy().view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("name", list(PRECISIONS))
def test_apply_is_precision_apply(name):
    p = PRECISIONS[name]
    finite = _inputs(1)
    finite[0, :3] = 1.0
    for x in (_inputs(1), finite):  # NaN and inf, then (scaled: a finite amax) without them
        want = p.apply(x, rng=np.random.default_rng(3))
        got = apply(p, torch.from_numpy(x), rng=np.random.default_rng(3))
        assert _same(got, want), name


def test_delayed_scaling_state_follows_normlab():
    p = Precision("float8_e4m3fn", scaling=DelayedScaling(amax_history_len=4))
    sa, sb = p.new_state(), p.new_state()
    for step in range(6):
        x = _inputs(step) * np.float32(10.0 ** (step - 3))
        x[0, :3] = 1.0
        for micro in range(2):  # two calls in one step: slot 0 keeps their maximum
            want = p.apply(x * (micro + 1), state=sa)
            got = apply(p, torch.from_numpy(x * (micro + 1)), state=sb)
            assert _same(got, want), (step, micro)
        assert np.array_equal(sa.amax_history, sb.amax_history)
        assert sa.update() == sb.update()
    assert sa.scale != 1.0


def test_apply_bad_arguments():
    with pytest.raises(TypeError, match="precision must be"):
        apply("bfloat16", torch.ones(2))
    with pytest.raises(TypeError, match="t must be"):
        apply(Precision("bfloat16"), torch.ones(2, dtype=torch.int64))
    with pytest.raises(TypeError, match="state="):
        apply(Precision("float8_e4m3fn", scaling=DelayedScaling()), torch.ones(2))


def _all_16bit_inputs():
    """Every float16 and bfloat16 value as float32 (NaN, inf, subnormals, past fp8's max)."""
    codes = np.arange(1 << 16, dtype=np.uint16)
    return np.concatenate([codes.view(np.float16).astype(np.float32),
                           (codes.astype(np.uint32) << 16).view(np.float32)])


IN_PLACE = dict(PRECISIONS, e5m2=Precision("float8_e5m2"), fp16=Precision("float16"),
                e4m3_nan=Precision("float8_e4m3fn", overflow="nan"),
                e5m2_saturate=Precision("float8_e5m2", overflow="saturate"),
                e5m2_delayed=Precision("float8_e5m2", scaling=DelayedScaling()),
                e4m3_delayed=Precision("float8_e4m3fn", scaling=DelayedScaling()),
                bf16_up=Precision("bfloat16", rounding="up"))


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_apply_in_place_is_apply(name):
    """apply_ (the emulator's in-place rounding, its buffers reused from call to call) writes
    apply's bits: every 16-bit value with NaN and inf, then the finite ones (the in-place
    casts), then a small finite tensor after a large one (the buffers reused)."""
    p, work = IN_PLACE[name], Workspace()
    x = _all_16bit_inputs()
    finite = x[np.isfinite(x)]
    sa, sb = p.new_state(), p.new_state()
    for v in (x, finite, finite * np.float32(2.0**-20), finite[:1000], _inputs(2)):
        want = apply(p, torch.from_numpy(v), rng=np.random.default_rng(3), state=sa)
        t = torch.from_numpy(v.copy())
        got = apply_(p, t, rng=np.random.default_rng(3), state=sb, work=work)
        assert got is t and _same(got, want.numpy()), name
        if sa is not None:
            assert np.array_equal(sa.amax_history, sb.amax_history, equal_nan=True)


def test_workspace_gives_back_its_buffers():
    work = Workspace()
    a = work.take(torch.ones(3, 4))
    assert a.shape == (3, 4) and a.dtype == torch.float32 and a.is_contiguous()
    work.give(a)
    assert work.take(torch.ones(3, 4)) is a
    assert work.take(torch.ones(3, 4)) is not a
    t = work.take(torch.ones(4, 3).t())
    assert t.shape == (3, 4) and t.t().is_contiguous() and not t.is_contiguous()
    with pytest.raises(ValueError, match="float32 tensor without a gradient, contiguous or"):
        apply_(Precision("bfloat16"), torch.ones(4, 4)[:, ::2])
    with pytest.raises(ValueError, match="float32 tensor without a gradient"):
        apply_(Precision("bfloat16"), torch.ones(4, dtype=torch.float64))


@pytest.mark.parametrize("name", ["bf16", "e4m3_tensor", "e5m2_stochastic", "fp4_mx",
                                  "fp16_toward_zero"])
def test_apply_in_place_on_a_transposed_matrix(name):
    """A transposed contiguous matrix (GPT-2's Conv1D weight read as a linear's) is rounded
    in its memory order where that cannot matter, in its own order where it does (stochastic
    draws, MX blocks): apply's bits and its layout kept."""
    p = PRECISIONS[name]
    x = torch.from_numpy(_inputs(4)).t()
    want = apply(p, x, rng=np.random.default_rng(3))
    t = x.clone(memory_format=torch.preserve_format)
    assert not t.is_contiguous()
    got = apply_(p, t, rng=np.random.default_rng(3), work=Workspace())
    assert got is t and t.stride() == x.stride()
    assert np.array_equal(got.contiguous().numpy().view(np.uint32),
                          want.contiguous().numpy().view(np.uint32)), name


@pytest.mark.parametrize("name", ["bf16", "fp16", "e5m2", "e4m3", "e4m3_tensor"])
def test_cast_from_a_source_is_apply(name):
    """The emulator's first rounding of a weight, cast straight from it into a buffer: apply's
    bits where it applies (finite float32, an unscaled format torch stores with an infinity),
    nothing written where it does not."""
    from normlab.torch.quantize import cast_from

    p, work = IN_PLACE[name], Workspace()
    x = _all_16bit_inputs()
    small = x[np.abs(x) < 1e30].reshape(-1, 4)  # (a sum past float32's max: not taken)
    for v in (small, _inputs(5)):
        for src in (torch.from_numpy(v), torch.from_numpy(v.T.copy()).t()):
            dst = work.take(src)
            dst.fill_(7.0)
            done = cast_from(p, src, dst, work)
            assert done == (np.isfinite(v).all() and name in ("bf16", "fp16", "e5m2"))
            want = apply(p, src).numpy() if done else np.full(v.shape, 7.0, np.float32)
            assert np.array_equal(dst.numpy().view(np.uint32), want.view(np.uint32)), name
