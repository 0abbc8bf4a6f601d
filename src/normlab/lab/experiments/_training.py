"""Shared set-up of the lab's training experiments: a grid of variants x learning rates x seeds
built as ``TrainConfig``s from the experiment's ``base``, run through the sweep API
(``normlab.lab.sweep.run_sweep``) on the run context's executor, and each run's summary numbers
and per-step curves read back.

    runs = run_grid(config.base, {"baseline": {}, "qk-norm": {"model.qk_norm": "layernorm"}},
                    ctx, lrs=[1e-3, 1e-2, 1e-1], seeds=[0],
                    series={"max_logit_0": lambda rec: rec["max_attn_logit"][0]})
    select(runs, qk_norm="layernorm", lr=1e-2)  # the runs whose point has these fields
    final_losses(runs, "qk-norm")            # {lr: mean final validation loss over seeds}
    sensitivity(runs, "qk-norm")             # Wortsman et al.'s LR sensitivity of that variant
    sensitivity_by_seed(runs, "qk-norm")     # {seed: that seed's LR sensitivity} (for intervals)

Where the runs go (a process pool by default, ``pool:N``, ``serial``, or Ray with
``ray:ADDRESS``) and where the sweep's store lives come from the run context (``normlab run`` /
``normlab report``: ``--workers``, ``--ray``): they change where the runs execute, never the
numbers, since every run is seeded. With a store (``normlab run`` and ``report`` put it under
the experiment's output folder) an interrupted experiment keeps its finished runs; without one
the sweep runs in a temporary directory that is removed afterwards. Either way ``measure``
returns plain data.

A run carries its point as data: ``Run.fields`` holds every override that made it under the
override's last name (``model.placement`` -> ``placement``, ``lr``, ``seed``, ``warmup``, ...)
and the coordinates the experiment names itself (``arm="qk-norm"``, ``d=32``: the third element
of a point). Experiments pick runs with :func:`select` / :func:`one` by those fields, never by
reading the variant's name back; the name stays the run's key in the data (``Result.data``
keeps its shape) and is made from the fields by one helper per experiment.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._files import finite
from ...train import TrainConfig
from ..contract import CLAIM, Check, RunContext

Series = Mapping[str, Callable[[dict], float]]  # name -> value from one step's history record
MAX_POINTS = 200  # per-step curves are kept at about this many steps (the last step always)


@dataclass
class Run:
    """One finished (or failed) training run of a grid, as plain data."""

    variant: str  # the variant's name
    lr: float  # peak learning rate
    seed: int  # training seed
    status: str  # done, diverged or failed
    reason: str | None  # why a run stopped early (diverged) or failed
    final_val_loss: float | None  # validation NLL at the end (None: not finite or not reached)
    loss_at_init: float | None  # the first step's training NLL
    entropy_floor: float | None  # the data's best achievable loss, where known
    steps_done: int  # optimizer steps run (skipped ones included)
    skipped_steps: int  # steps the loss scaler skipped
    steps: list[int] = field(default_factory=list)  # the steps the curves are sampled at
    curves: dict[str, list[float | None]] = field(default_factory=dict)  # series name -> values
    peaks: dict[str, float | None] = field(default_factory=dict)  # series -> max over all steps
    evals: list[dict] = field(default_factory=list)  # {"step", "val_loss"}
    cpu_s: float = 0.0  # CPU seconds of the run's worker (not part of the numbers compared)
    fields: dict[str, Any] = field(default_factory=dict)  # the point: see point_fields (not in
    #                                                       the data: the name keys it there)


Point = tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], Mapping[str, Any]]
# (variant name, dotted overrides of base) or (name, overrides, the experiment's own fields)


def point_fields(over: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A point's fields: each dotted override under its last name (``model.n_layers`` ->
    ``n_layers``), and the experiment's ``own`` coordinates (``arm="baseline"``). Two overrides
    with one last name, or an own field that contradicts an override, are refused."""
    out: dict[str, Any] = {}
    for key, value in over.items():
        short = key.rsplit(".", 1)[-1]
        if short in out:
            raise ValueError(f"point overrides {key!r} and another field both end in {short!r}; "
                             f"name the point's fields in its third element instead")
        out[short] = value
    for key, value in (own or {}).items():
        if key in out and out[key] != value:
            raise ValueError(f"point field {key}={value!r} contradicts its override "
                             f"{key}={out[key]!r}")
        out[key] = value
    return out


