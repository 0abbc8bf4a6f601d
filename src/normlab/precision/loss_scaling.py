"""Loss scaling, step for step as ``torch.amp.GradScaler``.

Multiply the loss by S before backpropagation, so that small gradients are moved into fp16's
range; divide the gradients by S before the optimizer step, g_true = (S g) / S. A step whose
gradients hold inf or NaN is skipped. The dynamic scaler then backs off, S <- S * backoff; after
``growth_interval`` consecutive finite steps it grows, S <- S * growth, unless that would
overflow float32. torch's arithmetic is reproduced exactly: S is a float32, unscaling multiplies
by ``float32(1 / float64(S))`` in float32 (the gradients' compute dtype), and the new scale is
``float32(float64(S) * factor)``.

Typical use (one optimizer):

    scaler = DynamicLossScaler()
    grads = backward(dloss * scaler.scale)          # gradients of the scaled loss
    grads, found_inf = scaler.unscale(grads)        # unscaled even when non-finite, as torch
    if not found_inf:
        optimizer_step(grads)
    scaler.update(found_inf)                        # back off, or count towards growth
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import _checks as ck

Grads = Sequence[np.ndarray] | Mapping[str, np.ndarray]
_F32_MAX = float(np.finfo(np.float32).max)


def _items(grads: Any) -> list[tuple[Any, np.ndarray]]:
    if isinstance(grads, Mapping):
        items = list(grads.items())
    elif isinstance(grads, (list, tuple)):
        items = list(enumerate(grads))
    else:
        raise TypeError(f"grads must be a list, tuple or dict of arrays; got "
                        f"{type(grads).__name__}")
    for key, g in items:
        if g is not None:
            ck.float_array(g, f"grads[{key!r}]")
    return items


def find_nonfinite(grads: Grads) -> list:
    """Keys (dict) or indices (list) of the gradients that hold an inf or NaN, in order: the
    first one names where an overflow started. None entries are skipped."""
    return [k for k, g in _items(grads) if g is not None and not np.isfinite(g).all()]


def has_nonfinite(grads: Grads) -> bool:
    """True if any gradient holds an inf or NaN."""
    return any(g is not None and not np.isfinite(g).all() for _, g in _items(grads))


def _f32(value: float) -> float:
    with np.errstate(over="ignore"):  # an overflow to inf is checked by the caller
        return float(np.float32(value))


# The smallest loss scale: float32's smallest normal number, whose inverse (2^126) the unscale
# multiplies by without overflowing; a dynamic scale that would fall below it stays there.
MIN_SCALE = float(np.finfo(np.float32).tiny)


def _scale_value(value: Any, name: str) -> float:
    """A loss scale: a number whose float32 value is in [MIN_SCALE, float32 max]."""
    v = ck.positive(value, name)
    f = _f32(v)
    if not MIN_SCALE <= f < math.inf:
        raise ValueError(f"{name} must be a positive float32 number in [{MIN_SCALE:g}, "
                         f"{float(np.finfo(np.float32).max):g}] (1 / scale must be finite); "
                         f"got {value!r}")
    return f


def _factor(value: Any, name: str, low: float, high: float) -> float:
    v = ck.positive(value, name)
    if not low < v < high:
        raise ValueError(f"{name} must be in ({low}, {high}); got {v!r}")
    return v


class StaticLossScaler:
    """A fixed loss scale S: the same interface as DynamicLossScaler, S never changes, and a
    step with non-finite gradients is still reported (and should be skipped).

    Args:
        scale: S > 0, stored as float32 (Micikevicius et al. used constants from 8 to 32K).
    """

    def __init__(self, scale: float = 2.0**16) -> None:
        self._scale = _scale_value(scale, "scale")
        self.steps = 0  # updates seen
        self.skipped = 0  # of which with non-finite gradients

    @property
    def scale(self) -> float:
        """The current loss scale S (a float32 value)."""
        return self._scale

    def scale_loss(self, loss: Any) -> Any:
        """loss * S, in the loss's compute dtype (float32 for low-precision input)."""
        arr = ck.float_array(loss, "loss")
        ct = ck.compute_dtype(arr.dtype)
        return arr.astype(ct, copy=False) * ct.type(self._scale)

    def unscale(self, grads: Grads) -> tuple[Any, bool]:
        """Divide every gradient by S, as GradScaler's ``unscale_``.

        Each gradient is multiplied by ``inv = float32(1 / float64(S))`` in its compute dtype
        (float32 for float32 and lower, float64 for float64) and returned in its own dtype;
        gradients are unscaled even when non-finite ones are found. Unlike torch, float16
        gradients are accepted (torch refuses them: "Attempting to unscale FP16 gradients";
        the cure there is an fp32 master copy, see ``normlab.precision.master``).

        Args:
            grads: list, tuple or dict of float arrays (None entries pass through).

        Returns:
            (unscaled gradients in a container of the same kind, found_inf).
        """
        items = _items(grads)
        inv = np.float32(1.0 / float(self._scale))
        found_inf = False
        out = []
        for key, g in items:
            if g is None:
                out.append((key, None))
                continue
            ct = ck.compute_dtype(g.dtype)
            found_inf |= not bool(np.isfinite(g).all())
            u = g.astype(ct, copy=False) * ct.type(inv) if inv != 1 else g.copy()
            out.append((key, ck.out_cast(u, g.dtype)))
        if isinstance(grads, Mapping):
            return dict(out), found_inf
        # the Sequence's own type (list, tuple, ...), built from an iterable
        return type(grads)(v for _, v in out), found_inf  # type: ignore[call-arg]

    def step(self, grads: Grads, optimizer_step: Callable[[Any], Any]) -> bool:
        """One scaled step: unscale, call ``optimizer_step(unscaled_grads)`` unless a gradient is
        inf/NaN, then ``update``. Returns True when the step was skipped (torch's ``step`` does
        not say; pytorch/pytorch#55585)."""
        unscaled, found_inf = self.unscale(grads)
        if not found_inf:
            optimizer_step(unscaled)
        self.update(found_inf)
        return found_inf

    def update(self, found_inf: bool) -> None:
        """Record one step; a static scale does not change."""
        found_inf = ck.flag(found_inf, "found_inf")
        self.steps += 1
        self.skipped += found_inf

    def state_dict(self) -> dict:
        return {"scale": self._scale, "steps": self.steps, "skipped": self.skipped}

    def load_state_dict(self, state: Mapping) -> None:
        """Restore what :meth:`state_dict` returned, each value checked first (a TypeError or
        ValueError naming the key: a scale that is not a positive float32 number, a count below
        0)."""
        self._check_state(state)
        self._scale = _f32(state["scale"])
        self.steps, self.skipped = int(state["steps"]), int(state["skipped"])

    def _check_state(self, state: Any) -> None:
        keys = tuple(self.state_dict())
        if not isinstance(state, Mapping):
            raise TypeError(f"loss scaler state must be a mapping of {', '.join(keys)}; got "
                            f"{type(state).__name__}")
        missing = [k for k in keys if k not in state and k != "min_scale"]
        if missing:
            raise ValueError(f"loss scaler state lacks {', '.join(missing)}")
        ck.real(state["scale"], "loss scaler state: scale", lo=0)
        _scale_value(state["scale"], "loss scaler state: scale")  # and 1 / scale finite
        steps = ck.integer(state["steps"], "loss scaler state: steps", lo=0)
        ck.integer(state["skipped"], "loss scaler state: skipped", lo=0, hi=steps)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale={self._scale:g})"


