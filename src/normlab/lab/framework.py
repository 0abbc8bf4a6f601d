"""The lab's framework: an experiment is a card, a measurement and a judgement.

An experiment is a module in ``normlab.lab.experiments`` that reads top to bottom as

* ``CARD``: a :class:`Card` (name, title, citation, claim, published figure, method,
  explanation): the text that does not depend on a measurement;
* ``Config``: a frozen dataclass, a comment per field, with a ``seed`` field; its defaults are the
  ``quick`` size, and ``SIZES = {"tiny": {...}, "quick": {}, "full": {...}}`` holds the overrides
  of each size (dotted names reach into a nested config: ``"base.steps"``); ``tiny`` runs in
  seconds and is what the tests use. A training experiment has one ``base: TrainConfig`` field
  (the model, data and optimizer of every run) plus its grid;
* ``measure(config, ctx) -> dict``: pure and seeded; JSON-able data, nothing written.
  ``ctx`` (:class:`RunContext`) carries the progress callback, the executor and the sweep store;
* ``judge(data, config) -> list[Check]``: the side-by-side rows from the data alone, and
  ``headline(data, config) -> str``: the headline measured numbers;
* ``plot(result, out_dir) -> list[str]``: PNG figures from ``result.data``; their file names;
* ``LANE`` (optional): where ``normlab report`` measures it, :data:`LANES`: ``"pool"`` for an
  experiment whose training runs go to the executor's workers, ``"alone"`` for one that times
  itself (nothing runs beside it), and by default ``"process"`` (it measures in the calling
  process, which a report runs beside the others: :func:`normlab.lab.reporting.lanes`).

Longer notes (known differences, knobs tried) are ``experiments/notes/<module>.md``, embedded in
the report. The framework builds the :class:`Result`: the card's text, the setting written from
the config and the size table, the checks, and the verdict by one stated rule,
:data:`VERDICT_RULE`. Since ``judge`` reads only the data, a cached measurement can be judged
again without rerunning it (:func:`rejudge`, ``normlab report --rejudge``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import inspect
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._files import jsonable, read_json, write_json
from . import codebase, identity
from .formatting import fmt as fmt  # the lab's formatter, imported from here by experiments
from .sweep.executors import check_executor, shared_workers

if TYPE_CHECKING:
    from .stats import Interval

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"

INCONCLUSIVE = "inconclusive"
NOT_TESTED = "not tested at this size"  # a premise of the claim did not hold: nothing judged
HOLDS = "identities hold"  # an experiment of identities only, every one holding
BROKEN = "identity fails"  # an experiment of identities only, one failing (a bug in normlab)
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTED, HOLDS, BROKEN)

# The kinds of row. A *claim* is a statement of the source, counted in the verdict whether the lab
# confirms or disconfirms it; a *premise* is what the claim needs to be testable (the instability
# occurs, the baseline trains at this depth), decided like a claim but counted apart; an
# *identity* or a *derivation* is true by construction (a format constant, an algebraic
# consequence) and shown apart; *shown* is context: a number with no published counterpart.
CLAIM, PREMISE, IDENTITY, DERIVATION, SHOWN = "claim", "premise", "identity", "derivation", "shown"
KINDS = (CLAIM, PREMISE, IDENTITY, DERIVATION, SHOWN)

# The forms of a rule: the claim's own form decides which one a check uses.
SUPERIORITY = "superiority"  # "A beats B": the whole interval of the effect beyond the margin
NON_INFERIORITY = "non-inferiority"  # "A does not cost B": the worse bound within the margin
EQUIVALENCE = "equivalence"  # "A matches B": both bounds inside the margin
MODEL_COMPARISON = "model comparison"  # "grows like f, not g": paired information criteria
THRESHOLD = "threshold"  # a published number's interval against a stated threshold
BAND = "band"  # an interval inside a stated band
FORMS = (SUPERIORITY, NON_INFERIORITY, EQUIVALENCE, MODEL_COMPARISON, THRESHOLD, BAND)

VERDICT_RULE = (
    "premises first: when a premise of the claims (the phenomenon a fix is judged against, a "
    "baseline that trains) fails or is inconclusive, the verdict is 'not tested at this size' "
    "and no claim is judged. Otherwise, over the source's claims: reproduced when every one "
    "passes; not reproduced when none passes and at least one fails; inconclusive when every one "
    "is inconclusive (its 95% interval over seeds straddles the margin); partly reproduced "
    "otherwise (so an inconclusive claim keeps a verdict from 'reproduced'). Identities and "
    "derivations (true by construction) are shown and counted apart: an experiment of identities "
    "only 'holds' when every one does. Rows marked 'shown' (a number with no published "
    "counterpart) are reported but not counted."
)

SIZES = ("tiny", "quick", "full")
LANES = ("process", "pool", "alone")
RESULT_FILE = "result.json"
NOTES_DIR = Path(__file__).with_name("experiments") / "notes"


# ---- what an experiment says, and what it returns ------------------------------------------
class Card(NamedTuple):
    """The text of an experiment that no measurement changes."""

    name: str  # the CLI name, with hyphens
    title: str  # a human title
    citation: str  # the papers (and chapter) the claim comes from
    claim: str  # the headline claim, one or two sentences
    published: str  # the headline published number or figure, as text
    method: str  # what is measured and how (the sizes come from the config, never from here)
    explanation: str = ""  # a short paragraph for the report
    short: str = ""  # the claim in a few words, for the README's table ('' : the claim)
    notebooks: tuple[str, ...] = ()  # the companion notebooks (notebooks/) that teach it


@dataclass(kw_only=True)
class Check:
    """One row of the side-by-side table: a claim, the paper's number, ours, and the rule.

    ``kind`` says what the row is (:data:`KINDS`): a source's claim, a premise, an identity or a
    derivation, or shown context. A check on a random or training quantity is decided from an
    interval over seeds (:mod:`normlab.lab.stats`): ``interval`` holds it, ``threshold`` the
    margin or band it was compared with (the forest plot draws both), ``form`` the rule's form
    (:data:`FORMS`), and ``inconclusive`` says it straddled the margin (``passed`` is then None).
    Build a decided row with :meth:`superiority`, :meth:`non_inferiority`, :meth:`equivalence`,
    :meth:`decided` (a threshold) or :meth:`band`; pass ``kind=PREMISE`` for a premise."""

    claim: str  # what is claimed, in one line
    published: str  # the paper's number or figure, as text ("-" when the paper gives none)
    measured: str  # our number(s), as text (with the interval the rule read)
    rule: str  # the pass rule, stated in terms of the numbers
    passed: bool | None  # True / False; None = shown but not counted, or inconclusive
    source: str = ""  # citation and provenance tag, e.g. "Xiong et al. 2020, Lemma 2 [V]"
    note: str = ""  # a known difference from the paper, or what the number means
    interval: list[float] | None = None  # [lo, hi] over seeds, when the rule read one
    inconclusive: bool = False  # the interval straddles the threshold
    kind: str = CLAIM  # claim / premise / identity / derivation / shown (KINDS)
    form: str = ""  # the rule's form (FORMS), '' for a row not decided from an interval
    threshold: list[float] | None = None  # the margin (one value) or band (two) compared with
    margin_source: str = ""  # where the margin comes from (the paper, the reference notes)
    estimate: float | None = None  # the interval's centre, for the forest plot
    side: str = ""  # with one threshold: the side that passes ("above" / "below"), else ''

    def __post_init__(self) -> None:
        if self.inconclusive and self.passed is not None:
            raise ValueError("an inconclusive check has passed=None")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.form and self.form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}, got {self.form!r}")
        if self.kind == SHOWN and (self.passed is not None or self.inconclusive):
            raise ValueError("a 'shown' row is not decided: passed=None, inconclusive=False")

    @property
    def identity(self) -> bool:
        """True by construction (an identity or a derivation): counted apart from the claims."""
        return self.kind in (IDENTITY, DERIVATION)

    @property
    def premise(self) -> bool:
        return self.kind == PREMISE

    @classmethod
    def _from_interval(cls, decision: bool | None, interval: Interval, threshold: list[float],
                       form: str, rule: str, measured: str, digits: int, **kw: Any) -> Check:
        return cls(measured=measured or interval.text(digits), rule=rule, passed=decision,
                   interval=[interval.lo, interval.hi], inconclusive=decision is None,
                   threshold=threshold, form=form, estimate=interval.mean, **kw)

    @classmethod
    def decided(cls, *, claim: str, published: str, interval: Interval, threshold: float,
                side: str, rule: str = "", measured: str = "", digits: int = 3,
                form: str = THRESHOLD, **kw: Any) -> Check:
        """A check decided by ``stats.decide(interval, threshold, side)``: pass when the whole
        interval is beyond the threshold, FAIL when it is wholly short, inconclusive otherwise.
        ``measured`` defaults to the interval's text, ``rule`` to the comparison."""
        from .stats import decide

        word = ">" if side == "above" else "<"
        return cls._from_interval(decide(interval, threshold, side), interval, [threshold], form,
                                  rule or f"{interval.method} interval {word} {threshold:g}",
                                  measured, digits, claim=claim, published=published,
                                  side=side, **kw)

    @classmethod
    def superiority(cls, *, claim: str, published: str, interval: Interval, side: str,
                    margin: float = 0.0, rule: str = "", measured: str = "", digits: int = 3,
                    **kw: Any) -> Check:
        """"A beats B": ``interval`` is of the effect (A - B, or a ratio's log), ``side`` the
        direction that is better ("above": larger is better). Pass when the whole interval is
        beyond ``margin`` on that side, FAIL when it is wholly on the other, else inconclusive."""
        word = ">" if side == "above" else "<"
        return cls.decided(claim=claim, published=published, interval=interval,
                           threshold=margin, side=side, form=SUPERIORITY, digits=digits,
                           rule=rule or (f"superiority: {interval.method} interval of the effect "
                                         f"{word} {margin:g}"), measured=measured, **kw)

    @classmethod
    def non_inferiority(cls, *, claim: str, published: str, interval: Interval, side: str,
                        margin: float, rule: str = "", measured: str = "", digits: int = 3,
                        **kw: Any) -> Check:
        """"A does not cost B": ``interval`` is of A - B, ``side`` the direction that is better
        ("below" for a loss). A is non-inferior when the worse bound stays within ``margin`` > 0
        of no difference (hi < +margin for "below", lo > -margin for "above"); FAIL when the
        whole interval is past the margin; inconclusive when it straddles it."""
        if not margin > 0:
            raise ValueError(f"margin: a non-inferiority margin is > 0, got {margin}")
        t = margin if side == "below" else -margin
        word = "<" if side == "below" else ">"
        return cls.decided(claim=claim, published=published, interval=interval, threshold=t,
                           side=side, form=NON_INFERIORITY, digits=digits,
                           rule=rule or (f"non-inferiority: {interval.method} interval of the "
                                         f"difference {word} {t:g} (margin {margin:g})"),
                           measured=measured, **kw)

    @classmethod
    def equivalence(cls, *, claim: str, published: str, interval: Interval, margin: float,
                    centre: float = 0.0, rule: str = "", measured: str = "", digits: int = 3,
                    **kw: Any) -> Check:
        """"A matches B": pass when the whole interval of the difference lies inside
        centre +- ``margin``, FAIL when it lies wholly outside, inconclusive when it crosses."""
        if not margin > 0:
            raise ValueError(f"margin: an equivalence margin is > 0, got {margin}")
        lo, hi = centre - margin, centre + margin
        return cls.band(claim=claim, published=published, interval=interval, lo=lo, hi=hi,
                        form=EQUIVALENCE, digits=digits,
                        rule=rule or (f"equivalence: {interval.method} interval inside "
                                      f"[{lo:g}, {hi:g}]"), measured=measured, **kw)

    @classmethod
    def band(cls, *, claim: str, published: str, interval: Interval, lo: float, hi: float,
             rule: str = "", measured: str = "", digits: int = 3, form: str = BAND,
             **kw: Any) -> Check:
        """A check decided by ``stats.within(interval, lo, hi)``: pass when the whole interval
        lies in [lo, hi], FAIL when it is wholly outside, inconclusive when it crosses an edge."""
        from .stats import within

        return cls._from_interval(within(interval, lo, hi), interval, [lo, hi], form,
                                  rule or f"{interval.method} interval inside [{lo:g}, {hi:g}]",
                                  measured, digits, claim=claim, published=published, **kw)

    @property
    def counted(self) -> bool:
        """A source's claim that is counted in the verdict (decided or inconclusive)."""
        return self.kind == CLAIM and (self.passed is not None or self.inconclusive)

    @property
    def status(self) -> str:
        if self.inconclusive:
            return INCONCLUSIVE
        if self.passed is None:
            return "shown"
        if self.identity:
            return "holds" if self.passed else "FAIL"
        return "pass" if self.passed else "FAIL"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Check:
        """A check from a result file (files before the kinds hold ``identity: bool``)."""
        d = dict(d)
        if "identity" in d:
            identity = d.pop("identity")
            d.setdefault("kind", IDENTITY if identity else CLAIM)
        return cls(**d)


