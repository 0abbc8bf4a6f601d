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

from .cache import RESULT_FILE, cache_key, package_hash, read_cached, training_hash
from .configs import (
    NOTES_DIR,
    check_budget,
    check_config,
    check_fields,
    config_dict,
    config_from_json,
    configure,
    notes_of,
    setting_of,
)
from .contract import (
    BAND,
    BROKEN,
    CLAIM,
    DERIVATION,
    EQUIVALENCE,
    FORMS,
    HOLDS,
    IDENTITY,
    INCONCLUSIVE,
    KINDS,
    LANES,
    MODEL_COMPARISON,
    NON_INFERIORITY,
    NOT_REPRODUCED,
    NOT_TESTED,
    PARTLY,
    PREMISE,
    REPRODUCED,
    SHOWN,
    SIZES,
    SUPERIORITY,
    THRESHOLD,
    VERDICT_RULE,
    VERDICTS,
    Card,
    Check,
    Progress,
    Result,
    RunContext,
    null_progress,
    verdict_of,
)
from .formatting import fmt as fmt  # the lab's formatter, imported from here by experiments
from .running import (
    DamagedResult,
    Outcome,
    evaluate,
    judge_cached,
    load,
    registry,
    rejudge,
    result_of,
    run_experiment,
)

__all__ = [
    "BAND", "BROKEN", "CLAIM", "DERIVATION", "EQUIVALENCE", "FORMS", "HOLDS", "IDENTITY",
    "INCONCLUSIVE", "KINDS", "LANES", "MODEL_COMPARISON", "NON_INFERIORITY", "NOTES_DIR",
    "NOT_REPRODUCED", "NOT_TESTED", "PARTLY", "PREMISE", "REPRODUCED", "RESULT_FILE", "SHOWN",
    "SIZES", "SUPERIORITY", "THRESHOLD", "VERDICTS", "VERDICT_RULE", "Card", "Check",
    "DamagedResult", "Outcome", "Progress", "Result", "RunContext", "cache_key", "check_budget",
    "check_config", "check_fields", "config_dict", "config_from_json", "configure", "evaluate",
    "fmt", "judge_cached", "load", "notes_of", "null_progress", "package_hash", "read_cached",
    "registry", "rejudge", "result_of", "run_experiment", "setting_of", "training_hash",
    "verdict_of",
]
