"""What a sweep found: the final loss against the learning rate per variant, and the learning-rate
sensitivity of Wortsman et al. (2023, §2.2).

A *variant* is one combination of the fields that vary across the runs, other than the learning
rate (the x axis) and the seed (repeats, averaged). For each variant and learning rate the
summary holds the final validation loss (mean over seeds), and for each variant

    LR sensitivity = mean over lr in [a, b] of min(loss(lr), loss_0)  -  loss*

where loss_0 is the loss at initialization (the mean first-step training NLL of the variant's
runs; ln V where no run has one) and loss* the best final loss over the variant's whole LR grid.
A run that diverged, or whose final loss is not finite, counts as loss_0: the metric is bounded,
and a wide range of learning rates that train well gives a small number. Wortsman et al. use the
grid {3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1} with [a, b] its whole span; the default range
here is every learning rate the variant ran. Read it beside the loss-vs-LR curve: it does not
depend on the loss's scale, and means nothing across interventions that change what the LR means.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..._files import finite, jsonable
from ..formatting import fmt
from .spec import FIELDS, short_name
from .store import DIVERGED, DONE, FAILED, PENDING, RunRecord, check_result


def lr_sensitivity(lrs: Sequence[float], losses: Sequence[float | None], loss_at_init: float,
                   lr_range: tuple[float, float] | None = None) -> float:
    """Wortsman et al.'s LR sensitivity: mean over ``lrs`` in ``lr_range`` of
    ``min(loss, loss_at_init)`` minus the best loss over all ``lrs``.

    ``lrs``, ``losses``: one final loss per learning rate (shape (N,)); ``None`` or a non-finite
    loss (a diverged run) counts as ``loss_at_init``. ``lr_range``: ``(a, b)``, inclusive; default
    every lr. Returns NaN when no loss is finite (no learning rate trained: undefined).
    """
    if len(lrs) != len(losses) or not len(lrs):
        raise ValueError(f"lrs and losses must be non-empty and of one length; got {len(lrs)} and "
                         f"{len(losses)}")
    if not (isinstance(loss_at_init, (int, float)) and math.isfinite(loss_at_init)):
        raise ValueError(f"loss_at_init must be a finite number; got {loss_at_init!r}")
    finite = [float(v) for v in losses if v is not None and math.isfinite(v)]
    if not finite:
        return math.nan
    best = min(finite)
    lo, hi = (min(lrs), max(lrs)) if lr_range is None else lr_range
    if not lo <= hi:
        raise ValueError(f"lr_range must be (a, b) with a <= b; got {lr_range!r}")
    clipped = [min(float(v), loss_at_init) if v is not None and math.isfinite(v) else loss_at_init
               for lr, v in zip(lrs, losses) if lo <= lr <= hi]
    if not clipped:
        raise ValueError(f"no learning rate of {sorted(lrs)} lies in lr_range {lr_range!r}")
    return sum(clipped) / len(clipped) - best


@dataclass
class Cell:
    """One variant at one learning rate: its runs and their final loss."""

    variant: str  # "placement=pre, norm=rmsnorm" ("all" when nothing else varies)
    x: float  # the learning rate (or the summary's x field)
    runs: int  # points (seeds) in the sweep
    done: int
    diverged: int
    failed: int
    pending: int  # not run yet, or interrupted
    loss: float | None  # mean final validation loss over finished seeds, min(loss, loss_0) each
    loss_sd: float | None  # its standard deviation over seeds (None for one seed)
    loss_at_init: float | None  # mean first-step training NLL of the finished seeds
    entropy_floor: float | None  # the data's floor, where it has one


@dataclass
class Sensitivity:
    variant: str
    value: float  # the LR sensitivity (NaN: no learning rate trained)
    loss_at_init: float  # loss_0
    best_loss: float | None  # loss*
    best_x: float | None  # the learning rate of loss*
    xs: list[float]  # the learning rates averaged over


@dataclass
class SweepSummary:
    """The table and the figures' data of a sweep (see :func:`summarize`)."""

    x: str  # the field on the x axis (lr)
    variant_fields: list[str]  # the other fields that vary (seeds excluded)
    cells: list[Cell]
    sensitivity: list[Sensitivity]
    counts: dict[str, int] = field(default_factory=dict)  # status -> runs

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready by ``_files``' one convention: a non-finite number (an LR sensitivity
        where no learning rate trained) is the string ``"nan"`` / ``"inf"`` / ``"-inf"``."""
        return jsonable(asdict(self))


def summarize(records: Iterable[RunRecord], *, x: str = "lr",
              lr_range: tuple[float, float] | None = None) -> SweepSummary:
    """Group the runs by variant and ``x`` (default the learning rate), average over seeds, and
    compute each variant's LR sensitivity over ``lr_range`` (default: all its learning rates).
    Failed and pending runs are counted but carry no loss. A finished run's result is validated
    (``store.check_result``, its figures numbers or null): a damaged one is a ValueError naming
    the run (``RunStore.read`` checks the whole schema, and reads such a run as pending)."""
    records = list(records)
    for r in records:
        if r.finished:
            try:
                check_result(r.result, r.status, complete=False)
            except ValueError as exc:
                raise ValueError(f"run {r.id}: {exc}") from None
    if x not in FIELDS:
        raise ValueError(f"x must be a config field such as 'lr'; got {x!r}")
    if not records:
        raise ValueError("no runs to summarize")
    if lr_range is not None and not (len(lr_range) == 2 and lr_range[0] <= lr_range[1]):
        raise ValueError(f"lr_range must be (a, b) with a <= b; got {lr_range!r}")
    names = [n for n in FIELDS if n not in (x, "seed")
             and len({repr(r.value(n)) for r in records}) > 1]
    groups: dict[str, dict[float, list[RunRecord]]] = {}
    for r in records:
        variant = ", ".join(f"{short_name(n)}={r.value(n)}" for n in names) or "all"
        groups.setdefault(variant, {}).setdefault(r.value(x), []).append(r)

    cells, sens = [], []
    for variant, by_x in groups.items():
        cells_v, sens_v = _variant(variant, by_x, records, lr_range)
        cells += cells_v
        sens.append(sens_v)
    counts = {s: sum(1 for r in records if r.status == s)
              for s in (DONE, DIVERGED, FAILED, PENDING)}
    return SweepSummary(x, names, cells, sens, counts)


def _variant(variant: str, by_x: dict, records: list[RunRecord],
             lr_range: tuple[float, float] | None) -> tuple[list[Cell], Sensitivity]:
    """One variant's cells (one per ``x``, averaged over seeds) and its LR sensitivity."""
    cells = []
    finished = [r for rs in by_x.values() for r in rs if r.finished]
    inits = [v for r in finished if (v := finite((r.result or {}).get("loss_at_init"))) is not None]
    vocab = {r.value("model.vocab_size") for r in finished}
    if inits:
        loss0 = sum(inits) / len(inits)
    else:
        loss0 = math.log(max(vocab or {records[0].value("model.vocab_size")}))
    xs, losses = [], []
    for xv in sorted(by_x):
        rs = by_x[xv]
        fin = [r for r in rs if r.finished]
        vals = []
        for r in fin:
            v = finite((r.result or {}).get("final_val_loss"))
            vals.append(loss0 if v is None else min(v, loss0))
        mean = sum(vals) / len(vals) if vals else None
        sd = (math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
              if mean is not None and len(vals) > 1 else None)
        floors = [f for r in fin
                  if (f := finite((r.result or {}).get("entropy_floor"))) is not None]
        ci = [v for r in fin if (v := finite((r.result or {}).get("loss_at_init"))) is not None]
        status = [r.status for r in rs]
        cells.append(Cell(variant, float(xv), len(rs), status.count(DONE), status.count(DIVERGED),
                          status.count(FAILED), status.count(PENDING), mean, sd,
                          sum(ci) / len(ci) if ci else None, floors[0] if floors else None))
        if mean is not None:
            xs.append(float(xv))
            losses.append(mean)
    if xs:
        in_range = [v for v in xs if lr_range is None or lr_range[0] <= v <= lr_range[1]]
        value = lr_sensitivity(xs, losses, loss0, lr_range) if in_range else math.nan
        best = min(losses)
        return cells, Sensitivity(variant, value, loss0, best, xs[losses.index(best)], in_range)
    return cells, Sensitivity(variant, math.nan, loss0, None, None, [])