def verdict_of(checks: list[Check]) -> str:
    """The verdict by :data:`VERDICT_RULE`."""
    if any(c.premise and c.passed is not True for c in checks):
        return NOT_TESTED
    counted = [c.passed for c in checks if c.counted]
    if not counted:
        identities = [c.passed for c in checks if c.identity and c.passed is not None]
        if not identities:
            raise ValueError("a Result needs at least one counted empirical check (passed True "
                             "or False, or inconclusive) or one identity")
        return HOLDS if all(identities) else BROKEN
    if all(p is True for p in counted):
        return REPRODUCED
    if all(p is None for p in counted):
        return INCONCLUSIVE
    if not any(p is True for p in counted):
        return NOT_REPRODUCED
    return PARTLY


@dataclass
class Result:
    """What the framework makes of a measurement: the experiment's card, the setting, the
    checks, the data behind the plots. The card's texts read through it (``result.title``,
    ``result.claim``, ...); ``to_json`` writes them at the top level, as result files hold them."""

    card: Card  # the experiment's text: name, title, claim, citation, published, ...
    setting: str  # our setting: the method, then the configuration's values
    measured: str  # the headline measured numbers, as text
    checks: list[Check]  # the side-by-side rows; the verdict is computed from them
    notes: str = ""  # the experiment's notes (markdown): known differences, knobs tried
    data: dict[str, Any] = field(default_factory=dict)  # what measure() returned (JSON-able)
    config: dict[str, Any] = field(default_factory=dict)  # the configuration, as JSON
    size: str = ""  # tiny / quick / full
    wall_s: float = 0.0  # seconds measure() took
    figures: list[str] = field(default_factory=list)  # PNG file names next to result.json
    cache_key: str = ""  # the hash of the configuration and the source (see cache_key)
    verdict_rule: str = VERDICT_RULE

    @property
    def name(self) -> str:  # the experiment's CLI name
        return self.card.name

    @property
    def title(self) -> str:
        return self.card.title

    @property
    def claim(self) -> str:
        return self.card.claim

    @property
    def citation(self) -> str:
        return self.card.citation

    @property
    def published(self) -> str:
        return self.card.published

    @property
    def explanation(self) -> str:
        return self.card.explanation

    @property
    def short(self) -> str:
        return self.card.short

    @property
    def verdict(self) -> str:
        return verdict_of(self.checks)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in _RESULT_KEYS}
        d["checks"] = [{**dataclasses.asdict(c), "identity": c.identity} for c in self.checks]
        d["verdict"] = self.verdict
        return jsonable(d)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        """A Result from ``to_json``'s form (its card from the file's texts: a file holds the
        setting, not the method on its own, nor the notebooks)."""
        d = dict(d)
        d.pop("verdict", None)
        d["checks"] = [Check.from_json(c) for c in d.get("checks", [])]
        if isinstance(d.get("notes"), list):  # written before the notes became markdown
            d["notes"] = "\n".join(f"- {n}" for n in d["notes"])
        card = Card(name=d.get("name", ""), title=d.get("title", ""),
                    citation=d.get("citation", ""), claim=d.get("claim", ""),
                    published=d.get("published", ""), method="",
                    explanation=d.get("explanation", ""), short=d.get("short", ""))
        names = {f.name for f in dataclasses.fields(cls)} - {"card"}
        return cls(card=card, **{k: v for k, v in d.items() if k in names})


