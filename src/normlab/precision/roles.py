"""A precision policy's roles as a model applies them, written once for every model.

normlab's own model (``normlab.nn.numerics.PolicyNumerics``) and any PyTorch model
(``normlab.torch.emulate``) round a tensor by its role: ``params`` (a weight as the forward reads
it), ``compute`` (a matrix multiply's operand), ``activations`` (an op's output, the residual
stream) and ``gradients`` (a backward matrix multiply's incoming gradient). :class:`PolicyRoles`
holds what they share: the policy's :class:`~normlab.precision.Precision` of each role, the
checks that a policy can be applied to a model at all (its matrix multiplies accumulate in
float32; stochastic rounding needs a generator), and the state a scaling dialect keeps per tensor
(delayed scaling's amax history: one per tensor name and role, made at its first use, advanced
by :meth:`PolicyRoles.end_step` once per optimizer step, saved and restored with a checkpoint).
The backends differ only in how they round (NumPy or torch operations), which they keep.

What makes the states trustworthy in a training loop, whatever the backend:

* ``end_step`` advances the states only when one of them was used since the last one: a second
  call with no pass in between (an ``end_step`` that a loop makes twice, or makes besides a
  backend's own) changes nothing, so a history never rolls over a step that recorded nothing.
* :class:`StepClock` ends a step without a call the user can forget, for a backend that sees its
  forward and backward passes but not the optimizer (``normlab.torch.emulate``): the step ends
  when a forward begins after ``micro_batches`` training passes whose backward has run.
* A state made for a tensor first seen after the first step is legitimate (a mixture-of-experts
  expert that no token reached before), but the same number of new states in each of
  ``LEAK_STEPS`` steps in a row is a tensor naming that changes from step to step (a call
  counter that never resets): every step would then round with fresh states at scale 1.
  ``end_step`` warns once, naming the newest state (``StateLeakWarning``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import _checks as ck
from .policy import Precision, PrecisionPolicy, get_policy
from .scaling import ScalingState

#: The roles a model applies (``accumulate`` must be float32, and ``optimizer``, ``master`` and
#: ``communication`` belong to the optimizer and the reduction, not to the model's ops).
APPLIED_ROLES = ("params", "compute", "activations", "gradients")
#: Steps in a row with the same positive number of new states before ``end_step`` warns.
LEAK_STEPS = 3


class StateLeakWarning(UserWarning):
    """New scaling states appear at the same rate step after step: the tensor names change."""


class PolicyRoles:
    """The roles of ``policy`` (a :class:`PrecisionPolicy` or a preset name) as ``who`` (the
    model's name in messages) applies them.

    Refused by name before any work: a policy whose ``accumulate`` role rounds (the model's
    matrix multiplies accumulate in float32; ``normlab.precision.matmul`` emulates a lower
    accumulator op by op) and one that rounds stochastically without ``rng``."""

    def __init__(self, policy: Any, *, rng: np.random.Generator | None = None,
                 who: str = "the model"):
        pol = get_policy(policy) if isinstance(policy, str) else policy
        if not isinstance(pol, PrecisionPolicy):
            raise TypeError(f"policy must be a PrecisionPolicy or a preset name; got {policy!r}")
        if pol.accumulate.rounds:
            raise ValueError(f"policy {pol.name!r}: {who} accumulates its matrix multiplies in "
                             f"float32; an accumulate format of {pol.accumulate} is emulated "
                             f"by normlab.precision.matmul only")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
        self.policy = pol
        self.roles: dict[str, Precision] = {r: getattr(pol, r) for r in APPLIED_ROLES}
        if rng is None and any(p.rounding == "stochastic" for p in self.roles.values()):
            raise TypeError(f"policy {pol.name!r} rounds stochastically: pass rng=")
        self.rng = rng
        self.states: dict[str, ScalingState] = {}  # "<tensor name>/<role>" -> its state
        self.steps = 0  # end_step calls that advanced the states
        self._used = False  # a state was read since the last advance
        self._new: list[int] = []  # states made in each step that advanced, newest last
        self._made = 0  # states made since the last advance
        self._warned = False

    def __getitem__(self, role: str) -> Precision:
        return self.roles[role]

    def state(self, role: str, name: str) -> ScalingState | None:
        """The state of the tensor ``name`` in ``role`` (made at its first use), or None when the
        role's scaling keeps none."""
        key = f"{name}/{role}"
        state = self.states.get(key)
        if state is None:
            state = self.roles[role].new_state()
            if state is None:
                return None
            self.states[key] = state
            self._made += 1
        self._used = True
        return state

    def end_step(self) -> bool:
        """Advance every tensor's state once (the end of an optimizer step); nothing when no
        state was used since the last advance (module docstring). Returns whether it
        advanced."""
        if not self._used:
            return False
        for state in self.states.values():
            state.update()
        self._used = False
        self.steps += 1
        self._new = ([*self._new, self._made] if self.steps > 1 else [])[-LEAK_STEPS:]
        self._made = 0
        if not self._warned and len(self._new) == LEAK_STEPS and len(set(self._new)) == 1 \
                and self._new[0] > 0:
            self._warned = True
            warnings.warn(f"{self._new[0]} new scaling states in each of the last {LEAK_STEPS} "
                          f"steps (the newest {next(reversed(self.states))!r}): tensor names that "
                          f"change from step to step get fresh states at scale 1 every step",
                          StateLeakWarning, stacklevel=2)
        return True

    def state_dict(self) -> dict[str, Any]:
        """JSON-able states by ``"<tensor name>/<role>"``, for a checkpoint."""
        return {name: s.to_dict() for name, s in self.states.items()}

    def load_state(self, saved: Any) -> None:
        """Restore what :meth:`state_dict` returned; each entry is checked first (a TypeError or
        ValueError naming it): a state of one of the policy's roles that keeps one, and the
        state's own values (``ScalingState.load``)."""
        if not isinstance(saved, dict):
            raise TypeError(f"numerics state must be a mapping; got {type(saved).__name__}")
        for name, value in saved.items():
            role = str(name).rsplit("/", 1)[-1]
            state = self.roles[role].new_state() if role in self.roles else None
            if state is None:
                raise ValueError(f"numerics state {name!r} does not belong to policy "
                                 f"{self.policy.name!r}")
            state.load(value, f"numerics state {name!r}")
            self.states[str(name)] = state
        self._used, self._made = False, 0


class StepClock:
    """When one step of a training loop ends, for a backend that sees the model's forward and
    backward passes but not the optimizer: a step is ``micro_batches`` training passes (a
    forward with gradients on, then its backward); the forward that begins after them ends the
    step first (``forward`` returns True: the caller calls ``end_step`` of its roles). An
    explicit ``end_step`` of the caller's (``ended``) starts the count again.

        clock = StepClock(micro_batches=1)
        clock.forward(training=True)   # False: the first pass
        clock.backward()
        clock.forward(training=True)   # True: end the step before this pass
    """

    def __init__(self, micro_batches: int = 1):
        self.micro_batches = ck.integer(micro_batches, "micro_batches", lo=1)
        self.passes = 0  # training forwards since the step began
        self.backwards = False  # a backward ran since the step began

    def forward(self, training: bool) -> bool:
        """A forward begins (``training``: gradients on); True when the step ends before it."""
        end = self.backwards and self.passes >= self.micro_batches
        if end:
            self.ended()
        if training:
            self.passes += 1
        return end

    def backward(self) -> None:
        """A backward pass ran (any part of it)."""
        self.backwards = True

    def ended(self) -> None:
        """The step ended (the caller advanced its states)."""
        self.passes, self.backwards = 0, False


__all__ = ["APPLIED_ROLES", "LEAK_STEPS",
           "PolicyRoles", "StateLeakWarning", "StepClock"]