def select(runs: Sequence[Run], **fields: Any) -> list[Run]:
    """The runs whose point has every one of these field values, in their order:
    ``select(runs, placement="post", n_layers=12, warmup=0)``. A run without a field does not
    match it."""
    missing = object()
    return [r for r in runs if all(r.fields.get(k, missing) == v for k, v in fields.items())]


def one(runs: Sequence[Run], **fields: Any) -> Run:
    """The one run with these field values; an error names the fields when there is none or
    more than one."""
    found = select(runs, **fields)
    if len(found) != 1:
        raise LookupError(f"{len(found)} runs have the fields {fields}; expected exactly one")
    return found[0]


def _sample(n: int, points: int = MAX_POINTS) -> list[int]:
    """About ``points`` indices in [0, n), evenly spaced, the first and last included."""
    if n <= points:
        return list(range(n))
    step = math.ceil(n / points)
    idx = list(range(0, n, step))
    return idx if idx[-1] == n - 1 else idx + [n - 1]


def _value(fn: Callable[[dict], float], rec: dict) -> float | None:
    try:
        v = fn(rec)
    except (KeyError, IndexError, TypeError):  # a skipped or stopping step lacks some metrics
        return None
    return finite(v)  # null, _files' "inf" / "-inf" / "nan" and non-finite floats: None


def run_tasks(fn: Callable[[Any], Any], args: Sequence[Any], ctx: RunContext, *,
              progress: Callable[[int], None] | None = None) -> list[Any]:
    """``[fn(a) for a in args]``, computed on the run context's executor: on the pool's workers,
    as the sweeps' runs are (in this process with ``serial``), in ``args``' order. For an
    experiment's own seeded computations between its sweeps, which would otherwise keep one core
    busy and leave the pool's idle; the numbers do not depend on where they run (one BLAS and
    numba thread in every worker). ``fn``: a module-level function (it travels by reference);
    its arguments and results must pickle. A task that raises raises a RuntimeError here, with
    its traceback; ``progress(done)`` is called as the tasks finish."""
    from ..sweep.executors import make_executor
    from ..sweep.task import call

    out: dict[int, Any] = {}
    jobs = ((i, (fn, a)) for i, a in enumerate(args))
    for i, payload in make_executor(ctx.executor, max(len(args), 1)).imap(call, jobs):
        if payload["status"] != "done":
            raise RuntimeError(f"{getattr(fn, '__name__', fn)}({args[i]!r}) failed: "
                               f"{payload['reason']}\n{payload.get('traceback') or ''}")
        out[i] = payload["value"]
        if progress is not None:
            progress(len(out))
    return [out[i] for i in range(len(args))]


def run_grid(base: TrainConfig, variants: Mapping[str, Mapping[str, Any]], ctx: RunContext, *,
             lrs: Sequence[float] | None = None, seeds: Sequence[int] = (0,),
             series: Series | None = None, name: str = "grid",
             fields: Mapping[str, Mapping[str, Any]] | None = None) -> list[Run]:
    """Train every variant at every learning rate and seed through ``run_sweep``.

    ``variants``: name -> dotted overrides of ``base`` (``TrainConfig.with_overrides``); ``lrs``:
    the peak learning rates (None: the base's, or the variant's own ``lr`` override); ``series``:
    per-step values to keep, sampled at about ``MAX_POINTS`` steps. ``name`` names the sweep's
    store under the context's store root; ``fields``: name -> the variant's own fields beside its
    overrides (:func:`point_fields`). Returns one :class:`Run` per (variant, lr, seed), in that
    order.
    """
    own = fields or {}
    points: list[Point] = [(vname, {**over, "lr": float(lr), "seed": int(seed)},
                            own.get(vname, {}))
                           for vname, over in variants.items()
                           for lr in (lrs if lrs is not None else [over.get("lr", base.lr)])
                           for seed in seeds]
    return run_points(base, points, ctx, series=series, name=name)


