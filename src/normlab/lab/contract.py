"""The contract of an experiment: what it says (:class:`Card`), the rows it returns
(:class:`Check`), what the framework makes of them (:class:`Result`, the verdict by one rule:
:data:`VERDICT_RULE`), and what ``measure`` may use besides its config (:class:`RunContext`).

This is the lowest part of the lab that an experiment imports (with ``normlab.lab.stats`` for its
intervals and ``normlab.lab.formatting`` for its numbers); the machinery that configures, caches
and runs experiments (``configs``, ``cache``, ``running``) sits above the experiments, and
``normlab.lab.framework`` gathers all of it for notebooks and scripts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._files import jsonable
from .sweep.executors import check_executor

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
    id: str = ""  # its record's id in the experiment's register (REGISTER): stable, unique

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

    @classmethod
    def by_record(cls, rec: Record, interval: Interval, *, published: str, rule: str,
                  source: str, measured: str) -> Check:
        """A counted row decided by its record's rule: the record's form (superiority or
        non-inferiority), first margin, side and margin's source, under its id and claim."""
        forms = {SUPERIORITY: cls.superiority, NON_INFERIORITY: cls.non_inferiority}
        if rec.form not in forms:
            raise ValueError(f"rec: by_record decides a superiority or non-inferiority record; "
                             f"{rec.id!r} is {rec.form!r}")
        return forms[rec.form](id=rec.id, claim=rec.claim, published=published,
                               interval=interval, side=rec.side, margin=rec.margin[0],
                               measured=measured, rule=rule, source=source,
                               margin_source=rec.margin_source)

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


# ---- the claim register -------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Record:
    """One row an experiment can produce, declared before it is measured: the experiment's
    ``REGISTER`` holds one per row, and each :class:`Check` names its record by ``id``. The
    framework refuses a row whose kind or rule differs from its record's
    (``normlab.lab.register``); a change to a record after a result is an :class:`Amendment`."""

    id: str  # stable within the experiment: lowercase words joined by hyphens
    kind: str  # claim / premise / identity / derivation / shown (KINDS)
    claim: str  # what the row says, in one line
    source: str = ""  # the source's own sentence (quoted), for a claim or a premise
    where: str = ""  # where the source states it: paper, section, figure or table
    form: str = ""  # the rule's form (FORMS); '' for a row not decided from an interval
    margin: tuple[float, ...] = ()  # the threshold (one value) or band (two); () when the rule
    #                                 states a margin per grid point in its text
    side: str = ""  # with one threshold: the side that passes ("above" / "below")
    margin_source: str = ""  # where the margin comes from (the paper, the reference notes)
    grid: tuple[str, ...] = ()  # the config fields whose values the rule ranges over
    seeds: str = ""  # the config field that holds the seed count (or the seeds)
    seeds_from: str = ""  # where that count comes from (a pilot at seeds no verdict uses, ...)
    premise: tuple[str, ...] = ()  # the ids of the premises it needs
    registered: str = ""  # the date it was registered, YYYY-MM-DD
    untested: str = ""  # why the lab does not test this claim of the source (its regime is out
    #                     of reach): listed in the register, produces no row, counts nowhere
    untested_at: tuple[str, ...] = ()  # the sizes at which it is untested (() with a reason:
    #                                    every size)

    def __post_init__(self) -> None:
        if not _RECORD_ID.fullmatch(self.id):
            raise ValueError(f"record id must be lowercase words joined by hyphens; got "
                             f"{self.id!r}")
        if self.kind not in KINDS:
            raise ValueError(f"record {self.id}: kind must be one of {', '.join(KINDS)}, got "
                             f"{self.kind!r}")
        if self.form and self.form not in FORMS:
            raise ValueError(f"record {self.id}: form must be one of {', '.join(FORMS)}, got "
                             f"{self.form!r}")
        object.__setattr__(self, "margin", tuple(float(m) for m in self.margin))
        object.__setattr__(self, "grid", tuple(self.grid))
        object.__setattr__(self, "premise", tuple(self.premise))
        object.__setattr__(self, "untested_at", tuple(self.untested_at))
        if self.untested_at and not self.untested:
            raise ValueError(f"record {self.id}: untested_at needs the reason (untested)")
        if any(s not in SIZES for s in self.untested_at):
            raise ValueError(f"record {self.id}: untested_at must name sizes of {SIZES}")
        if self.side not in ("", "above", "below"):
            raise ValueError(f"record {self.id}: side must be 'above', 'below' or ''")

    @property
    def counted(self) -> bool:
        """A claim of the source: counted in the verdict (where it is tested)."""
        return self.kind == CLAIM

    def tested_at(self, size: str) -> bool:
        """Whether the lab tests it at ``size`` (see ``untested``)."""
        return not self.untested or (bool(self.untested_at) and size not in self.untested_at)

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True, kw_only=True)
class Amendment:
    """A change to a record after a result was committed: what changed, why, and the result
    under the record as it was (which the results files keep). ``before`` holds the record's
    fields as they were (only those that changed, or ``{}`` for a change of set-up that no field
    names); ``results_before`` the committed row under them, by size (``{"status",
    "interval", "measured", "kind"}``; a size with no committed result is left out).
    ``retires`` withdraws the record (its row is no longer produced); ``remeasure`` says the
    change is to what is measured (a grid, a seed count, a set-up), so a result judged under
    the old record cannot be judged again from its interval."""

    id: str  # the record's id
    date: str  # YYYY-MM-DD
    changed: str  # what changed, in words
    why: str  # why
    before: Mapping[str, Any] = field(default_factory=dict)  # the record's fields as they were
    results_before: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    retires: bool = False
    remeasure: bool = False
    commit: str = ""  # where the result before was committed, where known

    def __post_init__(self) -> None:
        if not _DATE.fullmatch(self.date):
            raise ValueError(f"amendment of {self.id}: date must be YYYY-MM-DD; got "
                             f"{self.date!r}")
        unknown = set(self.before) - {f.name for f in dataclasses.fields(Record)}
        if unknown:
            raise ValueError(f"amendment of {self.id}: before names no record field "
                             f"{sorted(unknown)}")
        for size, row in self.results_before.items():
            if size not in SIZES or "status" not in row:
                raise ValueError(f"amendment of {self.id}: results_before[{size!r}] must be a "
                                 f"size's row with a status")

    def to_json(self) -> dict[str, Any]:
        return jsonable(dataclasses.asdict(self))


def committed_row(status: str, interval: list[float] | None, measured: str,
                  kind: str = CLAIM) -> dict[str, Any]:
    """A committed row as an amendment's ``results_before`` holds it: its status, interval,
    measured text and kind, copied from the results file that committed it."""
    return {"status": status, "interval": interval, "measured": measured, "kind": kind}


_RECORD_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


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
    amendments: list[dict[str, Any]] = field(default_factory=list)  # the register's changes
    #                                   after first results, each with its results before

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
        if not d["amendments"]:  # a result of a register never amended writes none
            del d["amendments"]
        d["checks"] = [_check_json(c) for c in self.checks]
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


def _check_json(c: Check) -> dict[str, Any]:
    """A check as a result file holds it: its fields (``id`` only when it has one) and
    ``identity``."""
    d = {**dataclasses.asdict(c), "identity": c.identity}
    if not d["id"]:
        del d["id"]
    return d


# The keys of a result file, in their order (the card's texts among the Result's own fields).
_RESULT_KEYS = ("name", "title", "claim", "citation", "published", "setting", "measured",
                "checks", "explanation", "notes", "data", "config", "size", "wall_s", "figures",
                "cache_key", "verdict_rule", "short", "amendments")


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
