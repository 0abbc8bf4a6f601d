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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .policy import Precision, PrecisionPolicy, get_policy
from .scaling import ScalingState

#: The roles a model applies (``accumulate`` must be float32, and ``optimizer``, ``master`` and
#: ``communication`` belong to the optimizer and the reduction, not to the model's ops).
APPLIED_ROLES = ("params", "compute", "activations", "gradients")


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

    def __getitem__(self, role: str) -> Precision:
        return self.roles[role]

    def state(self, role: str, name: str) -> ScalingState | None:
        """The state of the tensor ``name`` in ``role`` (made at its first use), or None when the
        role's scaling keeps none."""
        key = f"{name}/{role}"
        state = self.states.get(key)
        if state is None:
            state = self.roles[role].new_state()
            if state is not None:
                self.states[key] = state
        return state

    def end_step(self) -> None:
        """Advance every tensor's state once (the end of an optimizer step)."""
        for state in self.states.values():
            state.update()

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


__all__ = ["APPLIED_ROLES", "PolicyRoles"]
