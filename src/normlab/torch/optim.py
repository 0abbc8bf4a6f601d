"""``PolicyOptimizer``: a torch optimizer under a precision policy, with its loss scaler.

The policy's roles after the backward pass, at the points of normlab's trainer
(``normlab.train.trainer``, ``normlab.train.precision``):

* loss scaling: ``scale(loss)`` is ``loss * S`` with S the scaler's current scale (the policy's
  ``loss_scaling``: ``normlab.precision``'s ``DynamicLossScaler`` or ``StaticLossScaler``);
  ``unscale_()`` multiplies every gradient by ``float32(1 / S)`` in float32 (as the trainer and
  ``torch.amp.GradScaler``) and finds the non-finite ones; ``step()`` skips the update when one
  is found and calls the scaler's ``update(found_inf)``: back off on a skipped step, grow after
  ``growth_interval`` finite ones;
* the optimizer's moments (Adam's ``exp_avg`` and ``exp_avg_sq``, SGD's ``momentum_buffer``):
  rounded to the ``optimizer`` role right after their update, before the update reads them
  (normlab's ``state_round``);
* the stored weights: without a master copy (``master`` is None: ``pure_bf16``) every weight is
  rounded to the ``params`` role after each update and once at construction (normlab's
  ``param_round``), so updates below half a unit in the last place are lost unless the role
  rounds stochastically; with a master copy the torch parameters are the master (rounded to
  ``master`` when it is not float32) and ``emulate`` rounds them to ``params`` where the forward
  reads them.

``torch.optim.AdamW`` and ``Adam`` (without amsgrad) and ``SGD`` are stepped by this module in
the arithmetic of their single-tensor implementations (the same bits as torch's for a policy
that rounds nothing), with the moments rounded inside the step; any other torch optimizer is
stepped by itself and its floating-point state of a parameter's shape is rounded afterwards (its
update then reads this step's moments unrounded). Stochastic rounding draws from the
``numpy.random.Generator`` given as ``rng``, parameter by parameter in the optimizer's order,
the moments before the weight, as normlab's optimizer does.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import torch

from ..precision import Precision, PrecisionPolicy, get_policy
from .quantize import apply


def _round(p: Precision | None, t: torch.Tensor, rng: np.random.Generator | None) -> None:
    """Round ``t`` in place to ``p`` (None or float32: nothing)."""
    if p is None or not p.rounds:
        return
    with torch.no_grad():
        t.copy_(apply(p, t, rng=rng))


def _check_own(opt: torch.optim.Optimizer) -> bool:
    """Whether this module steps ``opt`` itself (AdamW, Adam without amsgrad, SGD)."""
    if not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)):
        return False
    for g in opt.param_groups:
        bad = [k for k in ("amsgrad", "maximize", "capturable", "differentiable") if g.get(k)]
        if bad:
            raise ValueError(f"optimizer: PolicyOptimizer steps {type(opt).__name__} itself and "
                             f"does not support {', '.join(bad)}=True")
        if isinstance(g["lr"], torch.Tensor):
            raise ValueError("optimizer: a tensor learning rate is not supported; use a float")
    return True


class PolicyOptimizer:
    """``optimizer`` (a ``torch.optim.Optimizer``) under ``policy``'s ``optimizer``, ``master``
    and ``params`` roles and its loss scaler (module docstring).

        opt = PolicyOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), "pure_bf16",
                              rng=np.random.default_rng(0))
        with emulate(model, "pure_bf16") as em:
            opt.scale(model(**batch).loss).backward()
        em.end_step()
        skipped = opt.step()           # unscale, skip on inf/NaN, round, scaler.update
        opt.zero_grad()

    Args:
        optimizer: the torch optimizer over the model's parameters.
        policy: a ``PrecisionPolicy`` or a preset name (the one given to ``emulate``).
        rng: a ``numpy.random.Generator``; required when a role used here rounds stochastically.

    Attributes:
        scaler: the policy's loss scaler (None without loss scaling).
        steps, skipped: steps taken and steps skipped for non-finite gradients.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, policy: Any, *,
                 rng: np.random.Generator | None = None):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer; got "
                            f"{type(optimizer).__name__}")
        pol = get_policy(policy) if isinstance(policy, str) else policy
        if not isinstance(pol, PrecisionPolicy):
            raise TypeError(f"policy must be a PrecisionPolicy or a preset name; got {policy!r}")
        self.stored = pol.params if pol.master is None else pol.master
        self.moments = pol.optimizer
        stochastic = any(p is not None and p.rounds and p.rounding == "stochastic"
                         for p in (self.stored, self.moments))
        if stochastic and rng is None:
            raise TypeError(f"policy {pol.name!r} rounds the weights or moments stochastically: "
                            f"pass rng=")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
        self.own = _check_own(optimizer)
        self.optimizer, self.policy, self.rng = optimizer, pol, rng
        self.scaler = pol.make_loss_scaler()
        self.steps = self.skipped = 0
        self._found_inf: bool | None = None  # this step's unscale_ result
        self._stepped: list[tuple[Any, int]] = []  # the last step's gradients and versions
        for p in self._params():  # stored in the policy's format from the start, as normlab
            _round(self.stored, p.data, rng)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    @property
    def loss_scale(self) -> float:
        """The current loss scale S (1.0 without a scaler)."""
        return 1.0 if self.scaler is None else float(self.scaler.scale)

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss * S`` (the loss itself without a scaler)."""
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"loss must be a torch.Tensor; got {type(loss).__name__}")
        return loss if self.scaler is None else loss * self.loss_scale

    def _check_new_gradients(self) -> None:
        """Refuse a step on the gradients the last step used: every gradient the same tensor
        at the same version (no backward since), as ``torch.amp.GradScaler`` refuses a second
        ``step()`` before ``update()``."""
        if not self._stepped:
            return
        now = {id(p.grad): p.grad._version for p in self._params() if p.grad is not None}
        if now and all(ref() is not None and id(ref()) in now and now[id(ref())] == v
                       for ref, v in self._stepped):
            raise RuntimeError("PolicyOptimizer: step() (or unscale_()) again on the gradients "
                               "the last step already unscaled and used; run the next backward "
                               "(after zero_grad) first")

    def unscale_(self) -> bool:
        """Divide the gradients by S (times ``float32(1 / S)``, once per step) and return
        whether any gradient holds an inf or NaN. Refused on the last step's gradients (no
        backward since: a RuntimeError)."""
        if self._found_inf is not None:
            return self._found_inf
        self._check_new_gradients()
        inv = np.float32(1.0 / self.loss_scale)
        found = False
        with torch.no_grad():
            for p in self._params():
                if p.grad is None:
                    continue
                if inv != 1:
                    p.grad.mul_(torch.tensor(inv, dtype=torch.float32).to(p.grad.dtype))
                found = found or not bool(torch.isfinite(p.grad).all())
        self._found_inf = found
        return found

    def step(self) -> bool:
        """One step: unscale, skip it on non-finite gradients, else update and round; then the
        scaler's update. Returns True when the step was skipped. A second step on the same
        gradients (no backward in between) is refused (a RuntimeError), as it would unscale
        them again."""
        found_inf = self.unscale_()
        self._found_inf = None
        self.steps += 1
        if not found_inf:
            if self.own:
                self._own_step()
            else:
                self.optimizer.step()
                self._round_after()
        else:
            self.skipped += 1
        if self.scaler is not None:
            self.scaler.update(found_inf)
        self._stepped = [(weakref.ref(p.grad), p.grad._version) for p in self._params()
                         if p.grad is not None]
        return found_inf

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def _round_after(self) -> None:
        """Another optimizer: its moments of each parameter's shape, then the weight."""
        for p in self._params():
            for v in self.optimizer.state.get(p, {}).values():
                if isinstance(v, torch.Tensor) and v.is_floating_point() and v.shape == p.shape:
                    _round(self.moments, v, self.rng)
            _round(self.stored, p.data, self.rng)

    @torch.no_grad()
    def _own_step(self) -> None:
        opt = self.optimizer
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if isinstance(opt, torch.optim.SGD):
                    self._sgd(p, group, opt.state[p])
                else:
                    self._adam(p, group, opt.state[p], isinstance(opt, torch.optim.AdamW)
                               or group.get("decoupled_weight_decay", False))
                _round(self.stored, p.data, self.rng)

    def _adam(self, p: torch.Tensor, group: dict, state: dict, decoupled: bool) -> None:
        """torch's ``_single_tensor_adam`` (no amsgrad), the moments rounded after update."""
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        grad, m, v = p.grad, state["exp_avg"], state["exp_avg_sq"]
        assert grad is not None  # _own_step skips parameters without a gradient
        state["step"] += 1
        if wd != 0:
            if decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        m.lerp_(grad, 1 - b1)
        v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        _round(self.moments, m, self.rng)
        _round(self.moments, v, self.rng)
        step = float(state["step"].item())
        bc1, bc2 = 1 - b1**step, 1 - b2**step
        denom = (v.sqrt() / bc2**0.5).add_(eps)
        p.addcdiv_(m, denom, value=-(lr / bc1))

    def _sgd(self, p: torch.Tensor, group: dict, state: dict) -> None:
        """torch's ``_single_tensor_sgd``, the momentum buffer rounded after its update."""
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        grad = p.grad
        assert grad is not None  # _own_step skips parameters without a gradient
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        if mu != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.detach().clone()
            else:
                buf.mul_(mu).add_(grad, alpha=1 - group["dampening"])
            _round(self.moments, buf, self.rng)
            grad = grad.add(buf, alpha=mu) if group["nesterov"] else buf
        p.add_(grad, alpha=-lr)

    def state_dict(self) -> dict:
        """The optimizer's, the scaler's, the counters and the generator's state."""
        return {"optimizer": self.optimizer.state_dict(),
                "scaler": None if self.scaler is None else self.scaler.state_dict(),
                "steps": self.steps, "skipped": self.skipped,
                "rng": None if self.rng is None else self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or "optimizer" not in state:
            raise TypeError("state must be a dict from PolicyOptimizer.state_dict()")
        if (state.get("scaler") is None) != (self.scaler is None):
            raise ValueError(f"the saved loss-scaler state does not fit policy "
                             f"{self.policy.name!r}")
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.steps, self.skipped = int(state["steps"]), int(state["skipped"])
        if self.rng is not None and state.get("rng") is not None:
            self.rng.bit_generator.state = state["rng"]
