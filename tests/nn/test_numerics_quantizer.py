"""PolicyNumerics rounds with the quantize kernel by default; the reference gives the same bits."""

import dataclasses

import numpy as np
import pytest

from normlab.nn.numerics import PolicyNumerics
from normlab.precision import Precision, PrecisionPolicy


@pytest.mark.parametrize("preset", ["amp_bf16", "amp_fp16", "pure_bf16", "fp8_hybrid"])
def test_kernel_and_reference_quantizers_round_alike(preset):
    x = np.random.default_rng(0).normal(0, 3, size=(64, 48)).astype(np.float32)
    x[0, :4] = [1e-30, -7e5, 65520.0, 2.0**-20]
    outs = {}
    for impl in ("kernel", "reference"):
        site = PolicyNumerics(preset, rng=np.random.default_rng(1), impl=impl).bind("blocks.0")
        ys = []
        for _ in range(3):  # delayed scaling: the scale moves between steps
            ys += [site.weight(x), site.input(x), site.output(x), site.grad(x), site.stream(x)]
            site.owner.end_step()
        outs[impl] = ys
    assert PolicyNumerics(preset, impl="kernel").quantizer is not None
    assert PolicyNumerics(preset, impl="reference").quantizer is None
    for a, b in zip(outs["kernel"], outs["reference"]):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_stochastic_rounding_draws_the_same_bits_on_both_paths():
    sr = Precision("bfloat16", rounding="stochastic")
    policy = dataclasses.replace(PrecisionPolicy.preset("pure_bf16"), params=sr, compute=sr)
    x = np.random.default_rng(2).normal(size=(32, 32)).astype(np.float32)
    a = PolicyNumerics(policy, rng=np.random.default_rng(3), impl="kernel").bind("m").weight(x)
    b = PolicyNumerics(policy, rng=np.random.default_rng(3), impl="reference").bind("m").weight(x)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not np.array_equal(a, PolicyNumerics(policy, rng=np.random.default_rng(4)).bind(
        "m").weight(x))  # it is stochastic


def test_bad_impl_is_refused():
    with pytest.raises(ValueError, match="impl"):
        PolicyNumerics("amp_bf16", impl="fast")
