"""The loss scalers' edges (issue 28): a scale that would underflow to 0 stays at the floor and
says so; a state or a scale whose inverse would divide by zero is refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from normlab.precision.loss_scaling import (
    MIN_SCALE,
    DynamicLossScaler,
    StaticLossScaler,
)


def test_a_scale_backing_off_300_times_stays_at_the_floor_and_says_so():
    s = DynamicLossScaler()
    for _ in range(142):  # 2^16 / 2^142 = 2^-126, float32's smallest normal number
        s.update(True)
    assert s.scale == 2.0**-126 and s.at_floor is False
    with pytest.warns(RuntimeWarning, match="reached its floor"):
        s.update(True)  # 2^-127 would be subnormal, and 1 / S overflow: the floor instead
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        for _ in range(157):
            s.update(True)
    assert s.scale == MIN_SCALE == float(np.finfo(np.float32).tiny) and s.at_floor
    grads, found = s.unscale([np.ones(3, np.float32)])  # no ZeroDivisionError, finite inverse
    assert not found and np.all(grads[0] == np.float32(2.0**126))
    s.update(False)
    assert s.scale == MIN_SCALE  # growth starts from the floor again after growth_interval


@pytest.mark.parametrize("scale", [0.0, 0, -1.0, 1e-45, float("inf"), float("nan"), 1e39])
def test_a_scale_whose_inverse_is_not_finite_is_refused(scale):
    with pytest.raises(ValueError, match="scale must be"):
        StaticLossScaler(scale)
    s = DynamicLossScaler()
    state = {**s.state_dict(), "scale": scale}
    with pytest.raises(ValueError, match="loss scaler state: scale must be"):
        s.load_state_dict(state)
    assert s.scale == 2.0**16  # unchanged by the refused state


def test_the_floor_survives_a_state_round_trip():
    s = DynamicLossScaler(init_scale=MIN_SCALE)
    t = DynamicLossScaler()
    t.load_state_dict(s.state_dict())
    assert t.scale == MIN_SCALE and t.at_floor