# The keys of a result file, in their order (the card's texts among the Result's own fields).
_RESULT_KEYS = ("name", "title", "claim", "citation", "published", "setting", "measured",
                "checks", "explanation", "notes", "data", "config", "size", "wall_s", "figures",
                "cache_key", "verdict_rule", "short")


# ---- the run context -----------------------------------------------------------------------
class Progress(Protocol):
    def __call__(self, done: float, total: float, note: str = "") -> None: ...


def null_progress(done: float, total: float, note: str = "") -> None:
    """A progress callback that does nothing."""


@dataclass(frozen=True)
class RunContext:
    """What ``measure`` may use besides its config. None of it is part of the result or the
    cache key: every run is seeded, and each executor gives the same numbers."""

    progress: Progress = null_progress  # called as progress(done, total, note)
    executor: str = "pool"  # where training runs execute (sweep.executors.make_executor)
    store: Path | None = None  # root of the experiment's sweep stores (finished runs are reused
    #                            by a rerun); None: a temporary directory, removed afterwards

    def __post_init__(self) -> None:
        check_executor(self.executor)


# ---- the registry and configurations -------------------------------------------------------
def registry() -> dict[str, str]:
    """CLI name -> module path, in the report's order."""
    from .experiments import EXPERIMENTS

    return dict(EXPERIMENTS)


