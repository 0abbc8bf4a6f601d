"""The training run's configuration: one dataclass (the model's config nested in it), a comment per
field, checked on creation so that an inconsistent run is refused before any work starts."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from .. import _checks as ck
from ..models import GPTConfig
from .precision import check_precision
from .probes import DEFAULT_PROBES, PROBE_NAMES
from .schedules import SCHEDULES, check_schedule

DATA = ("markov", "copy", "reverse", "pydoc", "file")
OPTIMIZERS = ("adamw", "sgd")


def default_model() -> GPTConfig:
    """The default model of ``normlab train``: small enough for minutes on 2 cores."""
    return GPTConfig(vocab_size=16, seq_len=64, n_layers=2, d_model=64, n_heads=4)


@dataclass(frozen=True)
class TrainConfig:
    """One training run: model, data, optimizer, schedule, precision, evaluation, seed."""

    model: GPTConfig = field(default_factory=default_model)  # the architecture (model.seq_len is T)
    # ---- data
    data: str = "markov"  # markov, copy, reverse, pydoc (pydoc_data.topics characters), file
    data_path: str | None = None  # the UTF-8 text file for data='file'
    markov_order: int = 2  # k: the Markov source's next symbol depends on the last k
    markov_alpha: float = 0.1  # Dirichlet concentration of its transition rows (small: peaked)
    markov_zipf: float = 0.0  # s > 0: rows centred on Zipf frequencies (j + 1)^-s (rare symbols)
    data_seed: int = 1234  # fixes the synthetic source (its "language") and its validation set
    # ---- optimization
    optimizer: str = "adamw"  # adamw (decoupled weight decay) or sgd (momentum)
    lr: float = 1e-2  # peak learning rate
    min_lr: float = 0.0  # the cosine schedule's final learning rate
    warmup: int = 50  # linear warmup steps
    schedule: str = "cosine"  # after warmup: constant, cosine, inverse_sqrt
    steps: int = 1000  # optimizer steps
    batch_size: int = 16  # B: sequences per step
    weight_decay: float = 0.1  # decoupled (AdamW) or coupled (SGD) decay of matrices and tables
    beta1: float = 0.9  # AdamW's first-moment decay
    beta2: float = 0.95  # AdamW's second-moment decay
    adam_eps: float = 1e-8  # AdamW's eps
    momentum: float = 0.9  # SGD's momentum
    grad_clip: float | None = 1.0  # clip the global gradient norm to this; None: no clipping
    loss_multiplier: float = 1.0  # backward of (loss x this), never undone: a small-gradient probe
    # ---- numerics
    precision: str = "fp32"  # policy: fp32, amp_bf16, amp_fp16, pure_bf16, fp8_hybrid, mxfp8, a .json file, or a JSON object  # noqa: E501
    # ---- evaluation and stopping
    eval_interval: int = 100  # evaluate on the validation batches every this many steps
    eval_batches: int = 8  # fixed validation batches (of batch_size sequences)
    eval_headroom: bool = False  # at each evaluation also record, per block, the residual stream's
    #                              RMS, max |x| and fractions outside each format's range (first
    #                              validation batch; precision.headroom.tensor_stats, no scaling)
    divergence_factor: float = 3.0  # stop when the loss exceeds this times the first step's loss
    update_probe: int = 0  # record the model update ||F(x, W_t) - F(x, W_0)|| on a fixed probe
    #                        batch after each of the first this many steps (0: off; DeepNet)
    probes: tuple[str, ...] = DEFAULT_PROBES  # what each step measures (train.probes): a subset of
    #                         residual_stats, logit_drift, grad_stats, update_stats, update_probe,
    #                         headroom (update_probe > 0 and eval_headroom also switch theirs on)
    seed: int = 0  # seeds the initialization, the training batches and dropout

    def __post_init__(self) -> None:
        if not isinstance(self.model, GPTConfig):
            raise TypeError(f"config: model must be a GPTConfig; got {type(self.model).__name__}")
        ck.choice(self.data, "config: data", DATA)
        if self.data == "file" and not self.data_path:
            raise ValueError("config: data='file' needs data_path (a UTF-8 text file)")
        if self.data != "file" and self.data_path is not None:
            raise ValueError(
                f"config: data_path is read only with data='file'; got data={self.data!r}")
        ck.choice(self.optimizer, "config: optimizer", OPTIMIZERS)
        for name in ("markov_order", "batch_size", "eval_interval", "eval_batches"):
            ck.integer(getattr(self, name), f"config: {name}", lo=1)
        for name in ("data_seed", "seed"):
            ck.integer(getattr(self, name), f"config: {name}", lo=0)
        ck.integer(self.warmup, "config: warmup", lo=0)
        ck.integer(self.update_probe, "config: update_probe", lo=0)
        ck.integer(self.steps, "config: steps", lo=1)
        try:
            check_schedule(self.schedule, self.lr, self.warmup, self.steps, self.min_lr)
        except ValueError as exc:
            raise ValueError(f"config: {exc}") from None
        ck.real(self.markov_alpha, "config: markov_alpha", lo=0, lo_open=True)
        ck.real(self.markov_zipf, "config: markov_zipf", lo=0)
        ck.real(self.weight_decay, "config: weight_decay", lo=0)
        ck.real(self.beta1, "config: beta1", lo=0, hi=1, hi_open=True)
        ck.real(self.beta2, "config: beta2", lo=0, hi=1, hi_open=True)
        ck.real(self.adam_eps, "config: adam_eps", lo=0)
        ck.real(self.loss_multiplier, "config: loss_multiplier", lo=0, lo_open=True)
        ck.real(self.momentum, "config: momentum", lo=0, hi=1, hi_open=True)
        ck.real(self.divergence_factor, "config: divergence_factor", lo=1, lo_open=True)
        ck.flag(self.eval_headroom, "config: eval_headroom")
        if self.grad_clip is not None:
            ck.real(self.grad_clip, "config: grad_clip", lo=0, lo_open=True)
        check_precision(self.precision, self.model)
        self._check_probes()

    def _check_probes(self) -> None:
        probes = self.probes
        if isinstance(probes, str) or not isinstance(probes, (tuple, list)):
            raise TypeError(f"config: probes must be a list of probe names {PROBE_NAMES}; got "
                            f"{probes!r}")
        object.__setattr__(self, "probes", tuple(probes))  # from JSON: a list
        unknown = [p for p in probes if p not in PROBE_NAMES]
        if unknown:
            raise ValueError(f"config: probes must be among {PROBE_NAMES}; got {unknown}")
        if len(set(probes)) != len(probes):
            raise ValueError(f"config: probes names a probe twice: {list(probes)}")
        if "update_probe" in probes and not self.update_probe:
            raise ValueError("config: the update_probe probe needs update_probe = n > 0 (the "
                             "steps it measures)")

    def active_probes(self) -> tuple[str, ...]:
        """The probes the run records: ``probes``, then ``update_probe`` (with update_probe > 0)
        and ``headroom`` (with eval_headroom) where ``probes`` does not name them."""
        extra = (("update_probe",) if self.update_probe else ()) + (
            ("headroom",) if self.eval_headroom else ())
        return self.probes + tuple(p for p in extra if p not in self.probes)

    def with_overrides(self, dotted: Mapping[str, Any]) -> TrainConfig:
        """This config with fields replaced by name, the model's as ``model.x`` (see
        :func:`with_overrides`); the result is checked as any new config is."""
        return with_overrides(self, dotted)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        # The default probes are what every run recorded before probes were named: left out, so a
        # default run's config (and every cache key and results file made from it) is as it was.
        if self.probes == DEFAULT_PROBES:
            del d["probes"]
        else:
            d["probes"] = list(self.probes)  # as JSON reads it back
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """The config from ``to_dict``'s output (its model from ``GPTConfig.from_dict``);
        unknown keys are refused by name."""
        return ck.dataclass_from(cls, d, "config: unknown training fields",
                                 model=GPTConfig.from_dict)


# ---- fields that only some settings read ----------------------------------------------------
class ReadOnlyWith(NamedTuple):
    """A field that the run reads only when ``decider`` has one of ``values``."""

    decider: str  # the field that decides (data, schedule, optimizer)
    values: tuple[str, ...]  # the decider's values under which the field is read
    note: str = ""  # why, where the message says more than "is read only with"


# A command line or a spec that sets one of these where the run would not read it is refused (the
# value would be silently ignored). data_path needs no entry: TrainConfig itself refuses it
# without data='file'.
READ_ONLY_WITH: dict[str, ReadOnlyWith] = {
    "markov_order": ReadOnlyWith("data", ("markov",)),
    "markov_alpha": ReadOnlyWith("data", ("markov",)),
    "data_seed": ReadOnlyWith("data", ("markov", "copy", "reverse")),
    "model.vocab_size": ReadOnlyWith("data", ("markov", "copy", "reverse"),
                                     "the corpus sets the vocabulary (its distinct characters)"),
    "min_lr": ReadOnlyWith("schedule", ("cosine",)),
    "beta1": ReadOnlyWith("optimizer", ("adamw",)),
    "beta2": ReadOnlyWith("optimizer", ("adamw",)),
    "adam_eps": ReadOnlyWith("optimizer", ("adamw",)),
    "momentum": ReadOnlyWith("optimizer", ("sgd",)),
}


def unread_fields(given: Any, deciders: Mapping[str, Any]) -> list[tuple[str, ReadOnlyWith]]:
    """The fields of ``given`` (dotted names) that no run reads: those of :data:`READ_ONLY_WITH`
    whose decider takes none of the values that read them. ``deciders`` maps a decider (``data``)
    to its value, or to the collection of values the runs take (a sweep's grid)."""
    out = []
    for name in given:
        rule = READ_ONLY_WITH.get(name)
        if rule is None:
            continue
        taken = deciders[rule.decider]
        taken = set(taken) if isinstance(taken, (set, frozenset, list, tuple)) else {taken}
        if not taken & set(rule.values):
            out.append((name, rule))
    return out


# ---- dataclass fields, read once for every command line and spec ----------------------------
class FieldInfo(NamedTuple):
    """One field of a config dataclass, as a command line or a spec needs it."""

    name: str  # the field's name
    type: Any  # its type without ``| None`` (int, float, str, bool, tuple[...], a dataclass)
    optional: bool  # None is accepted
    default: Any  # the dataclass's default
    comment: str  # the ``# comment`` on its line in the source ('' when there is none)


def field_infos(cls: type) -> list[FieldInfo]:
    """The fields of a dataclass in order, with their types (``X | None`` split into ``X`` and
    ``optional``), defaults and the comments written after them in the class's source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # pragma: no cover - source not available
        source = ""
    # A trailing noqa directive is lint markup, not part of the comment.
    pattern = re.compile(r"^\s+(\w+):[^#\n]*#\s*(.+?)(?:\s*#\s*noqa\b.*)?$")
    comments = {m.group(1): m.group(2).strip()
                for m in map(pattern.match, source.splitlines()) if m}
    hints = typing.get_type_hints(cls)
    defaults = cls()
    out = []
    for f in fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = type(None) in args and typing.get_origin(hint) is not tuple
        base = next((t for t in args if t is not type(None)), hint) if optional else hint
        out.append(FieldInfo(f.name, base, optional, getattr(defaults, f.name),
                             comments.get(f.name, "")))
    return out


def with_overrides(config: Any, dotted: Mapping[str, Any]) -> Any:
    """``config`` (a dataclass, possibly nested) with fields replaced: ``name`` for its own fields,
    ``outer.inner`` for a nested dataclass's (``model.n_layers``, ``base.model.d_model``). An
    unknown name is refused with a ValueError that lists the known ones (a did-you-mean); the
    values are checked by the dataclasses themselves. ``config`` is not changed."""
    from .._checks import known_keys

    if not isinstance(dotted, Mapping):
        raise TypeError(f"overrides must be a mapping of field names to values; got "
                        f"{type(dotted).__name__}")
    names = [f.name for f in fields(config)]
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in dotted.items():
        head, dot, rest = str(key).partition(".")
        known_keys([head], names, f"field of {type(config).__name__}")
        if dot:
            inner = getattr(config, head)
            if not dataclasses.is_dataclass(inner):
                raise ValueError(f"{head} of {type(config).__name__} has no fields; got {key!r}")
            nested.setdefault(head, {})[rest] = value
        else:
            top[head] = value
    for head, sub in nested.items():
        top[head] = with_overrides(top.get(head, getattr(config, head)), sub)
    return dataclasses.replace(config, **top)


__all__ = ["DATA", "OPTIMIZERS", "READ_ONLY_WITH", "SCHEDULES", "FieldInfo", "ReadOnlyWith",
           "TrainConfig", "default_model", "field_infos", "unread_fields", "with_overrides"]