def run_points(base: TrainConfig, points: Sequence[Point], ctx: RunContext, *,
               series: Series | None = None, name: str = "grid") -> list[Run]:
    """Train one run per ``(variant name, dotted overrides of base[, own fields])`` through
    ``run_sweep``, in the order given (a pool starts them in that order: put the long runs
    first). Unlike :func:`run_grid`, each point names its own ``lr`` and ``seed`` (the base's
    where it does not), so variants may differ in their seeds or tie a field to the learning
    rate. Returns one :class:`Run` per point, in that order, its ``fields`` the point's
    (:func:`point_fields`, with the run's ``lr`` and ``seed``)."""
    jobs = []
    for vname, over, *own in points:
        cfg = base.with_overrides(dict(over))
        fields = {**point_fields(over, own[0] if own else None),
                  "lr": float(cfg.lr), "seed": int(cfg.seed)}
        jobs.append((vname, fields, cfg))
    from ..sweep import as_points, run_id, run_sweep
    from ..sweep.executors import make_executor

    executor = make_executor(ctx.executor, len(jobs))
    with tempfile.TemporaryDirectory(prefix="normlab-sweep-") as tmp:
        store = Path(tmp) if ctx.store is None else Path(ctx.store) / name
        records = {r.id: r for r in run_sweep(as_points([c for *_, c in jobs]), store,
                                              executor=executor, progress=ctx.progress)}
        return [_read(records[run_id(cfg)], vname, fields, series or {})
                for vname, fields, cfg in jobs]


def _read(rec, variant: str, fields: dict[str, Any], series: Series) -> Run:
    res = rec.result or {}
    run = Run(variant, fields["lr"], fields["seed"], rec.status, rec.reason,
              finite(res.get("final_val_loss")), finite(res.get("loss_at_init")),
              finite(res.get("entropy_floor")), int(res.get("steps_done") or 0),
              int(res.get("skipped_steps") or 0), cpu_s=float(rec.cpu_s or 0.0), fields=fields)
    if rec.finished:
        metrics = rec.metrics()
        history = metrics["history"]
        idx = _sample(len(history))
        run.steps = [history[i]["step"] for i in idx]
        run.curves = {k: [_value(fn, history[i]) for i in idx] for k, fn in series.items()}
        for k, fn in series.items():
            vals = [v for v in (_value(fn, rec) for rec in history) if v is not None]
            run.peaks[k] = max(vals) if vals else None
        run.evals = metrics["evals"]
    return run


# ---- summaries -------------------------------------------------------------------------------
def loss_at_init(runs: Sequence[Run], variant: str) -> float:
    """The variant's loss at initialization: the mean first-step NLL of its finished runs."""
    vals = [r.loss_at_init for r in runs if r.variant == variant and r.loss_at_init is not None]
    if not vals:
        raise ValueError(f"variant {variant!r} has no finished run")
    return sum(vals) / len(vals)


def final_losses(runs: Sequence[Run], variant: str, *, clip: bool = True) -> dict[float, float]:
    """lr -> the variant's final validation loss, mean over seeds. A run that diverged or failed,
    or whose loss is not finite, counts as the loss at init; with ``clip`` every loss is
    min(loss, loss at init), as in the LR sensitivity (and ``normlab sweep --summary``)."""
    loss0 = loss_at_init(runs, variant)
    by_lr: dict[float, list[float]] = {}
    for r in runs:
        if r.variant != variant:
            continue
        v = r.final_val_loss if r.status == "done" and r.final_val_loss is not None else loss0
        by_lr.setdefault(r.lr, []).append(min(v, loss0) if clip else v)
    return {lr: sum(v) / len(v) for lr, v in sorted(by_lr.items())}


def seed_losses(
    runs: Sequence[Run], variant: str, *, clip: bool = True
) -> dict[float, list[float]]:
    """lr -> the variant's final validation loss per seed, in seed order (for intervals and
    paired differences over seeds). A run that diverged or failed, or whose loss is not finite,
    counts as its own loss at init (the variant's when it has none); with ``clip`` every loss is
    min(loss, loss at init)."""
    loss0 = loss_at_init(runs, variant)
    by_lr: dict[float, list[tuple[int, float]]] = {}
    for r in runs:
        if r.variant != variant:
            continue
        own0 = r.loss_at_init if r.loss_at_init is not None else loss0
        v = r.final_val_loss if r.status == "done" and r.final_val_loss is not None else own0
        by_lr.setdefault(r.lr, []).append((r.seed, min(v, own0) if clip else v))
    return {lr: [v for _, v in sorted(vals)] for lr, vals in sorted(by_lr.items())}