class DynamicLossScaler(StaticLossScaler):
    """torch.amp.GradScaler's dynamic loss scale.

    Args:
        init_scale: initial S (2^16).
        growth_factor: > 1; S <- S * growth after ``growth_interval`` consecutive finite steps,
            unless the product overflows float32 (then S stays).
        backoff_factor: in (0, 1); S <- S * backoff after a step with inf/NaN gradients.
        growth_interval: consecutive finite steps before growth (2000).
        min_scale: None (torch: no lower bound; S can fall below 1 and towards 0), or a floor
            for S, as jmp's ``min_loss_scale``. Either way S never falls below ``MIN_SCALE``
            (float32's smallest normal number, where torch's reaches 0 and 1 / S divides by
            zero): it stays there, ``at_floor`` is set and a RuntimeWarning says so once.

    ``growth_tracker`` counts the consecutive finite steps (torch's ``_growth_tracker``).
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 min_scale: float | None = None) -> None:
        super().__init__(init_scale)
        self.growth_factor = _factor(growth_factor, "growth_factor", 1.0, math.inf)
        self.backoff_factor = _factor(backoff_factor, "backoff_factor", 0.0, 1.0)
        if isinstance(growth_interval, bool) or not isinstance(growth_interval,
                                                                 (int, np.integer)):
            raise TypeError(f"growth_interval must be an integer >= 1; got {growth_interval!r}")
        if growth_interval < 1:
            raise ValueError(f"growth_interval must be >= 1; got {growth_interval}")
        self.growth_interval = int(growth_interval)
        self.min_scale = None if min_scale is None else ck.positive(min_scale, "min_scale")
        self.growth_tracker = 0
        self.at_floor = False  # the scale reached MIN_SCALE (said once, as a RuntimeWarning)

    def update(self, found_inf: bool) -> None:
        """torch's ``_amp_update_scale_``: back off on inf/NaN, else count and maybe grow."""
        super().update(found_inf)
        if found_inf:
            self._scale = _f32(self._scale * self.backoff_factor)
            if self.min_scale is not None:
                self._scale = max(self._scale, _f32(self.min_scale))
            if self._scale < MIN_SCALE:  # would underflow towards 0 (1 / S = inf): the floor
                self._scale = MIN_SCALE
                if not self.at_floor:
                    warnings.warn(f"DynamicLossScaler: the loss scale reached its floor "
                                  f"{MIN_SCALE:g} (float32's smallest normal number) after "
                                  f"{self.skipped} skipped steps; it stays there: the gradients "
                                  f"are non-finite at any scale", RuntimeWarning, stacklevel=2)
                self.at_floor = True
            self.growth_tracker = 0
            return
        successful = self.growth_tracker + 1
        if successful == self.growth_interval:
            grown = _f32(self._scale * self.growth_factor)
            if math.isfinite(grown):
                self._scale = grown
            self.growth_tracker = 0
        else:
            self.growth_tracker = successful

    def state_dict(self) -> dict:
        """torch's keys (scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker) plus normlab's counters."""
        return {**super().state_dict(), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.growth_tracker, "min_scale": self.min_scale}

    def _check_state(self, state: Any) -> None:
        super()._check_state(state)
        _factor(state["growth_factor"], "loss scaler state: growth_factor", 1.0, math.inf)
        _factor(state["backoff_factor"], "loss scaler state: backoff_factor", 0.0, 1.0)
        interval = ck.integer(state["growth_interval"], "loss scaler state: growth_interval", lo=1)
        ck.integer(state["_growth_tracker"], "loss scaler state: _growth_tracker", lo=0,
                   hi=interval - 1)
        if state.get("min_scale") is not None:
            ck.positive(state["min_scale"], "loss scaler state: min_scale")

    def load_state_dict(self, state: Mapping) -> None:
        super().load_state_dict(state)
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self.growth_tracker = int(state["_growth_tracker"])
        self.min_scale = state.get("min_scale")
        self.at_floor = self._scale <= MIN_SCALE

    def __repr__(self) -> str:
        return (f"DynamicLossScaler(scale={self._scale:g}, growth_tracker={self.growth_tracker}, "
                f"growth_factor={self.growth_factor}, backoff_factor={self.backoff_factor}, "
                f"growth_interval={self.growth_interval})")