def load(name: str) -> ModuleType:
    """The experiment module for a CLI name (hyphens) or module name (underscores)."""
    reg = registry()
    key = str(name).replace("_", "-")
    if key not in reg:
        raise KeyError(f"no experiment named {name!r}; the lab has: {', '.join(reg)}")
    return importlib.import_module(reg[key])


def configure(module: ModuleType, size: str = "quick", seed: int | None = None,
              overrides: dict[str, Any] | None = None) -> Any:
    """The module's Config at a size (``tiny``, ``quick``, ``full``), with a seed and
    ``overrides`` (field names; dotted names reach into a nested config)."""
    from .._checks import choice, integer
    from ..train.config import with_overrides

    choice(size, "size", SIZES)
    values = dict(module.SIZES.get(size, {}))
    if seed is not None:
        values["seed"] = integer(seed, "seed", lo=0)
    values.update(overrides or {})
    config = with_overrides(module.Config(), values)
    check_fields(config, module.Config())
    check_config(module, config)
    return config


def check_config(module: ModuleType, config: Any, *, budget: bool = True) -> None:
    """The one validation hook, run by the framework before ``measure`` (and before a cached
    result is judged again): the experiment's cross-field rules (its optional
    ``validate(config)``, raising a ValueError or TypeError that names the field), then, with
    ``budget`` (not for a result judged again: that measures nothing), the memory budget
    (:func:`check_budget`). A refusal reaches the command line like any field's."""
    validate = getattr(module, "validate", None)
    if validate is not None:
        validate(config)
    if budget:
        check_budget(module, config)


