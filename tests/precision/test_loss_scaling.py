"""Loss scalers: step for step against torch.amp.GradScaler on the CPU, the reference vectors
T1-T5, and bad arguments."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normlab.precision import DynamicLossScaler, StaticLossScaler, find_nonfinite, has_nonfinite

torch = pytest.importorskip("torch")


def _torch_run(steps, grad_values, **kw):
    """Drive torch's GradScaler with one parameter whose gradient is set by hand.

    Returns (scales after each update, stepped flags, unscaled gradients)."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    calls = []
    inner = opt.step
    opt.step = lambda *a, **k: (calls.append(1), inner(*a, **k))[1]
    scaler = torch.amp.GradScaler("cpu", **kw)
    scales, stepped, unscaled = [], [], []
    for g in grad_values[:steps]:
        scaler.scale(torch.ones(()))  # creates the scale lazily, as a loss would
        p.grad = torch.tensor([g], dtype=torch.float32)
        n = len(calls)
        scaler.unscale_(opt)
        unscaled.append(p.grad.item())
        scaler.step(opt)
        stepped.append(len(calls) > n)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, stepped, unscaled


def _ours(grad_values, **kw):
    s = DynamicLossScaler(**kw)
    scales, stepped, unscaled = [], [], []
    for g in grad_values:
        grads, found_inf = s.unscale([np.array([g], dtype=np.float32)])
        unscaled.append(float(grads[0][0]))
        stepped.append(not found_inf)
        s.update(found_inf)
        scales.append(s.scale)
    return scales, stepped, unscaled


def _assert_same_run(a, b):
    (sa, pa, ua), (sb, pb, ub) = a, b
    assert sa == sb
    assert pa == pb
    np.testing.assert_array_equal(np.array(ua), np.array(ub))


@pytest.mark.parametrize("seed", range(6))
def test_matches_torch_gradscaler_on_random_sequences(seed):
    rng = np.random.default_rng(seed)
    kw = dict(init_scale=float(rng.choice([2.0**16, 1000.5, 3.0, 2.0**120])),
              growth_factor=float(rng.choice([2.0, 3.0, 1.7])),
              backoff_factor=float(rng.choice([0.5, 0.25, 0.7])),
              growth_interval=int(rng.choice([1, 3, 7, 20])))
    p_bad = rng.uniform(0.02, 0.4)
    u = rng.random(400)
    grads = np.where(u < p_bad, rng.choice([np.inf, -np.inf, np.nan], 400),
                     rng.standard_normal(400) * 1e3).tolist()
    _assert_same_run(_ours(grads, **kw), _torch_run(400, grads, **kw))


def test_matches_torch_with_default_settings_over_two_growth_periods():
    rng = np.random.default_rng(7)
    grads = rng.standard_normal(4500).tolist()
    for i in (100, 2500, 2501):  # overflows restart the growth count
        grads[i] = math.inf
    ours, theirs = _ours(grads), _torch_run(4500, grads)
    _assert_same_run(ours, theirs)
    assert sorted(set(ours[0])) == [2.0**14, 2.0**15, 2.0**16]


def test_reference_vectors_T1_to_T5():
    s = DynamicLossScaler()  # T1
    s.update(True)
    assert s.scale == 32768
    s.update(True)
    assert (s.scale, s.growth_tracker) == (16384, 0)
    s = DynamicLossScaler()  # T2
    for _ in range(1999):
        s.update(False)
    assert (s.scale, s.growth_tracker) == (65536, 1999)
    s.update(False)
    assert (s.scale, s.growth_tracker) == (131072, 0)
    s = DynamicLossScaler()  # T3
    for _ in range(1999):
        s.update(False)
    s.update(True)
    assert (s.scale, s.growth_tracker) == (32768, 0)
    s = DynamicLossScaler(init_scale=2.0**127)  # T4: 2^128 overflows float32
    for _ in range(2000):
        s.update(False)
    assert (s.scale, s.growth_tracker) == (2.0**127, 0)
    s = DynamicLossScaler(init_scale=1024)  # T5
    calls = []
    skipped = s.step([np.array([1024.0, np.inf], np.float32)], calls.append)
    assert skipped and calls == [] and s.scale == 512 and s.skipped == 1
    grads, found = DynamicLossScaler(init_scale=1024).unscale([np.array([1024, np.inf],
                                                                        np.float32)])
    np.testing.assert_array_equal(grads[0], [1.0, np.inf])  # unscaled although non-finite
    assert found