# ---- text ------------------------------------------------------------------------------------
def _f(v: float | None, sd: float | None = None) -> str:
    """A loss (or an LR sensitivity, in nats) to 0.0001 nats, a fixed column, and `` ± sd``
    where a spread over seeds is given; "-" where there is no finite value."""
    if v is None or not math.isfinite(v):
        return "-"
    return fmt(v, spec=".4f") + ("" if sd is None else f" ± {fmt(sd, spec='.2g')}")


def tables(summary: SweepSummary) -> list[tuple[str, list[str], list[list[str]]]]:
    """The summary as ``(title, header, rows)`` tables of text."""
    s = summary
    runs = [[c.variant, f"{c.x:g}", str(c.runs), str(c.done), str(c.diverged), str(c.failed),
             str(c.pending), _f(c.loss, c.loss_sd), _f(c.loss_at_init)] for c in s.cells]
    sens = [[t.variant, ", ".join(f"{v:g}" for v in t.xs) or "-", _f(t.loss_at_init),
             _f(t.best_loss), "-" if t.best_x is None else f"{t.best_x:g}", _f(t.value)]
            for t in sorted(s.sensitivity, key=lambda t: (math.isnan(t.value), t.value))]
    x = short_name(s.x)
    return [
        ((f"final validation loss by variant and {x} (nats/token; a diverged run counts as the "
          f"loss at init)"),
         ["variant", x, "runs", "done", "diverged", "failed", "pending", "final loss",
          "loss at init"], runs),
        ("LR sensitivity (Wortsman et al. 2023): mean of min(loss, loss at init) - best loss",
         ["variant", f"{x} averaged", "loss at init", "best loss", f"best {x}", "LR sensitivity"],
         sens),
    ]