def check_budget(module: ModuleType, config: Any, *, available: int | None = None) -> None:
    """Refuse, before anything is allocated, a configuration that cannot fit the machine's memory
    (``normlab.train.budget.available_memory``; ``available`` bytes when given): the experiment's
    optional ``memory(config) -> {field: bytes}`` (an upper estimate of what each size field
    allocates at the peak) and every training recipe it holds (a ``TrainConfig`` field, by
    ``budget.check_memory``). The MemoryBudgetError names the field to lower."""
    from ..train import TrainConfig
    from ..train.budget import (
        MemoryBudgetError,
        available_memory,
        check_memory,
        format_bytes,
    )

    limit = available_memory() if available is None else available
    memory = getattr(module, "memory", None)
    if memory is not None and limit is not None:
        parts = {k: float(v) for k, v in memory(config).items()}
        total = sum(parts.values())
        if total > limit:
            field = max(parts, key=parts.__getitem__)
            raise MemoryBudgetError(
                f"{field} {getattr(config, field)}: the measurement needs about "
                f"{format_bytes(total)} of memory, more than the {format_bytes(limit)} "
                f"available; lower {field}", field=field)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, TrainConfig):
            def flag(name: str, at: str = f.name) -> str:
                return f"{at}.{name}"

            check_memory(value, available=limit, flag=flag)