def sensitivity(runs: Sequence[Run], variant: str) -> float:
    """Wortsman et al.'s LR sensitivity of a variant over all its learning rates: the mean of
    min(loss, loss at init) minus the best loss (``normlab.lab.sweep.lr_sensitivity``)."""
    from ..sweep import lr_sensitivity

    losses = final_losses(runs, variant)
    return lr_sensitivity(list(losses), list(losses.values()), loss_at_init(runs, variant))


def sensitivity_by_seed(runs: Sequence[Run], variant: str) -> dict[int, float]:
    """seed -> the variant's LR sensitivity over all its learning rates from that seed's runs
    alone (Wortsman et al.'s statistic is one number per sweep: over seeds it is a sample, and
    arms that share seeds pair seed by seed). The loss at init is that seed's mean first-step
    NLL; a diverged or failed run counts as it (``normlab.lab.sweep.lr_sensitivity``)."""
    from ..sweep import lr_sensitivity

    out: dict[int, float] = {}
    for seed in sorted({r.seed for r in runs if r.variant == variant}):
        rs = sorted((r for r in runs if r.variant == variant and r.seed == seed),
                    key=lambda r: r.lr)
        inits = [r.loss_at_init for r in rs if r.loss_at_init is not None]
        if not inits:
            raise ValueError(f"variant {variant!r} seed {seed} has no finished run")
        loss0 = sum(inits) / len(inits)
        losses = [r.final_val_loss if r.status == "done" else None for r in rs]
        out[seed] = lr_sensitivity([r.lr for r in rs], losses, loss0)
    return out


def late_drop(run: Run, fraction: float = 0.5) -> float | None:
    """How far the run's validation loss still fell over its last ``fraction`` of the steps
    (nats): the evaluation at step ``(1 - fraction) x steps_done`` minus the last one. A
    measure of convergence read from one run: a curve that is flat by a margin ends within it
    of where it stood. With a decaying schedule the drop includes the decay's own gain, so a
    small drop is the stricter reading. None where the run has no evaluation at that step or
    did not finish (a diverged run has not converged)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1); got {fraction!r}")
    if run.status != "done" or not run.evals:
        return None
    at = round((1.0 - fraction) * run.steps_done)
    by_step = {int(e["step"]): finite(e.get("val_loss")) for e in run.evals}
    start, end = by_step.get(at), by_step.get(int(run.evals[-1]["step"]))
    return None if start is None or end is None else start - end


def require_finished(runs: Sequence[Run]) -> None:
    """Raise when a run failed (an exception or a lost worker: the machinery, not a result; a
    rerun retries it, reusing the finished runs from the store)."""
    failed = [r for r in runs if r.status == "failed"]
    if failed:
        raise RuntimeError(f"{len(failed)} training run(s) failed; first: {failed[0].variant} "
                           f"lr {failed[0].lr:g} seed {failed[0].seed}: {failed[0].reason}")


def not_run(claim: str, published: str, rule: str, source: str, why: str) -> Check:
    """A source's claim whose arms were not trained because a premise of its experiment did not
    hold (premises first: the premise's runs go first, and the rest only when it holds). The row
    keeps the claim, undecided (the verdict is 'not tested at this size'), with why."""
    return Check(claim=claim, published=published, measured=f"not run: {why}", rule=rule,
                 passed=None, source=source, kind=CLAIM)


def cpu_seconds(runs: Sequence[Run]) -> float:
    """CPU seconds of all the runs' workers together."""
    return sum(r.cpu_s for r in runs)


def as_data(runs: Sequence[Run]) -> list[dict]:
    """The runs as JSON-able dicts (for ``Result.data``), without the CPU times (which vary
    from run to run: the data stays a pure function of the config) and the fields (the
    variant's name keys the run there)."""
    out = []
    for r in runs:
        d = dataclasses.asdict(r)
        d.pop("cpu_s")
        d.pop("fields")
        out.append(d)
    return out
