"""The training loop: ``train(config) -> TrainResult``, pure and seeded, and the ``Trainer``
behind it (checkpoints, resuming).

One step, in the order of ``torch.amp`` and nanoGPT:

    x, y   = next training batch
    loss   = model.forward(x, y)               stop here if the loss is non-finite or exploding
    grads  = model.backward(S * M)             S = the loss scale (1 without a scaler), M =
                                               loss_multiplier (1 by default; not undone)
    grads /= S                                 found_inf: any non-finite gradient
    if found_inf: skip the step, scaler.update(True)          (counted in skipped_steps)
    clip the global gradient norm to grad_clip
    optimizer.step(grads, lr(step))            rounding stored weights / moments per the policy
    nGPT: every matrix renormalized            placement 'ngpt' (``GPT.normalize_matrices``)
    scaler.update(False)

Each step records lr, loss, nll, log Z, the global gradient norm (before clipping), the loss scale,
whether the step was skipped and the clip factor; everything else a run measures is a probe it names
in ``TrainConfig.probes`` (``normlab.train.probes``: per-block residual-stream, gradient and update
statistics, the output logits' drift, DeepNet's update probe, the evaluation's precision
headroom), called at the forward, backward and update points of the step and at evaluation. The
validation NLL is measured every ``eval_interval`` steps and at the end; ``final_val_loss`` is
compared with the data's entropy floor where it has one.

Reruns from the same seed are bit-identical (one generator each for initialization, batches and
dropout, all spawned from ``seed``), and so is a run resumed from a checkpoint.

Two batches are drawn once, each from its own generator spawned from ``seed`` (so the training
batches are those of any other run): an Admin model (``placement="admin"``) profiles its omegas on
one before the first step (``GPT.profile_admin``), and the update probe measures on the other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._files import jsonable
from ..models import GPT
from . import checkpoint as ckpt
from . import probes
from .budget import check_memory
from .config import TrainConfig
from .data import AlgorithmicSource, DataSource, MarkovSource, TextSource
from .optim import SGD, AdamW, clip_grad_norm, flat_buffer
from .precision import TrainingPrecision
from .probes import residual_headroom as residual_headroom  # its home is probes; named here too
from .schedules import learning_rate

Progress = Callable[[int, int, str], None]  # (done, total, note), as the lab's progress bars


def make_source(config: TrainConfig) -> DataSource:
    """The data source a config names (synthetic sources take model.vocab_size symbols)."""
    V = config.model.vocab_size
    if config.data == "markov":
        return _markov(V, config.markov_order, config.markov_alpha, config.data_seed,
                       config.markov_zipf)
    if config.data in ("copy", "reverse"):
        return AlgorithmicSource(config.data, V, config.data_seed)
    if config.data == "pydoc":
        return TextSource.pydoc()
    return TextSource.from_file(str(config.data_path))  # data='file' has a path (TrainConfig)


@functools.lru_cache(maxsize=2)
def _markov(V: int, order: int, alpha: float, seed: int, zipf: float) -> MarkovSource:
    """The Markov source, built once per process for a sweep's runs (its table and stationary
    law take seconds at V in the thousands; sampling reads it and never changes it)."""
    return MarkovSource(V, order, alpha, seed, zipf)


@dataclass
class TrainResult:
    """What a run returns: the config, the per-step history and the summary numbers."""

    config: dict  # TrainConfig.to_dict() (the vocabulary resolved from the data)
    data: dict  # the data source's description (entropy rate, corpus hash, ...)
    history: list[dict]  # one record per step
    evals: list[dict]  # {"step", "val_loss"}: validation NLL, nats per token (+ "headroom")
    final_val_loss: float | None  # validation NLL at the end
    final_train_loss: float | None  # the last step's training NLL
    entropy_floor: float | None  # the best achievable validation loss, where the data has one
    stopped: str | None  # None when every step ran; otherwise why the run stopped
    steps_done: int  # optimizer steps attempted (skipped ones included)
    skipped_steps: int  # steps skipped by the loss scaler (non-finite gradients)
    wall_time_s: float  # seconds spent in training steps (evaluation excluded)
    tokens_per_s: float  # training tokens per second
    n_params: int  # number of model parameters

    @property
    def gap_to_floor(self) -> float | None:
        if self.final_val_loss is None or self.entropy_floor is None:
            return None
        return self.final_val_loss - self.entropy_floor

    def to_dict(self) -> dict:
        """JSON-ready: summary numbers at the top level, non-finite numbers as null."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # (copied below)
        d["gap_to_floor"] = self.gap_to_floor
        head = ("final_val_loss", "entropy_floor", "gap_to_floor", "final_train_loss", "stopped",
                "steps_done", "skipped_steps", "wall_time_s", "tokens_per_s", "n_params")
        return jsonable({**{k: d[k] for k in head},
                         **{k: v for k, v in d.items() if k not in head}},
                        null_nonfinite=True)

    def summary(self) -> str:
        """One line: the validation loss against the entropy floor."""
        if self.final_val_loss is None:
            text = "validation loss: not finite"
        else:
            text = f"validation loss {self.final_val_loss:.4f} nats/token"
        if self.entropy_floor is not None and self.final_val_loss is not None:
            text += (f", entropy floor {self.entropy_floor:.4f} "
                     f"(gap {self.gap_to_floor:+.4f} nats)")
        elif self.entropy_floor is None:
            text += " (this data has no known entropy floor)"
        if self.stopped:
            text += f"; stopped early: {self.stopped}"
        return text


