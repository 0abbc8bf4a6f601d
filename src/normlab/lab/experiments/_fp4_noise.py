"""The gradient and its quantization noise during FP4 training, measured on the training step
itself (the probe of ``fp4-all-the-way``), and a run that switches to bf16 at a fixed step.

On a measured step the trainer's own step runs as ``Trainer.train_step`` does (the FP4 policy's
forward and backward, its stochastic rounding drawn from the run's own stream); before the
update, the same batch at the same parameters goes through the model once more at full precision
(float32 of the stored weights, no rounding, no draw from any stream), and the quantized
gradients are put back for the update. So a measured run is bit for bit the unmeasured one, and
on that step

    g      = the full-precision weight gradient of every FP4 linear layer (the blocks' matrices),
    Q(g)   = the same gradient as the FP4 training step computed it (forward and backward GEMMs
             quantized, as the recipe says),
    noise  = ||Q(g) - g||, norm  = ||g||, ratio = norm / noise   (over the same tensors, one
             Frobenius norm over all of them together).

A run's record: per step the training NLL (the step's batch, before its update), and on the
measured steps the two norms. Runs are plain data (:func:`train_measured`), so the experiment
sends them to the executor's workers with ``_training.run_tasks``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...nn.numerics import FULL_PRECISION, numerics_scope
from ...train import TrainConfig
from ...train.precision import TrainingPrecision
from ...train.trainer import Trainer


def quantized_names(trainer: Trainer) -> list[str]:
    """The parameters whose weight gradient the FP4 recipe computes in FP4: the blocks' linear
    weights (the head and the embeddings stay out of every GEMM recipe here)."""
    return [name for name, _w, _axis in trainer.model.matrices() if name.startswith("blocks.")]


def measured_step(trainer: Trainer, names: list[str]) -> dict:
    """One training step of ``trainer`` (as ``Trainer.train_step``), with ``grad_norm_fp``
    (||g||) and ``noise_norm`` (||Q(g) - g||) over ``names`` added to its record.

    Returns:
        the step's record (``Trainer.train_step``'s keys plus the two norms).
    """
    model = trainer.model
    x, y = trainer.next_batch()  # (B, T) each
    with np.errstate(over="ignore", invalid="ignore"), trainer._watching():
        parts = model.forward(x, y)
    record = trainer.forward_record(parts, y)
    if trainer.stopped is not None:
        return record
    trainer._zero_grads()
    scale = trainer.loss_scale()
    with np.errstate(over="ignore", invalid="ignore"):
        model.backward(scale * trainer.config.loss_multiplier)
    quantized = {n: g.copy() for n, g in trainer.grads.items()}
    with numerics_scope(model, FULL_PRECISION), np.errstate(over="ignore", invalid="ignore"):
        model.forward(x, y)
        trainer._zero_grads()
        model.backward(scale * trainer.config.loss_multiplier)
    g_sq = noise_sq = 0.0
    for n in names:
        g = trainer.grads[n].astype(np.float64)
        d = quantized[n].astype(np.float64) - g
        g_sq += float(np.vdot(g, g))
        noise_sq += float(np.vdot(d, d))
    for n, g in trainer.grads.items():  # the update uses the quantized step's gradients
        g[...] = quantized[n]
    record["grad_norm_fp"] = math.sqrt(g_sq) / scale
    record["noise_norm"] = math.sqrt(noise_sq) / scale
    return trainer.finish_step(record, scale)


def switch_precision(trainer: Trainer, name: str) -> None:
    """Continue ``trainer`` under the policy ``name`` (a preset or a policy's JSON): the model's
    rounding changes; the weights, the optimizer's state and the rounding stream stay. Refused
    where the two policies store weights or optimizer state differently or use a loss scaler."""
    new = TrainingPrecision.from_name(name, rng=trainer.precision.rng)
    old = trainer.precision
    if new.scaler is not None or old.scaler is not None:
        raise ValueError(f"switch_precision: {name!r} or {old.name!r} uses a loss scaler; only "
                         f"policies without one can be switched mid-run")
    if (new.param_round is None) != (old.param_round is None) or (
            (new.state_round is None) != (old.state_round is None)):
        raise ValueError(f"switch_precision: {name!r} stores weights or optimizer state "
                         f"unlike {old.name!r}; the switch keeps both as they are")
    trainer.precision = new
    trainer.model.set_numerics(new.numerics)


def train_measured(args: dict[str, Any]) -> dict[str, Any]:
    """Train one run and return its curves as plain data.

    ``args``: ``config`` (a TrainConfig's dict), ``every`` (measure the gradient and its noise
    every this many steps; 0: never), ``switch_at`` (the step from which the run continues in
    ``switch_to``; None: never), ``switch_to`` (a policy name).

    Returns:
        ``{"nll": [per step], "steps_measured": [...], "grad_norm": [...], "noise_norm":
        [...], "val_loss": final validation NLL, "stopped": reason or None}``; a run that
        stops early has its curves up to that step.
    """
    cfg = TrainConfig.from_dict(args["config"])
    every, switch_at = int(args.get("every", 0)), args.get("switch_at")
    trainer = Trainer(cfg)
    names = quantized_names(trainer)
    out: dict[str, Any] = {"nll": [], "steps_measured": [], "grad_norm": [], "noise_norm": []}
    while trainer.step < cfg.steps and trainer.stopped is None:
        if switch_at is not None and trainer.step == int(switch_at):
            switch_precision(trainer, args["switch_to"])
            every = 0  # nothing is quantized after the switch
        if every and trainer.step % every == 0:
            record = measured_step(trainer, names)
            if "noise_norm" in record:
                out["steps_measured"].append(trainer.step)
                out["grad_norm"].append(record["grad_norm_fp"])
                out["noise_norm"].append(record["noise_norm"])
        else:
            record = trainer.train_step()
        out["nll"].append(float(record["nll"]))
        trainer.step += 1
    out["val_loss"] = float(trainer.evaluate())
    out["stopped"] = trainer.stopped
    return out
