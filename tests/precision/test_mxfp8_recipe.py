"""``mxfp8_recipe``: the mxfp8 preset with its shared scale chosen by a rule, as a user builds it
(the lab's mxfp8-scale-rule trains with it)."""

import math

import numpy as np
import pytest

from normlab.precision import PRESETS, PrecisionPolicy, mxfp8_recipe
from normlab.train import TrainConfig
from normlab.train.precision import load_policy


def test_ceil_is_the_preset_and_floor_differs_in_the_scale_rule_only():
    assert mxfp8_recipe() is PRESETS["mxfp8"] and mxfp8_recipe("ceil") is PRESETS["mxfp8"]
    floor, preset = mxfp8_recipe("floor"), PRESETS["mxfp8"]
    assert floor.name == "mxfp8_floor"
    for role in ("compute", "gradients"):
        p = getattr(floor, role)
        assert p.scaling.scale_rule == "floor"
        assert p.format == getattr(preset, role).format and p.scaling.block_size == 32
    for role in ("params", "activations", "optimizer", "master", "accumulate"):
        assert getattr(floor, role) == getattr(preset, role)


def test_floor_saturates_a_block_maximum_that_ceil_keeps():
    """amax = 1.9 x 2^8: the OCP rule's X = 2^(floor(log2 amax) - 8) = 1 leaves 486.4 above
    E4M3's 448 (saturated); the round-up rule's X = 2 represents it to E4M3's precision."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = 1.9 * 256, 3.0
    X_floor = 2.0 ** (math.floor(math.log2(1.9 * 256)) - 8)
    assert X_floor == 1.0
    q_floor = mxfp8_recipe("floor").compute.apply(x)
    q_ceil = mxfp8_recipe("ceil").compute.apply(x)
    assert float(q_floor[0, 0]) == 448.0  # saturated: 8% lost
    assert float(q_ceil[0, 0]) == 480.0  # 486.4 / 2 = 243.2 -> 240 in E4M3, times 2
    assert float(q_floor[0, 1]) == float(q_ceil[0, 1]) == 3.0


def test_a_recipe_trains_as_json_and_round_trips():
    floor = mxfp8_recipe("floor")
    text = floor.to_json(indent=None)
    assert load_policy(text) == floor == PrecisionPolicy.from_json(text)
    TrainConfig(precision=text)  # accepted as a run's precision


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="scale_rule"):
        mxfp8_recipe("down")
    with pytest.raises(TypeError, match="scale_rule"):
        mxfp8_recipe(1)  # type: ignore[arg-type]