class Trainer:
    """A model, its optimizer, data and precision policy, and the state of one run."""

    def __init__(self, config: TrainConfig):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
        check_memory(config)  # refuse what cannot fit before allocating anything
        source = make_source(config)
        if source.vocab_size != config.model.vocab_size:  # text: the corpus sets the vocabulary
            model_cfg = dataclasses.replace(config.model, vocab_size=source.vocab_size)
            config = dataclasses.replace(config, model=model_cfg)
        self.config, self.source = config, source
        init_seq, data_seq, dropout_seq, round_seq, profile_seq, self.probe_seq = (
            np.random.SeedSequence(config.seed).spawn(6))  # the first four as before
        self.data_rng = np.random.default_rng(data_seq)
        self.model: GPT = GPT(config.model, rng=np.random.default_rng(init_seq),
                              dropout_rng=np.random.default_rng(dropout_seq))
        T = config.model.seq_len
        if config.model.placement == "admin":  # at full precision, before the policy's hooks
            x, _ = source.train_batch(config.batch_size, T, np.random.default_rng(profile_seq))
            self.model.profile_admin(x)
        self.precision = TrainingPrecision.from_name(config.precision,
                                                     rng=np.random.default_rng(round_seq))
        self.model.set_numerics(self.precision.numerics)
        self.params = self.model.parameters()
        self.grads = self.model.gradients()
        self._flat_grads = flat_buffer(list(self.grads.values()))  # None: not one buffer
        if self.precision.param_round is not None:  # stored in the policy's format from the start
            for p in self.params.values():
                p[...] = self.precision.param_round(p)
        self.optimizer: AdamW | SGD = self._make_optimizer()
        self.val = source.val_batches(config.eval_batches, config.batch_size, T)
        self.step = 0
        self.probes = probes.build(config.active_probes(), self)  # by name
        hooks = {k: f for p in self.probes.values() for k, f in p.hooks().items()}
        self._watch = probes.Watch(self.precision.numerics, hooks)
        self.model.set_numerics(self._watch)  # the policy's hooks, the probes' tensors observed
        self.history: list[dict] = []
        self.evals: list[dict] = []
        self.skipped = 0
        self.stopped: str | None = None
        self.first_loss: float | None = None
        self.train_time = 0.0

    def _make_optimizer(self) -> AdamW | SGD:
        """The config's optimizer over ``self.params``, rounding as the precision policy says."""
        cfg = self.config
        rounding: dict[str, Any] = dict(state_round=self.precision.state_round,
                                        param_round=self.precision.param_round)
        if cfg.optimizer == "adamw":
            return AdamW(self.params, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps,
                         weight_decay=cfg.weight_decay, **rounding)
        return SGD(self.params, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                   **rounding)

    # ---- one step --------------------------------------------------------------------------
    def train_step(self) -> dict:
        """Run one step and return its record; sets ``stopped`` when the run must end."""
        model = self.model
        x, y = self.next_batch()
        with np.errstate(over="ignore", invalid="ignore"), self._watching():
            parts = model.forward(x, y)  # a blow-up is detected just below
        record = self.forward_record(parts, y)
        if self.stopped is not None:
            return record
        self._zero_grads()
        scale = self.loss_scale()
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is detected below
            model.backward(scale * self.config.loss_multiplier)
        return self.finish_step(record, scale)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """The next training batch (x, y), each (B, T); the model back in train mode."""
        cfg = self.config
        x, y = self.source.train_batch(cfg.batch_size, cfg.model.seq_len, self.data_rng)
        if not self.model.training:  # evaluate() and the probes hand it back in train mode
            self.model.train()
        return x, y

    def loss_scale(self) -> float:
        """This step's loss scale S (1 without a loss scaler)."""
        scaler = self.precision.scaler
        return 1.0 if scaler is None else float(scaler.scale)

    def forward_record(self, parts: Any, y: np.ndarray) -> dict:
        """The step's record after the forward (lr, loss, nll, log Z and the forward probes);
        sets ``stopped`` when the loss is non-finite or exploding."""
        cfg = self.config
        lr = learning_rate(self.step, schedule=cfg.schedule, lr=cfg.lr, warmup=cfg.warmup,
                           total=cfg.steps, min_lr=cfg.min_lr)
        record = {"step": self.step, "lr": lr, "loss": parts.loss, "nll": parts.nll,
                  "log_z": parts.log_z}
        self._probe("forward", record, y)
        self._diverged(parts.loss)
        return record

    def finish_step(self, record: dict, scale: float) -> dict:
        """After the backward (gradients of S x M x loss in the buffers): unscale, skip a step
        with a non-finite gradient, clip, update, advance the loss scaler."""
        cfg, scaler = self.config, self.precision.scaler
        self.precision.numerics.end_step()  # delayed scaling: this step's amax enters the history
        grad_sq = self._unscale(scale)
        record["grad_norm"] = grad_norm = math.sqrt(sum(grad_sq.values()))
        self._probe("backward", record, grad_sq)
        if scaler is not None:
            record["loss_scale"] = scale
        record["skipped"] = found_inf = not math.isfinite(grad_norm)
        if found_inf:  # the step skipped under a scaler, the run stopped without
            return self._skip(record)
        if cfg.grad_clip is not None:
            record["clip_factor"] = clip_grad_norm(self.grads, cfg.grad_clip, grad_norm)
        update_sq = self.optimizer.step(self.grads, record["lr"])
        self._renormalize()
        if scaler is not None:
            scaler.update(False)
        self._probe("update", record, update_sq)
        return record

    def _renormalize(self) -> None:
        """nGPT (placement 'ngpt'): every matrix back on the unit sphere along its embedding axis
        after the update (``GPT.normalize_matrices``; NVIDIA/ngpt train.py's
        ``normalize_matrices()`` after ``optimizer.step``), then rounded as the policy rounds
        stored parameters. An ensemble's member renormalizes its own rows, as its single run."""
        if self.config.model.placement != "ngpt":
            return
        self.model.normalize_matrices()
        rnd = self.optimizer.param_round
        if rnd is not None:  # storage without master weights: the stored values stay in format
            for _name, w, _axis in self.model.matrices():
                w[...] = rnd(w)

    def _watching(self) -> contextlib.AbstractContextManager:
        """The probes' watch, armed for one forward, around the hooks the model has now: the
        policy's, or what a caller installed with ``model.set_numerics`` since (kept)."""
        root = self.model.numerics_root
        if root is not self._watch:
            self._watch = probes.Watch(root, self._watch.watchers)
            self.model.set_numerics(self._watch)
        return self._watch.armed_for()

    def _probe(self, point: str, record: dict, value: Any) -> None:
        """Every probe's measurement at ``point`` (forward, backward, update) into ``record``."""
        for p in self.probes.values():
            getattr(p, point)(record, value)

    def _diverged(self, loss: float) -> bool:
        """Set ``stopped`` when the loss is non-finite or exploded past divergence_factor x the
        first step's."""
        cfg = self.config
        if self.first_loss is None:
            self.first_loss = loss
        if not math.isfinite(loss):
            self.stopped = f"non-finite loss ({loss}) at step {self.step}"
        elif loss > cfg.divergence_factor * self.first_loss:
            self.stopped = (f"loss {loss:.4g} exploded past {cfg.divergence_factor:g} x the "
                            f"first step's {self.first_loss:.4g} at step {self.step}")
        return self.stopped is not None

    def _unscale(self, scale: float) -> dict[str, float]:
        """Divide the gradients by the loss scale (torch.amp.GradScaler's unscale_: times
        float32(1 / S)); returns ||g||^2 per parameter (inf or NaN where one overflowed)."""
        if scale != 1.0:
            inv = np.float32(1.0 / scale)
            for g in self.grads.values():
                g *= inv
        with np.errstate(over="ignore", invalid="ignore"):
            return {name: float(np.vdot(g, g)) for name, g in self.grads.items()}

    def _skip(self, record: dict) -> dict:
        """A step with a non-finite gradient: skipped under a loss scaler, else the run stops."""
        if self.precision.scaler is None:
            self.stopped = f"non-finite gradient at step {self.step}"
        else:
            self.skipped += 1
            self.precision.scaler.update(True)
        return record

    def _zero_grads(self) -> None:
        """Zero every gradient buffer: the model's one flat buffer in one pass when it has one
        (``Module.flatten``), else array by array."""
        if self._flat_grads is None:
            for g in self.grads.values():
                g.fill(0)
        else:
            self._flat_grads.fill(0)

    def eval_record(self) -> dict:
        """The evaluation at this step: ``{"step", "val_loss"}``, and with ``eval_headroom``
        ``"headroom"``: ``residual_headroom`` of the first validation batch."""
        record = {"step": self.step, "val_loss": self.evaluate()}
        for p in self.probes.values():
            p.evaluate(record)
        return record

    def evaluate(self) -> float:
        """Mean validation NLL (nats per scored token) over the fixed validation batches."""
        self.model.eval()
        total, count = 0.0, 0
        with np.errstate(over="ignore", invalid="ignore"):  # a run that stopped may be non-finite
            for x, y in self.val:
                n = int(np.count_nonzero(y >= 0))
                total += self.model.forward(x, y).nll * n
                count += n
        self.model.release()
        self.model.train()
        return total / count

    # ---- the loop --------------------------------------------------------------------------
    def run(self, until: int | None = None, *, progress: Progress | None = None,
            checkpoint: str | Path | None = None,
            checkpoint_every: int | None = None) -> TrainResult:
        """Train up to step ``until`` (default: ``config.steps``) or until the run stops; save
        ``checkpoint`` every ``checkpoint_every`` steps and at the end when a path is given.

        Only a run that can be resumed is saved: once the run has stopped (a non-finite or
        exploding loss), ``checkpoint`` is never written again, so the last good state (or the
        file that was there before) stays."""
        cfg = self.config
        end = cfg.steps if until is None else min(int(until), cfg.steps)
        tokens = cfg.batch_size * cfg.model.seq_len
        while self.step < end and self.stopped is None:
            t0 = time.perf_counter()
            record = self.train_step()
            self.train_time += time.perf_counter() - t0
            self.history.append(record)
            self.step += 1
            if self.stopped is None and (self.step % cfg.eval_interval == 0
                                         or self.step == cfg.steps):
                self.evals.append(self.eval_record())
            if progress is not None:
                rate = self.step_tokens_per_s(tokens)
                progress(self.step, cfg.steps, f"loss {record['loss']:.4f}  {rate:,.0f} tok/s")
            if (checkpoint is not None and checkpoint_every and self.step % checkpoint_every == 0
                    and self.stopped is None):
                self.save(checkpoint)
        if self.stopped is not None and (not self.evals or self.evals[-1]["step"] != self.step):
            self.evals.append(self.eval_record())
        if checkpoint is not None and self.stopped is None:
            self.save(checkpoint)
        return self.result()

    def step_tokens_per_s(self, tokens_per_step: int) -> float:
        return tokens_per_step * len(self.history) / self.train_time if self.train_time > 0 else 0.0

    def result(self) -> TrainResult:
        cfg = self.config
        T = cfg.model.seq_len
        at_end = self.evals and self.evals[-1]["step"] == self.step
        final_val = self.evals[-1]["val_loss"] if at_end else None
        last_nll = self.history[-1]["nll"] if self.history else None
        return TrainResult(
            config=cfg.to_dict(), data=self.source.describe(), history=self.history,
            evals=self.evals, final_val_loss=final_val, final_train_loss=last_nll,
            entropy_floor=self.source.entropy_floor(T), stopped=self.stopped,
            steps_done=self.step, skipped_steps=self.skipped, wall_time_s=self.train_time,
            tokens_per_s=self.step_tokens_per_s(cfg.batch_size * T),
            n_params=self.model.num_parameters(),
        )

    # ---- checkpoints -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the whole state of the run to ``path`` (.npz, atomically); a run that stopped
        (diverged) cannot be resumed and is refused with a ``CheckpointError``."""
        if self.stopped is not None:
            raise ckpt.CheckpointError(f"the run stopped ({self.stopped}); it is not saved to "
                                       f"{str(path)!r}, which keeps what it held")
        arrays = {f"param/{k}": v for k, v in self.params.items()}
        arrays.update({f"opt/{k}": v for k, v in self.optimizer.state_dict().items()})
        for p in self.probes.values():
            arrays.update(p.state())
        meta = {
            "config": self.config.to_dict(), "step": self.step, "history": self.history,
            "evals": self.evals, "skipped": self.skipped, "stopped": self.stopped,
            "first_loss": self.first_loss, "train_time": self.train_time,
            "data_rng": self.data_rng.bit_generator.state,
            "dropout_rng": self.model.dropout_rng.bit_generator.state,
            "precision": self.precision.state(),
        }
        ckpt.save(path, arrays, meta)

    @classmethod
    def resume(cls, path: str | Path, config: TrainConfig | None = None) -> Trainer:
        """The run saved at ``path``. With ``config``, it must describe the same run (only
        ``steps`` may differ, to train longer, but not below the saved step); a mismatch is
        refused with the fields named. The arrays and metadata are validated first
        (``checkpoint.load``, ``checkpoint.check_run``), then their shapes and dtypes against the
        config's model."""
        arrays, meta = ckpt.load(path)
        step = ckpt.check_run(meta, path)
        if meta["stopped"] is not None:
            raise ckpt.CheckpointError(f"checkpoint {str(path)!r} holds a run that stopped early "
                                       f"({meta['stopped']}); it cannot be resumed")
        try:
            saved = TrainConfig.from_dict(meta["config"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ckpt.CheckpointError(
                f"checkpoint {str(path)!r}: its config is not valid ({exc})") from None
        if config is not None:
            saved = same_run(saved, config, path)
        if step > saved.steps:
            raise ckpt.CheckpointError(f"checkpoint {str(path)!r} is at step {step}, beyond "
                                       f"steps = {saved.steps}; give steps > {step} to train on")
        trainer = cls(saved)
        params = {k[len("param/"):]: v for k, v in arrays.items() if k.startswith("param/")}
        opt = {k[len("opt/"):]: v for k, v in arrays.items() if k.startswith("opt/")}
        for name, p in trainer.params.items():
            v = params.get(name)
            if v is not None and (v.dtype != p.dtype or v.shape != p.shape):
                raise ckpt.CheckpointError(f"checkpoint {str(path)!r}: param/{name} is {v.dtype} "
                                           f"{v.shape}; the config's model has {p.dtype} {p.shape}")
        updates = step - int(meta["skipped"])  # every step that was not skipped updated the weights
        if "opt/t" in arrays and int(arrays["opt/t"]) != updates:
            raise ckpt.CheckpointError(
                f"checkpoint {str(path)!r}: opt/t (the optimizer's step count) is "
                f"{int(arrays['opt/t'])}; the run made {updates} updates (step {step} - skipped "
                f"{meta['skipped']})")
        try:
            trainer.model.load_parameters(params)
            trainer.optimizer.load_state_dict(opt)
            trainer.data_rng.bit_generator.state = meta["data_rng"]
            trainer.model.dropout_rng.bit_generator.state = meta["dropout_rng"]
            trainer.precision.load_state(meta["precision"])
            trainer.step = int(meta["step"])
            trainer.history, trainer.evals = list(meta["history"]), list(meta["evals"])
            trainer.skipped, trainer.stopped = int(meta["skipped"]), meta["stopped"]
            trainer.first_loss, trainer.train_time = meta["first_loss"], float(meta["train_time"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ckpt.CheckpointError(
                f"checkpoint {str(path)!r} does not match its config: {exc}") from None
        for probe in trainer.probes.values():  # the update probe's W_0, the target counts
            try:
                probe.load_state(arrays, path)
            except KeyError as exc:
                raise ckpt.CheckpointError(f"checkpoint {str(path)!r} does not match its config: "
                                           f"{exc}") from None
        return trainer


def same_run(saved: TrainConfig, config: TrainConfig,
             path: str | Path = "<checkpoint>") -> TrainConfig:
    """``saved`` with ``config``'s steps, after checking that ``config`` describes the same run
    (every field but ``steps``; the vocabulary of a corpus is the saved one); a
    ``CheckpointError`` naming the fields that differ otherwise."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
    if saved.data in ("pydoc", "file"):  # the corpus set the saved run's vocabulary
        config = dataclasses.replace(config, model=dataclasses.replace(
            config.model, vocab_size=saved.model.vocab_size))
    diff = [d for d in _config_diff(saved, config) if d != "steps"]
    if diff:
        raise ckpt.CheckpointError(
            f"checkpoint {str(path)!r} was written by a different run: {', '.join(diff)} differ")
    return dataclasses.replace(saved, steps=config.steps)


def _config_diff(a: TrainConfig, b: TrainConfig) -> list[str]:
    da, db = a.to_dict(), b.to_dict()
    out = [f"model.{k}" for k in da["model"] if da["model"][k] != db["model"][k]]
    out += [k for k in da if k != "model" and da[k] != db[k]]
    return out


def train(config: TrainConfig, progress: Progress | None = None) -> TrainResult:
    """Train a model as ``config`` says and return the result (pure: seeded, writes nothing)."""
    return Trainer(config).run(progress=progress)
