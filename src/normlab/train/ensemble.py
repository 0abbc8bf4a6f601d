"""Ensembles: many runs of one architecture trained in one pass, ``train_ensemble(configs)``.

The lab's verdicts are intervals over seeds, so its cost is many copies of one small model
trained side by side. An ``Ensemble`` trains them together: each member is its own ``Trainer``
(its data stream, optimizer, precision policy and loss scaler, probes, history and evaluation),
while the forward and backward of every step run once for all members on the stacked model
(``normlab.models.stack``: every parameter with a leading member axis, batched matrix products,
each gradient reduced per member). One step:

    x_m, y_m  = member m's next batch                       for every running member
    losses    = stacked.forward(x (M, B, T), y (M, B, T))    member m's loss settings
    record_m  = member m's forward record                    (stops m if its loss diverged)
    stacked.backward([S_m * M_m])                            each member's loss scale
    member m's unscale, skip, clip, optimizer step, scaler   (``Trainer.finish_step``)

A member that stops (a non-finite or exploding loss, a non-finite gradient without a loss scaler)
or reaches its ``steps`` keeps its result; the others go on, stacked again without it at the
next step (its parameters stay as they were, in its own model). Members may differ in every
field but the model's shape-changing ones and ``batch_size``: the seed (initialization, data
order, dropout), the learning rate and its schedule, weight decay, the optimizer's constants, the
loss multiplier, the precision policy and its loss scaler, the data, the evaluation and the
probes, and the model's loss-only fields (``models.members.LOSS_FIELDS``: soft-cap, z-loss,
label smoothing).

A member is its single run: its losses, gradients and final parameters equal those of
``train(config)`` bit for bit (tests/train/test_ensemble.py), because every operation of the
stacked model computes member m's values with the same arithmetic in the same order as member
m's model alone (the batched products call the same sgemm per member; the attention kernel
computes every sequence in a SIMD lane of its own, ``normlab.kernels.attention_lanes``). Each
member's ``wall_time_s`` is its share of the steps' time (a step's time over the members running
it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..models.members import LOSS_FIELDS, shape_fields_differ, stack
from ..nn.numerics import MemberNumerics
from .config import TrainConfig
from .optim import flat_buffer
from .trainer import Progress, Trainer, TrainResult

# the run fields that change the shapes of a step's tensors: members share them
SHARED_FIELDS = ("batch_size",)


def check_members(configs: Sequence[TrainConfig]) -> list[TrainConfig]:
    """``configs`` as a list, after checking that they can train as one ensemble: a non-empty
    list of TrainConfigs that agree in ``SHARED_FIELDS`` and in every model field but
    ``LOSS_FIELDS``; a TypeError or ValueError naming the first field that differs."""
    if isinstance(configs, TrainConfig) or not isinstance(configs, Sequence) or not configs:
        raise TypeError("configs must be a non-empty list of TrainConfig")
    configs = list(configs)
    for i, c in enumerate(configs):
        if not isinstance(c, TrainConfig):
            raise TypeError(f"configs[{i}] must be a TrainConfig; got {type(c).__name__}")
    first = configs[0]
    for i, c in enumerate(configs[1:], 1):
        diff = [f for f in SHARED_FIELDS if getattr(c, f) != getattr(first, f)]
        diff += shape_fields_differ(first.model, c.model)
        if diff:
            field = diff[0]
            raise ValueError(
                f"configs[{i}].{field} = {_get(c, field)!r} differs from configs[0]'s "
                f"{_get(first, field)!r}: an ensemble's members share the model's shape-changing "
                f"fields and {', '.join(SHARED_FIELDS)} (they may differ in the seed, the "
                f"recipe's scalars, the precision and model.{', model.'.join(LOSS_FIELDS)})")
    return configs


def _get(config: TrainConfig, dotted: str) -> object:
    obj: object = config
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


class Ensemble:
    """The runs of ``configs`` (``check_members``), trained in one pass: ``run()`` returns one
    ``TrainResult`` per member, in order, as ``train(config)`` would for each alone."""

    def __init__(self, configs: Sequence[TrainConfig]):
        configs = check_members(configs)
        self.members = [Trainer(c) for c in configs]
        check_members([t.config for t in self.members])  # a corpus' vocabulary, resolved
        self._stack(list(range(len(self.members))))
        for t in self.members:
            t.optimizer = t._make_optimizer()  # fresh state: nothing has been trained yet
        self._batches: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(self.members)

    def _stack(self, slots: list[int]) -> None:
        """Stack the members ``slots`` (member indices, in order) into ``self.model``: their
        models' parameters and gradients become their rows of the stacked buffers, with the values
        they hold; their optimizers (if built) update those rows from then on."""
        self.model = stack([self.members[i].model for i in slots])
        for i in slots:
            t = self.members[i]
            t.params, t.grads = t.model.parameters(), t.model.gradients()
            t._flat_grads = flat_buffer(list(t.grads.values()))
            if hasattr(t, "optimizer"):
                t.optimizer.rebind(t.params)
        self.model.set_numerics(MemberNumerics([self.members[i]._watch for i in slots]))
        self.slots = slots  # the members the stacked model computes, its member axis in order

    def running(self) -> list[int]:
        """The members still training: not stopped, below their ``steps``."""
        return [i for i, t in enumerate(self.members)
                if t.stopped is None and t.step < t.config.steps]

    # ---- one step --------------------------------------------------------------------------
    def train_step(self) -> dict[int, dict]:
        """One step of every running member; returns their records by member index. Once
        members have stopped or finished, the running ones are stacked again without them
        (``_stack``: the same values in fewer rows), so that no step computes a member that no
        longer trains; each member's arithmetic is its own, so its bits do not change."""
        live = self.running()
        if live != self.slots:
            self._stack(live)
        model = self.model
        for i in live:
            self._batches[i] = self.members[i].next_batch()
        batches: list[Any] = [self._batches[i] for i in live]
        x = np.stack([b[0] for b in batches])  # (M, B, T)
        y = np.stack([b[1] for b in batches])
        if not model.training:
            model.train()
        with contextlib.ExitStack() as armed, np.errstate(over="ignore", invalid="ignore"):
            for i in live:
                armed.enter_context(self.members[i]._watching())
            parts: Any = model.forward(x, y)  # one LossParts per member
        self._hand_over_max_logits()
        records = {i: self.members[i].forward_record(parts[k], y[k])
                   for k, i in enumerate(live)}
        going = [i for i in live if self.members[i].stopped is None]
        scales = {i: self.members[i].loss_scale() for i in going}
        model.flat_gradients.fill(0)  # type: ignore[union-attr]  # stack() sets it
        dloss = [scales[i] * self.members[i].config.loss_multiplier if i in scales else 0.0
                 for i in live]
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is detected below
            model.backward(dloss)
        for i in going:
            records[i] = self.members[i].finish_step(records[i], scales[i])
        return records

    def _hand_over_max_logits(self) -> None:
        """Each member model's attention ``max_logit`` (what ``residual_stats`` records), from
        the stacked forward's per-member maxima."""
        stacked = [self.members[i] for i in self.slots]
        for block, *members in zip(self.model.blocks, *(t.model.blocks for t in stacked)):
            maxes = block.attn.branch.member_max_logit
            for m, b in enumerate(members):
                b.attn.branch.max_logit = maxes[m]

    # ---- evaluation --------------------------------------------------------------------------
    def _evaluate(self, due: list[int]) -> None:
        """Append an evaluation to each member of ``due``: all members at once on the stacked
        model when every running member is due at the same step with as many batches, else
        member by member (so that no member's rounding noise or scaling history sees an
        evaluation its single run would not have made)."""
        if not due:
            return
        members = self.members
        if due != self.running_or_just_done(due) or len({len(t.val) for t in members}) != 1:
            for i in due:
                members[i].evals.append(members[i].eval_record())
            return
        losses = self._stacked_val_losses()
        for i in due:
            record = {"step": members[i].step, "val_loss": losses[i]}
            for p in members[i].probes.values():
                p.evaluate(record)
            members[i].evals.append(record)

    def running_or_just_done(self, due: list[int]) -> list[int]:
        """The members whose numerics an evaluation on the stacked model would touch and whose
        results can still change: those of ``due`` and those still running."""
        return sorted(set(due) | set(self.running()))

    def _stacked_val_losses(self) -> dict[int, float]:
        """Each stacked member's mean validation NLL, by member index, from one stacked forward
        per validation batch (the single run's ``Trainer.evaluate``, member by member)."""
        model, members = self.model, [self.members[i] for i in self.slots]
        model.eval()
        total, count = [0.0] * len(members), [0] * len(members)
        with np.errstate(over="ignore", invalid="ignore"):
            for j in range(len(members[0].val)):
                x = np.stack([t.val[j][0] for t in members])
                y = np.stack([t.val[j][1] for t in members])
                parts: Any = model.forward(x, y)  # one LossParts per member
                for m in range(len(members)):
                    n = int(np.count_nonzero(y[m] >= 0))
                    total[m] += parts[m].nll * n
                    count[m] += n
        model.release()
        model.train()
        return dict(zip(self.slots, (t / c for t, c in zip(total, count))))

    # ---- the loop --------------------------------------------------------------------------
    def run(self, *, progress: Progress | None = None) -> list[TrainResult]:
        """Train every member to its ``steps`` or until it stops; one result per member."""
        done = 0
        total = max(t.config.steps for t in self.members)
        while self.running():
            live = self.running()
            t0 = time.perf_counter()
            records = self.train_step()
            share = (time.perf_counter() - t0) / len(live)
            due = []
            for i, record in records.items():
                t = self.members[i]
                t.train_time += share
                t.history.append(record)
                t.step += 1
                if t.stopped is not None:  # its last evaluation, now, as its single run's
                    t.evals.append(t.eval_record())
                elif t.step % t.config.eval_interval == 0 or t.step == t.config.steps:
                    due.append(i)
            self._evaluate(due)
            done += 1
            if progress is not None:
                progress(done, total, f"{len(self.running())} of {len(self.members)} running")
        return [t.result() for t in self.members]


def train_ensemble(configs: Sequence[TrainConfig], progress: Progress | None = None
                   ) -> list[TrainResult]:
    """Train the runs of ``configs`` in one pass (``Ensemble``) and return one result per run,
    each equal to ``train(config)``'s (pure: seeded, writes nothing)."""
    return Ensemble(configs).run(progress=progress)