def test_step_calls_the_optimizer_with_unscaled_gradients():
    s = DynamicLossScaler(init_scale=8.0)
    got = []
    skipped = s.step({"w": np.array([8.0, 16.0], np.float32), "b": None}, got.append)
    assert not skipped and s.growth_tracker == 1
    np.testing.assert_array_equal(got[0]["w"], [1.0, 2.0])
    assert got[0]["b"] is None


def test_unscale_keeps_dtypes_and_matches_torch_arithmetic():
    s = DynamicLossScaler(init_scale=3.0)  # 1/3 is not exact: inv = float32(1 / float64(3))
    g32 = np.array([1.0, 7.0, 1e-3], np.float32)
    g64 = g32.astype(np.float64)
    gb = g32.astype(ml_dtypes.bfloat16)
    (u32, u64, ub), found = s.unscale((g32, g64, gb))
    assert not found
    inv = np.float32(1.0 / 3.0)
    np.testing.assert_array_equal(u32, g32 * inv)
    np.testing.assert_array_equal(u64, g64 * np.float64(inv))
    assert ub.dtype == gb.dtype
    np.testing.assert_array_equal(ub, (gb.astype(np.float32) * inv).astype(ml_dtypes.bfloat16))
    t = torch.tensor(g32.tolist()) * torch.tensor(1.0 / 3.0, dtype=torch.float32)
    np.testing.assert_array_equal(u32, t.numpy())


def test_static_scaler_and_min_scale():
    s = StaticLossScaler(128.0)
    s.update(True)
    s.update(False)
    assert s.scale == 128.0 and (s.steps, s.skipped) == (2, 1)
    np.testing.assert_array_equal(s.scale_loss(np.float32(0.5)), 64.0)
    d = DynamicLossScaler(init_scale=4.0, min_scale=1.0)
    for _ in range(5):
        d.update(True)
    assert d.scale == 1.0
    plain = DynamicLossScaler(init_scale=4.0)  # torch has no floor: the scale can fall below 1
    for _ in range(5):
        plain.update(True)
    assert plain.scale == 0.125


def test_state_dict_round_trip():
    s = DynamicLossScaler(growth_interval=3)
    for f in (False, False, True, False):
        s.update(f)
    t = DynamicLossScaler()
    t.load_state_dict(s.state_dict())
    assert (t.scale, t.growth_tracker, t.growth_interval, t.steps, t.skipped) == \
        (s.scale, s.growth_tracker, 3, 4, 1)


def test_loss_scaling_recovers_a_tiny_fp16_gradient():
    g = np.float32(1e-8)
    assert np.float16(g) == 0  # below fp16's smallest subnormal 2^-24
    s = DynamicLossScaler()
    scaled = np.float16(g * s.scale)  # the backward in fp16 carries g * S
    (back,), _ = s.unscale([np.array([scaled], np.float32)])
    assert abs(back[0] - g) / g < 1e-3


def test_nonfinite_checks():
    grads = {"a": np.ones(3), "b": np.array([1.0, np.nan]), "c": np.array([np.inf])}
    assert has_nonfinite(grads) and find_nonfinite(grads) == ["b", "c"]
    assert not has_nonfinite([np.ones(2, np.float32), None])
    assert find_nonfinite([np.ones(2), np.array([-np.inf])]) == [1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="growth_factor must be in"):
        DynamicLossScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor must be in"):
        DynamicLossScaler(backoff_factor=1.0)
    with pytest.raises(ValueError, match="growth_interval must be >= 1"):
        DynamicLossScaler(growth_interval=0)
    with pytest.raises(TypeError, match="growth_interval must be an integer"):
        DynamicLossScaler(growth_interval=2.5)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        StaticLossScaler(-1.0)
    with pytest.raises(ValueError, match="positive float32"):
        StaticLossScaler(1e39)
    with pytest.raises(TypeError, match="grads must be a list, tuple or dict"):
        DynamicLossScaler().unscale(np.ones(3))
    with pytest.raises(TypeError, match=r"grads\[1\] must be a floating-point array"):
        DynamicLossScaler().unscale([np.ones(2), np.arange(2)])
    with pytest.raises(TypeError, match="found_inf must be True or False"):
        DynamicLossScaler().update(1)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60), st.integers(1, 5))
def test_invariants(found, interval):
    """The scale only moves by the two factors; growth needs `interval` finite steps in a row."""
    s = DynamicLossScaler(init_scale=2.0**10, growth_interval=interval)
    run = 0
    for f in found:
        before = s.scale
        s.update(f)
        run = 0 if f else run + 1
        if f:
            assert s.scale == before / 2
        elif run % interval == 0:
            assert s.scale == before * 2
        else:
            assert s.scale == before
        assert s.growth_tracker == run % interval
