"""The covariate-shift noise module (Santurkar et al. 2018's "noisy BatchNorm"): a random affine
perturbation whose statistics are drawn afresh at every training forward
(``normlab.functional.shift_noise_forward``); the identity in eval mode."""

from __future__ import annotations

import numpy as np

from .. import _checks as ck
from ..functional.noise import shift_noise_backward, shift_noise_forward
from .module import Module


class ShiftNoise(Module):
    """``y = a * x + b`` with a per-step mean shift in [-mean_range, mean_range], a per-step scale
    log-uniform in [1 / max_scale, max_scale] and a per-value spread; no parameters. Its own
    generator: ``ShiftNoise(1.0, 2.0, 0.1, rng=np.random.default_rng(0))``."""

    def __init__(self, mean_range: float, max_scale: float, spread: float, *,
                 rng: np.random.Generator):
        super().__init__()
        self.mean_range = ck.real(mean_range, "mean_range", lo=0)
        self.max_scale = ck.real(max_scale, "max_scale", lo=1)
        self.spread = ck.real(spread, "spread", lo=0)
        self.rng = ck.generator(rng)

    def forward(self, x: np.ndarray) -> np.ndarray:
        out, self._cache = shift_noise_forward(
            x, mean_range=self.mean_range, max_scale=self.max_scale, spread=self.spread,
            training=self.training, rng=self.rng)
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return shift_noise_backward(dout, self._last_cache())