def print_summary(summary: SweepSummary, file: Any = None) -> None:
    """Print the tables (rich when installed, plain columns otherwise)."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is part of normlab[lab]
        for title, header, rows in tables(summary):
            widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
            print(f"\n{title}", file=file)
            for r in [header, *rows]:
                print("  ".join(c.ljust(w) for c, w in zip(r, widths)), file=file)
        return
    console = Console(file=file)
    if not console.is_terminal:  # a file or a pipe: wide enough for the variant labels
        console.width = max(console.width, 150)
    for title, header, rows in tables(summary):
        table = Table(title=title, title_justify="left")
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for r in rows:
            table.add_row(*r)
        console.print(table)


# ---- figures ---------------------------------------------------------------------------------
def plot_summary(summary: SweepSummary, out_dir: str | Path) -> list[str]:
    """``final_loss_vs_lr.png`` (one line per variant, log x axis; a cross where a seed diverged)
    and ``lr_sensitivity.png`` (one bar per variant); returns the file names."""
    from matplotlib import colormaps

    from ..plotting import COLORS, figure, save, style

    s = summary
    variants = list(dict.fromkeys(c.variant for c in s.cells))
    cycle = colormaps["tab10"].colors  # type: ignore[attr-defined]  # tab10 is a ListedColormap

    def color(i: int, variant: str) -> Any:
        return COLORS.get(variant.split("=", 1)[-1], cycle[i % len(cycle)])

    fig, (ax,) = figure(width=6.4, height=4.2)
    loss0s, floors = [], []
    for i, v in enumerate(variants):
        cs = [c for c in s.cells if c.variant == v and c.loss is not None]
        if not cs:
            continue
        xs, ys = [c.x for c in cs], [c.loss for c in cs]
        err = [c.loss_sd or 0.0 for c in cs]
        col = color(i, v)
        ax.errorbar(xs, ys, yerr=err if any(err) else None, color=col, marker="o", ms=4,
                    capsize=2, label=v)
        bad = [c for c in cs if c.diverged]
        if bad:
            ax.scatter([c.x for c in bad], [c.loss for c in bad], marker="x", s=60, color=col,
                       zorder=3)
        loss0s += [c.loss_at_init for c in cs if c.loss_at_init is not None]
        floors += [c.entropy_floor for c in cs if c.entropy_floor is not None]
    if loss0s:
        ax.axhline(sum(loss0s) / len(loss0s), color="#777777", ls="--", lw=0.9,
                   label="loss at init")
    if floors:
        ax.axhline(min(floors), color="#000000", ls=":", lw=0.9, label="entropy floor")
    ax.set_xscale("log")
    style(ax, "final loss vs learning rate (x: a seed diverged)", short_name(s.x),
          "final validation loss (nats/token)")
    files = [save(fig, out_dir, "final_loss_vs_lr.png")]

    fig, (ax,) = figure(width=6.4, height=0.5 + 0.45 * max(len(s.sensitivity), 2))
    rows = [t for t in s.sensitivity if math.isfinite(t.value)]
    ax.barh([t.variant for t in rows], [t.value for t in rows],
            color=[color(variants.index(t.variant), t.variant) for t in rows])
    for i, t in enumerate(rows):
        ax.annotate(f"{t.value:.3g}", (t.value, i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    style(ax, "LR sensitivity (Wortsman et al. 2023; lower is more robust)",
          "mean of min(loss, loss at init) - best loss (nats)", "", legend=False)
    files.append(save(fig, out_dir, "lr_sensitivity.png"))
    return files


__all__ = ["Cell", "Sensitivity", "SweepSummary", "lr_sensitivity", "plot_summary",
           "print_summary", "summarize", "tables"]
