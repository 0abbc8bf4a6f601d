"""How a precision policy (``normlab.precision`` presets) enters training, at these points:

* the model's forward and backward: ``PolicyNumerics`` hooks (params, compute, activations,
  gradients roles; see ``normlab.nn.numerics``);
* the loss: multiplied by the loss scaler's S before the backward, the gradients divided by S
  after it, a step with non-finite gradients skipped and counted (``loss_scaling``);
* the weights: with a ``master`` copy (float32 in the presets) the optimizer updates the master
  and the forward reads its ``params``-format copy; without one (``pure_bf16``) the stored weights
  themselves are rounded to ``params`` after every update, so updates below half an ulp are lost;
* the optimizer's moments: rounded to ``optimizer`` after every update.

``fp32`` is full precision: no hooks, no scaler, nothing rounded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..nn.numerics import FULL_PRECISION, Numerics, PolicyNumerics
from ..precision import PRESETS, RECIPES, PrecisionPolicy, get_policy

PRECISIONS = (*PRESETS, *RECIPES)


def load_policy(name: str) -> PrecisionPolicy:
    """A preset by name, a policy from a JSON file (a name ending in .json: the format of
    ``PrecisionPolicy.to_json``), or the policy's JSON object itself (a string starting with
    ``{``: it travels inside the config, to sweep workers on other machines too); a clear
    ValueError otherwise."""
    if isinstance(name, str) and name.lstrip().startswith("{"):
        try:
            return PrecisionPolicy.from_json(name)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"precision (an inline JSON policy): {exc}") from None
    if isinstance(name, str) and name.endswith(".json"):
        from .._files import MAX_TEXT_BYTES, check_input_file

        # a regular file of bounded size: a FIFO or device is refused unread
        path = check_input_file(Path(name), what="precision file", max_bytes=MAX_TEXT_BYTES)
        try:
            return PrecisionPolicy.from_json(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"precision file {name!r} cannot be read: {exc.strerror}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"precision file {name!r}: {exc}") from None
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, a policy file ending in "
                         f".json, or a JSON policy object; got {name!r}")
    return get_policy(name)


def is_full_precision(policy: PrecisionPolicy) -> bool:
    """True when no role rounds float32 data and there is no loss scaling."""
    roles = ("params", "compute", "accumulate", "activations", "gradients", "optimizer", "master")
    return policy.loss_scaling is None and not any(
        getattr(policy, r) is not None and getattr(policy, r).rounds for r in roles)


def check_precision(name: str, model_config: Any) -> None:
    """Refuse an unknown policy, one the model cannot emulate, or a policy on a float64 model
    (policies emulate formats below float32 on float32 arrays)."""
    try:
        policy = load_policy(name)
        if not is_full_precision(policy):
            PolicyNumerics(policy, rng=np.random.default_rng(0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config: {exc}") from None
    if not is_full_precision(policy) and model_config.dtype != "float32":
        raise ValueError(
            f"config: precision {name!r} needs model.dtype float32; got {model_config.dtype}"
        )


def _rounder(precision: Any,
             rng: np.random.Generator | None) -> Callable[[np.ndarray], np.ndarray] | None:
    if precision is None or not precision.rounds:
        return None
    from .. import kernels

    # the kernel's rounding where numba imports: the reference's bits, stochastic draws included
    quantizer = kernels.quantize if kernels.available() else None
    return lambda a: precision.apply(a, rng=rng, quantizer=quantizer).astype(a.dtype, copy=False)


@dataclass
class TrainingPrecision:
    """What the trainer applies at each documented point of a step."""

    name: str
    numerics: Numerics  # the model's forward/backward rounding
    scaler: Any  # a loss scaler (.scale, .update(found_inf), .state_dict()), or None
    param_round: Callable[[np.ndarray], np.ndarray] | None  # stored weights after each update
    state_round: Callable[[np.ndarray], np.ndarray] | None  # the optimizer's moments
    rng: np.random.Generator | None = None  # for stochastic rounding

    @classmethod
    def from_name(cls, name: str, rng: np.random.Generator | None = None) -> TrainingPrecision:
        """The preset (or .json policy file) ``name``; ``rng`` draws stochastic rounding where a
        role asks for it."""
        return cls.from_policy(load_policy(name), rng)

    @classmethod
    def from_policy(cls, policy: PrecisionPolicy,
                    rng: np.random.Generator | None = None) -> TrainingPrecision:
        if is_full_precision(policy):
            return cls(policy.name, FULL_PRECISION, None, None, None, rng)
        numerics = PolicyNumerics(policy, rng=rng)
        stored = policy.params if policy.master is None else policy.master
        return cls(policy.name, numerics, policy.make_loss_scaler(), _rounder(stored, rng),
                   _rounder(policy.optimizer, rng), rng)

    def state(self) -> dict:
        """JSON-serializable state to checkpoint: the loss scaler, the delayed-scaling
        histories and the rounding generator."""
        return {
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "numerics": self.numerics.state(),
            "rng": None if self.rng is None else self.rng.bit_generator.state,
        }

    def load_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise TypeError(
                f"the saved precision state must be a mapping; got {type(state).__name__}"
            )
        if (state.get("scaler") is None) != (self.scaler is None):
            raise ValueError(f"the saved loss-scaler state does not fit precision {self.name!r}")
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.numerics.load_state(state.get("numerics", {}))
        if self.rng is not None and state.get("rng") is not None:
            self.rng.bit_generator.state = state["rng"]
