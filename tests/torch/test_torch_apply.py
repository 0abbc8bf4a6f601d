"""normlab.torch.apply: Precision.apply in torch, the same bits for every kind of scaling."""

import numpy as np
import pytest
import torch

from normlab.precision import DelayedScaling, MXScaling, Precision, TensorScaling
from normlab.torch import apply

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
