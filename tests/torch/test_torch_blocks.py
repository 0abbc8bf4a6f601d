"""normlab.torch's block dialects (torch/blocks.py) against normlab.precision's NumPy path, bit
for bit: NVFP4 (TE and torchao, 1x16 and 16x16, row-scaled, 4over6), FP8 blocks and rows, MX
(1D, 2D, narrower scales, integer elements), the Hadamard rotation; on the edge-heavy vectors of
the conformance suite, rounding to nearest and stochastically (the same random words)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from normlab.precision import MXINT8, Precision  # noqa: E402
from normlab.precision.block_conformance import CASES, case_inputs  # noqa: E402
from normlab.precision.policy import _format_to  # noqa: E402
from normlab.torch import apply  # noqa: E402
from normlab.torch.quantize import TORCH_SCALINGS  # noqa: E402

E2M1, E4M3 = "float4_e2m1fn", "float8_e4m3fn"
DIALECTS = [
    (E2M1, {"kind": "nvfp4"}),
    (E2M1, {"kind": "nvfp4", "two_d": True}),
    (E2M1, {"kind": "nvfp4", "global_scale": "row"}),
    (E2M1, {"kind": "nvfp4", "four_over_six": "mae"}),
    (E2M1, {"kind": "nvfp4", "four_over_six": "mse", "e4m3_max": 256, "two_d": True}),
    (E2M1, {"kind": "nvfp4", "dialect": "torchao"}),
    (E2M1, {"kind": "nvfp4", "dialect": "torchao", "global_scale": "none"}),
    (E4M3, {"kind": "fp8_blocks"}),
    (E4M3, {"kind": "fp8_blocks", "pow2": True, "two_d": True, "block": 32}),
    (E4M3, {"kind": "fp8_blocks", "dialect": "te"}),
    (E4M3, {"kind": "fp8_blocks", "dialect": "te", "pow2": False, "two_d": True, "block": 32}),
    (E4M3, {"kind": "fp8_blocks", "dialect": "torchao"}),
    (E4M3, {"kind": "fp8_rows"}),
    (E4M3, {"kind": "fp8_rows", "pow2": False}),
    (E4M3, {"kind": "mx", "scale_rule": "rceil"}),
    (E4M3, {"kind": "mx", "scale_rule": "floor", "two_d": True}),
    (E2M1, {"kind": "mx", "scale_rule": "even", "scale_bits": 5}),
    (_format_to(MXINT8), {"kind": "mx"}),
    ({"exponent_bits": 8, "mantissa_bits": 3, "bias": 140}, {"kind": "mx"}),
    (E2M1, {"kind": "hadamard", "scaling": {"kind": "nvfp4"}}),
    (E2M1, {"kind": "hadamard", "scaling": {"kind": "nvfp4", "axis": 0}}),
    (E4M3, {"kind": "hadamard", "signs": "none", "size": 32, "scaling": {"kind": "mx"}}),
]


def _inputs():
    """Edge-heavy matrices from the conformance vectors (every kind of block), 16x16-tileable."""
    picks = ("nvfp4/te/16x16", "mx/torchao/float8_e4m3fn/floor", "fp8_blocks/te/1x128/pow2=True")
    out = []
    for c in CASES:
        if c.id in picks:
            out += case_inputs(c, seed=3, blocks=64)[:2]
    return out


INPUTS = _inputs()


def _bits(a):
    a = np.asarray(a, np.float32)
    b = a.view(np.uint32).copy()
    b[np.isnan(a)] = 0x7FC00000
    return b


@pytest.mark.parametrize("fmt, scaling", DIALECTS)
@pytest.mark.parametrize("rounding", ["nearest_even", "stochastic"])
def test_torch_is_numpy_bit_for_bit(fmt, scaling, rounding):
    if rounding == "stochastic" and scaling.get("four_over_six"):
        pytest.skip("4over6 compares round-to-nearest candidates")
    p = Precision.from_value({"format": fmt, "rounding": rounding, "scaling": scaling})
    kind = p.scaling.kind
    assert kind in TORCH_SCALINGS  # computed in torch, not the NumPy fallback
    assert len(INPUTS) == 4  # two NVFP4 tensors (32x128), one MX matrix, one FP8 matrix
    for x in INPUTS:
        if kind == "hadamard" and x.shape[getattr(p.scaling.scaling, "axis", -1)] % \
                p.scaling.size:
            continue  # the rotation needs whole groups along its axis
        with np.errstate(all="ignore"):
            want = p.apply(x, rng=np.random.default_rng(5))
        got = apply(p, torch.from_numpy(x), rng=np.random.default_rng(5)).numpy()
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=str(scaling))


def test_sr_bits_and_float64_take_the_numpy_path():
    p = Precision.from_value({"format": E2M1, "rounding": "stochastic", "sr_bits": 8,
                              "scaling": {"kind": "nvfp4"}})
    x = INPUTS[0]
    with np.errstate(all="ignore"):
        want = p.apply(x, rng=np.random.default_rng(1))
    got = apply(p, torch.from_numpy(x), rng=np.random.default_rng(1)).numpy()
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_emulate_applies_block_dialects_with_the_same_bits():
    """A Linear under a policy of block dialects: the output is the policy's reference path
    (normlab's PolicyNumerics, NumPy) bit for bit."""
    from normlab.nn.numerics import PolicyNumerics
    from normlab.precision import PrecisionPolicy, get_policy
    from normlab.torch import emulate

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = (rng.standard_normal((32, 64)) * 0.1).astype(np.float32)
    lin = torch.nn.Linear(64, 32, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
    data = {**get_policy("amp_bf16").to_dict(), "name": "blocks",
            "params": {"format": E2M1, "scaling": {"kind": "nvfp4", "two_d": True}},
            "compute": {"format": E4M3, "scaling": {"kind": "fp8_blocks", "block": 32}}}
    pol = PrecisionPolicy.from_json(json.dumps(data))
    ours = PolicyNumerics(pol, impl="reference").bind("lin")
    with emulate(lin, pol):
        y = lin(torch.from_numpy(x)).detach().numpy()
    xq = ours.input(x, "input")
    wq = ours.weight(w, "weight")
    prod = torch.nn.functional.linear(torch.from_numpy(xq), torch.from_numpy(wq)).numpy()
    np.testing.assert_array_equal(y, ours.output(prod, "output"))
