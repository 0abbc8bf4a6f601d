"""One interface for every scaling dialect: a new dialect is one class and one registration, and
it works from that entry alone in a policy, in normlab's model (training, checkpoints) and in
normlab.torch, with the same bits in both."""

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from normlab.precision import (
    SCALINGS,
    Precision,
    PrecisionPolicy,
    ScaledTensor,
    Scaling,
    ScalingDialect,
    amax,
    get_format,
    get_policy,
    quantize,
    register_scaling,
    unregister_scaling,
)


class _PowerOfTwoState:
    """The throwaway dialect's state: the exponent of the scale, from the amax of the last step."""

    def __init__(self, fmt: Any) -> None:
        self.fmt, self.scale, self.seen = get_format(fmt), 1.0, 0.0

    def update(self) -> float:
        if self.seen > 0:
            self.scale = 2.0 ** np.floor(np.log2(self.fmt.max_finite / self.seen))
        self.seen = 0.0
        return self.scale

    def to_dict(self) -> dict:
        return {"scale": self.scale, "seen": self.seen}

    def load(self, saved: Any, where: str) -> None:
        if not isinstance(saved, dict) or set(saved) != {"scale", "seen"}:
            raise ValueError(f"{where}: must hold scale and seen")
        self.scale, self.seen = float(saved["scale"]), float(saved["seen"])


@dataclass(frozen=True)
class PowerOfTwoDelayed(ScalingDialect):
    """A throwaway dialect: a power-of-two scale from the previous step's amax, shifted down by
    ``margin`` binades."""

    margin: int = 1
    kind: ClassVar[str] = "throwaway_pow2"

    def new_state(self, fmt: Any) -> _PowerOfTwoState:
        return _PowerOfTwoState(fmt)

    def quantize(self, x, fmt, *, rounding="nearest_even", overflow="saturate", rng=None,
                 state=None, axis=None, sr_bits=None, quantizer=None) -> ScaledTensor:
        s = state.scale * 2.0 ** -self.margin
        x = np.asarray(x, np.float32)
        q = quantize(x * np.float32(s), fmt, rounding=rounding, overflow=overflow, rng=rng,
                     sr_bits=sr_bits)
        state.seen = max(state.seen, amax(x))
        return ScaledTensor(q, s, float(np.float32(1.0) / np.float32(s)), get_format(fmt))

    def describe(self) -> str:
        return f"power-of-two delayed scaling (margin {self.margin})"


@pytest.fixture
def dialect():
    register_scaling(PowerOfTwoDelayed)
    yield PowerOfTwoDelayed
    unregister_scaling(PowerOfTwoDelayed.kind)


def _policy() -> PrecisionPolicy:
    fp8 = {"format": "float8_e4m3fn", "scaling": {"kind": "throwaway_pow2", "margin": 2}}
    data = {**get_policy("amp_bf16").to_dict(), "name": "throwaway", "compute": fp8,
            "gradients": {**fp8, "format": "float8_e5m2"}}
    return PrecisionPolicy.from_json(json.dumps(data))


def test_a_registered_dialect_is_data_in_a_policy(dialect):
    assert SCALINGS["throwaway_pow2"] is dialect and isinstance(dialect(), Scaling)
    pol = _policy()
    assert pol.compute.scaling == dialect(margin=2)
    assert PrecisionPolicy.from_json(pol.to_json()) == pol  # its parameters as data, both ways
    assert "power-of-two delayed scaling (margin 2)" in pol.describe()
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['shift'\] for kind "
                                         r"'throwaway_pow2'"):
        Precision.from_value({"format": "float8_e4m3fn",
                              "scaling": {"kind": "throwaway_pow2", "shift": 1}})
    with pytest.raises(ValueError, match="a scaling dialect named 'tensor' exists"):
        register_scaling(type("Other", (PowerOfTwoDelayed,), {"kind": "tensor"}))


def test_an_unregistered_dialect_is_refused_by_name():
    with pytest.raises(ValueError, match=r"kind must be one of .*'mx'.*got 'throwaway_pow2'"):
        Precision.from_value({"format": "float8_e4m3fn", "scaling": {"kind": "throwaway_pow2"}})


def test_normlab_trains_with_it_and_checkpoints_its_state(dialect, tmp_path):
    from normlab.train import TrainConfig, Trainer

    model = {"n_layers": 1, "d_model": 16, "n_heads": 2, "seq_len": 8}
    base = TrainConfig(steps=4, warmup=1, batch_size=4, eval_interval=4, eval_batches=1)
    cfg = base.with_overrides({**{f"model.{k}": v for k, v in model.items()},
                               "precision": _policy().to_json(indent=None)})
    t = Trainer(cfg)
    res = t.run()
    ref = Trainer(cfg.with_overrides({"precision": "amp_bf16"})).run()
    assert np.isfinite(res.final_val_loss)
    assert res.history[-1]["loss"] != ref.history[-1]["loss"]  # its rounding is applied
    states = t.precision.numerics.state()
    assert states and all(k.endswith(("/compute", "/gradients")) for k in states)
    assert all(s["scale"] != 1.0 for s in states.values())  # updated once per step
    fresh = Trainer(cfg).precision.numerics
    fresh.load_state(json.loads(json.dumps(states)))
    assert fresh.state() == states


def test_normlab_torch_applies_it_with_the_same_bits(dialect):
    torch = pytest.importorskip("torch")
    from normlab.nn.numerics import PolicyNumerics
    from normlab.torch import emulate

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32) * 3
    w = rng.standard_normal((8, 16)).astype(np.float32)
    lin = torch.nn.Linear(16, 8, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
    pol = _policy()
    ours = PolicyNumerics(pol, impl="reference").bind("lin")
    em = emulate(lin, pol)
    for step in range(3):  # the states move: each step's scale from the last one's amax
        with em:
            y = lin(torch.from_numpy(x)).detach().numpy()
        em.end_step()
        xq, wq = ours.input(x, "input"), ours.weight(w, "weight")
        product = torch.nn.functional.linear(torch.from_numpy(xq), torch.from_numpy(wq))
        want = ours.output(product.numpy(), "output")
        ours.owner.end_step()
        np.testing.assert_array_equal(y, want)
        assert not np.array_equal(xq, quantize(x, "bfloat16")), step
    # states named by the weight they belong to (the root module's parameter "weight")
    assert sorted(em.rounder.states) == ["weight/input/compute", "weight/weight/compute"]
