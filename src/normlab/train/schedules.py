"""Learning-rate schedules: linear warmup, then constant, cosine, or inverse square root.

With s = step + 1 (steps counted from 1), peak ``lr``, ``warmup`` steps W and ``total`` steps N:

    warmup        lr * s / W                                   for s <= W
    constant      lr
    cosine        min_lr + (lr - min_lr) (1 + cos(pi (s - W) / (N - W))) / 2
    inverse_sqrt  lr * sqrt(W / s)      (Vaswani et al. 2017; Xiong et al. 2020; fairseq),
                  with W = 1 when there is no warmup
"""

from __future__ import annotations

import math

from .. import _checks as ck

SCHEDULES = ("constant", "cosine", "inverse_sqrt")


def check_schedule(schedule: str, lr: float, warmup: int, total: int, min_lr: float = 0.0) -> None:
    """Refuse an inconsistent schedule with a message that names the argument."""
    ck.choice(schedule, "schedule", SCHEDULES)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0; got {lr!r}")
    if not (isinstance(min_lr, (int, float)) and math.isfinite(min_lr) and 0 <= min_lr <= lr):
        raise ValueError(f"min_lr must be in [0, lr = {lr}]; got {min_lr!r}")
    for value, name in ((warmup, "warmup"), (total, "steps")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
    if total < 1:
        raise ValueError(f"steps must be >= 1; got {total}")


def learning_rate(step: int, *, schedule: str, lr: float, warmup: int, total: int,
                  min_lr: float = 0.0) -> float:
    """The learning rate of step ``step`` (0-based) of ``total``."""
    s = step + 1
    if s <= warmup:
        return lr * s / warmup
    if schedule == "constant":
        return lr
    if schedule == "inverse_sqrt":
        return lr * math.sqrt(max(warmup, 1) / s)
    span = max(total - warmup, 1)
    progress = min((s - warmup) / span, 1.0)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