def check_fields(config: Any, defaults: Any) -> None:
    """The lab's rule for an experiment's own fields, checked before anything runs: a value of
    its default's kind (an integer where the default is one, a real number, text, a non-empty
    tuple of such), finite, and positive where the default is (sizes, counts, scales, rates;
    zero allowed where the default is zero). Nested configs check themselves (TrainConfig)."""
    for f in dataclasses.fields(config):
        value, default = getattr(config, f.name), getattr(defaults, f.name)
        if default is None or dataclasses.is_dataclass(default):
            continue
        if isinstance(default, tuple):
            if not isinstance(value, tuple) or not value:
                raise TypeError(f"{f.name} must be a non-empty tuple like {default!r}; "
                                f"got {value!r}")
            for v in value:
                _check_like(v, default[0], f.name)
        else:
            _check_like(value, default, f.name)


def _check_like(value: Any, default: Any, name: str) -> None:
    from .._checks import flag, integer, real

    if isinstance(default, bool):
        flag(value, name)
    elif isinstance(default, int):
        integer(value, name, lo=1 if default >= 1 else 0)
    elif isinstance(default, float):
        real(value, name, lo=0, lo_open=default > 0)
    elif isinstance(default, tuple):  # a tuple of tuples: (rows, width) shapes
        if not isinstance(value, tuple) or len(value) != len(default):
            raise TypeError(f"{name} must hold tuples like {default!r}; got {value!r}")
        for v, d in zip(value, default):
            _check_like(v, d, name)
    elif isinstance(default, str) and (not isinstance(value, str) or not value.strip()):
        raise TypeError(f"{name} must be a non-empty string; got {value!r}")


def config_from_json(cls: type, d: dict[str, Any]) -> Any:
    """A Config rebuilt from its JSON form (``Result.config``): lists back to tuples, nested
    dicts back to their dataclasses."""
    from ..train.config import field_infos

    values = {}
    for info in field_infos(cls):
        v = d[info.name]
        if dataclasses.is_dataclass(info.type) and isinstance(v, dict):
            sub: Any = info.type  # a dataclass type (is_dataclass also admits an instance)
            v = sub.from_dict(v) if hasattr(sub, "from_dict") else config_from_json(sub, v)
        values[info.name] = _tuples(v)
    return cls(**values)


def _tuples(v: Any) -> Any:
    """JSON's lists back to the config's tuples, nested ones too."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def setting_of(module: ModuleType, config: Any, size: str) -> str:
    """Our setting, written from the config (never by hand): the card's method, then every
    field, the nested configs' fields that differ from their defaults."""
    return f"{module.CARD.method} {size} size: {_fields_text(config)}."


def _fields_text(config: Any, prefix: str = "") -> str:
    parts = []
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v):
            kind: Any = type(v)  # a config dataclass, its defaults as its constructor's
            inner = _changed_text(v, kind(), f"{prefix}{f.name}.")
            parts.append(inner)
        else:
            parts.append(f"{prefix}{f.name}={_value_text(v)}")
    return ", ".join(p for p in parts if p)


