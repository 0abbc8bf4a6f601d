"""How a precision policy enters training: the model's rounding hooks, the loss scaler, the
rounding of stored parameters (no master weights) and of the optimizer's moments.

``fp32`` is full precision: no hooks, no scaler, nothing rounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..nn.numerics import FULL_PRECISION, Numerics

PRECISIONS = ("fp32",)


def check_precision(name: str, model_config) -> None:
    """Refuse an unknown policy name, or a policy on a float64 model (policies emulate formats
    below float32 on float32 arrays)."""
    if name not in PRECISIONS:
        raise ValueError(f"config: precision must be one of {PRECISIONS}; got {name!r}")
    if name != "fp32" and model_config.dtype != "float32":
        raise ValueError(f"config: precision {name!r} needs model.dtype float32; got {model_config.dtype}")


@dataclass
class TrainingPrecision:
    """What the trainer applies at each documented point of a step."""

    name: str
    numerics: Numerics  # the model's forward/backward rounding
    scaler: Any  # a loss scaler (.scale, .update(found_inf)), or None
    param_round: Callable[[np.ndarray], np.ndarray] | None  # stored parameters (no master copy)
    state_round: Callable[[np.ndarray], np.ndarray] | None  # the optimizer's moments

    @classmethod
    def from_name(cls, name: str) -> "TrainingPrecision":
        if name == "fp32":
            return cls("fp32", FULL_PRECISION, None, None, None)
        raise ValueError(f"precision must be one of {PRECISIONS}; got {name!r}")

    def state(self) -> dict:
        """JSON-serializable state to checkpoint (the loss scaler's)."""
        return {}

    def load_state(self, state: dict) -> None:
        pass