def _changed_text(config: Any, default: Any, prefix: str) -> str:
    parts = []
    for f in dataclasses.fields(config):
        v, d = getattr(config, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(v):
            parts.append(_changed_text(v, d, f"{prefix}{f.name}."))
        elif v != d:
            parts.append(f"{prefix}{f.name}={_value_text(v)}")
    return ", ".join(p for p in parts if p)


def _value_text(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_value_text(x) for x in v) + ")"
    return fmt(v, spec="g") if isinstance(v, float) else str(v)  # a setting as it was typed


def notes_of(module: ModuleType) -> str:
    """The experiment's notes (``experiments/notes/<module>.md``), '' when it has none."""
    path = NOTES_DIR / (module.__name__.rsplit(".", 1)[-1] + ".md")
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def config_dict(config: Any) -> dict[str, Any]:
    """An experiment's configuration as JSON-able data: each field that is itself a dataclass
    through its own ``to_dict`` where it has one (a ``TrainConfig`` base writes what it writes
    everywhere else), else field by field."""
    out = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            v = v.to_dict() if hasattr(v, "to_dict") else config_dict(v)
        out[f.name] = v
    return jsonable(dataclasses.asdict(config) | out)


def cache_key(module: ModuleType, config: Any) -> str:
    """A hash of the configuration, the experiment's source and notes (as text: the card's
    words are in the result), and the code of the whole normlab package (:func:`package_hash`):
    a change to what any of it computes measures the experiment again; an edit to prose
    outside the experiment does not."""
    h = hashlib.sha256()
    h.update(json.dumps(config_dict(config), sort_keys=True).encode())
    h.update(inspect.getsource(module).encode())
    h.update(notes_of(module).encode())
    h.update(package_hash().encode())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def package_hash() -> str:
    """A hash of every module of the installed normlab package as it computes (each module's
    syntax tree without docstrings or comments: :func:`normlab.lab.codebase.code_hash`)."""
    return codebase.code_hash(codebase.modules())


def training_hash() -> str:
    """The key of an experiment's sweep store: :func:`normlab.lab.identity.training_hash`, the
    code a training run executes."""
    return identity.training_hash()


# ---- measuring, judging, caching -----------------------------------------------------------
def result_of(module: ModuleType, config: Any, data: dict[str, Any], size: str) -> Result:
    """The Result of a measurement: the card, the setting, the judgement of ``data`` (in its JSON
    form, so that a fresh and a cached measurement are judged alike)."""
    card = module.CARD
    data = jsonable(data)
    return Result(
        card=card, setting=setting_of(module, config, size),
        measured=module.headline(data, config), checks=list(module.judge(data, config)),
        notes=notes_of(module), data=data, config=config_dict(config), size=size,
        cache_key=cache_key(module, config))


def evaluate(module: ModuleType, config: Any, ctx: RunContext | None = None,
             size: str = "quick") -> Result:
    """Measure and judge one configuration in memory (no files, no cache): the Result that
    ``normlab run`` would write, for notebooks and scripts. ``config`` from :func:`configure`."""
    data = module.measure(config, RunContext() if ctx is None else ctx)
    return result_of(module, config, data, size)


@dataclass
class Outcome:
    result: Result
    reused: bool  # True when a finished result was read from the cache
    out_dir: Path | None


def read_cached(exp_dir: Path, key: str | None) -> Result | None:
    """The result in ``exp_dir`` (None when missing, damaged, or of another cache key; any key
    when ``key`` is None)."""
    path = exp_dir / RESULT_FILE
    if not path.is_file():
        return None
    try:
        result = Result.from_json(read_json(path, what="cached result"))
    except (ValueError, TypeError, KeyError):
        return None
    return result if key is None or result.cache_key == key else None


def _write(result: Result, module: ModuleType, exp_dir: Path, plots: bool) -> None:
    exp_dir.mkdir(parents=True, exist_ok=True)
    if plots:
        result.figures = list(module.plot(result, exp_dir))
    write_json(exp_dir / RESULT_FILE, result.to_json(), what="result")


def run_experiment(name: str, *, size: str = "quick", seed: int | None = None,
                   overrides: dict[str, Any] | None = None,
                   out_dir: str | Path | None = None,
                   progress: Progress = null_progress, use_cache: bool = True,
                   plots: bool = True, executor: str = "pool") -> Outcome:
    """Measure one experiment (or reuse its cached result) and write ``result.json`` and figures.

    With ``out_dir``, the files go to ``out_dir/<name>/``; a finished result there with the same
    configuration and source is reused, so an interrupted report resumes where it stopped. The
    context's store is ``out_dir/<name>/sweep/<training hash>/`` (:func:`training_hash`), so an
    interrupted training experiment keeps its finished runs, and so does one whose measuring or
    judging code changed since (stores of other training code, and with ``use_cache=False``
    this one, are removed first).
    """
    check_executor(executor)
    module = load(name)
    config = configure(module, size, seed, overrides)
    key = cache_key(module, config)
    exp_dir = None if out_dir is None else Path(out_dir) / module.CARD.name
    if exp_dir is not None and use_cache:
        cached = read_cached(exp_dir, key)
        if cached is not None:
            if plots and not all((exp_dir / f).is_file() for f in cached.figures):
                _write(cached, module, exp_dir, plots)  # a missing figure is redrawn
            return Outcome(cached, True, exp_dir)
    store = None
    if exp_dir is not None:
        store = exp_dir / "sweep" / training_hash()
        if use_cache and store.parent.is_dir():  # a store of the same code under its old key
            identity.adopt_legacy_store(store)
        if store.parent.is_dir():  # stale stores: other training code, or no cache wanted
            for old in store.parent.iterdir():
                if old.is_dir() and (old != store or not use_cache):
                    shutil.rmtree(old)
    t0 = time.perf_counter()
    with shared_workers():  # an experiment's sweeps share one set of pool workers
        data = module.measure(config, RunContext(progress, executor, store))
    wall = time.perf_counter() - t0
    result = result_of(module, config, data, size)
    result.wall_s = wall
    if exp_dir is not None:
        _write(result, module, exp_dir, plots)
    return Outcome(result, False, exp_dir)


class DamagedResult(ValueError):
    """A cached result that cannot be judged again: not a result, a config its experiment's own
    checks refuse, or data its ``judge`` cannot read. The message names the file."""


def judge_cached(name: str, out_dir: str | Path) -> Result:
    """The cached measurement in ``out_dir/<name>/`` judged again in memory (nothing written),
    after validating it: its config through the experiment's own checks (:func:`check_fields`,
    :func:`check_config` without the budget), its data by the experiment's ``judge`` and
    ``headline`` reading it. FileNotFoundError when there is no ``result.json``; DamagedResult,
    naming the file, when one cannot be judged."""
    module = load(name)
    path = Path(out_dir) / module.CARD.name / RESULT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no cached result to judge again in {path.parent}")
    try:
        cached = Result.from_json(read_json(path, what="cached result"))
    except (ValueError, TypeError, KeyError) as exc:
        raise DamagedResult(f"{path}: not a readable result ({exc})") from None
    try:
        config = config_from_json(module.Config, cached.config)
        check_fields(config, module.Config())
        check_config(module, config, budget=False)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DamagedResult(f"{path}: its config is refused by {name}'s checks "
                            f"({type(exc).__name__}: {exc})") from None
    try:
        result = result_of(module, config, cached.data, cached.size)
    except Exception as exc:  # any failure to read the data: the schema is not the judge's
        raise DamagedResult(f"{path}: its data does not have {name}'s schema "
                            f"({type(exc).__name__}: {exc})") from None
    result.wall_s, result.figures = cached.wall_s, cached.figures
    return result


def rejudge(name: str, out_dir: str | Path) -> Outcome:
    """Judge the measurement cached in ``out_dir/<name>/`` again with the experiment's current
    ``judge`` and card, without measuring anything; rewrites ``result.json`` (figures kept).
    Raises FileNotFoundError when there is no cached result, DamagedResult (nothing written)
    when it cannot be judged (:func:`judge_cached`)."""
    result = judge_cached(name, out_dir)
    exp_dir = Path(out_dir) / load(name).CARD.name
    write_json(exp_dir / RESULT_FILE, result.to_json(), what="result")
    return Outcome(result, True, exp_dir)
