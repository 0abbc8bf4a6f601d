"""Sweeps on the process pool and in-process: the store's files, reruns that skip finished runs
and retry failed ones, divergence as a result, the summary and the LR-sensitivity metric."""

import dataclasses
import json
import math
import multiprocessing as mp
import os
import sys

import numpy as np
import pytest
from _sweep_helpers import crash, env_probe, snapshot, temp_files, write_spec

from normlab.lab.cli import main
from normlab.lab.sweep import (
    DIVERGED,
    DONE,
    FAILED,
    PENDING,
    ProcessPool,
    RunRecord,
    RunStore,
    SerialExecutor,
    load_spec,
    lr_sensitivity,
    make_points,
    read_sweep,
    run_sweep,
    summarize,
)
from normlab.lab.sweep.executors import shared_workers
from normlab.lab.sweep.task import THREAD_ENV
from normlab.models import GPTConfig
from normlab.train import TrainConfig, train


class NoRuns(SerialExecutor):
    """Fails the test if asked to run anything."""

    def imap(self, fn, items):
        for tag, _ in items:
            raise AssertionError(f"point {tag.id} was run again")
        return iter(())


def test_four_point_sweep_on_the_process_pool(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    out = tmp_path / "out"
    seen = []
    records = run_sweep(spec, out, executor=ProcessPool(2),
                        progress=lambda done, total, note: seen.append((done, total, note)))
    assert [r.status for r in records] == [DONE] * 4
    assert seen[0] == (0, 4, "done 0 · diverged 0 · failed 0") and seen[-1][:2] == (4, 4)
    for p, r in zip(spec.points(), records):
        d = out / "runs" / p.id
        assert sorted(f.name for f in d.iterdir()) == ["config.json", "metrics.json", "result.json",
                                                       "status.json"]
        assert json.loads((d / "config.json").read_text()) == p.config.to_dict()
        status = json.loads((d / "status.json").read_text())
        assert status["status"] == DONE and status["reason"] is None and status["attempt"] == 1
        assert status["wall_s"] > 0 and not r.reused
        metrics = r.metrics()
        assert len(metrics["history"]) == 6 and metrics["evals"][-1]["step"] == 6
        assert r.result["loss_at_init"] == metrics["history"][0]["nll"]
        # the same numbers as the run in this process (single-threaded workers: equal to rounding)
        here = train(p.config)
        np.testing.assert_allclose(r.result["final_val_loss"], here.final_val_loss, rtol=1e-5)
    events = RunStore(out).events()
    assert sorted(e["event"] for e in events) == ["done"] * 4 + ["start"] * 4
    assert not temp_files(out)

    before = snapshot(out / "runs")
    again = run_sweep(spec, out, executor=NoRuns())  # nothing left to run
    assert all(r.reused and r.status == DONE for r in again)
    assert [r.result for r in again] == [r.result for r in records]
    assert snapshot(out / "runs") == before


def test_pool_workers_are_single_threaded_and_the_environment_is_restored():
    saved = {k: os.environ.get(k) for k in THREAD_ENV}
    out = dict(ProcessPool(2).imap(env_probe, [(i, i) for i in range(4)]))
    assert sorted(out) == [0, 1, 2, 3]
    assert all(o["env"] == THREAD_ENV and o["pid"] != os.getpid() for o in out.values())
    assert {k: os.environ.get(k) for k in THREAD_ENV} == saved


def test_a_dead_worker_fails_its_task_and_the_pool_goes_on():
    items = [("crash", None), ("a", 1), ("b", 2)]
    fns = {"crash": crash}

    out = dict(ProcessPool(1).imap(_dispatch, [(tag, (fns.get(tag), arg)) for tag, arg in items]))
    assert out["crash"]["status"] == FAILED and "worker process died" in out["crash"]["reason"]
    assert out["a"]["arg"] == 1 and out["b"]["arg"] == 2


def test_shared_workers_serve_every_pool_in_the_block_and_stop_with_it():
    def run(pool, n):  # -> the pids of the workers that ran the tasks, and of every worker alive
        out = dict(pool.imap(env_probe, [(i, i) for i in range(n)]))
        assert sorted(out) == list(range(n))
        assert all(o["env"] == THREAD_ENV for o in out.values())
        return {o["pid"] for o in out.values()}, {p.pid for p in mp.active_children()}

    assert not mp.active_children()
    with shared_workers():
        with shared_workers():  # nested: the outer block owns the workers
            used, first = run(ProcessPool(1), 2)
        assert len(first) == 1 and used == first
        used, second = run(ProcessPool(2), 4)  # more workers than before: started afresh, once
        assert len(second) == 2 and used <= second and second.isdisjoint(first)
        for pool in (ProcessPool(2), ProcessPool(1), ProcessPool(2)):
            used, alive = run(pool, 3)
            assert used <= second and alive == second  # the same processes, pool after pool
    assert not mp.active_children()  # shut down with the block
    used, _ = run(ProcessPool(2), 2)  # outside a block: a pool of its own, shut down after
    assert used.isdisjoint(second) and not mp.active_children()


def test_an_interrupted_sweep_stops_the_shared_workers_and_the_next_starts_new_ones():
    with shared_workers():
        before = {o["pid"] for _, o in ProcessPool(2).imap(env_probe, [(i, i) for i in range(2)])}
        it = ProcessPool(2).imap(env_probe, [(i, i) for i in range(4)])
        next(it)
        it.close()  # the caller stops reading: the workers may be mid-task, so they go
        assert not mp.active_children()
        after = {o["pid"] for _, o in ProcessPool(2).imap(env_probe, [(i, i) for i in range(2)])}
        assert after.isdisjoint(before)
        # a dead worker breaks the block's pool: the sweep goes on with new workers
        items = [("crash", None), ("a", 1), ("b", 2)]
        out = dict(ProcessPool(1).imap(_dispatch, [(t, ({"crash": crash}.get(t), a))
                                                   for t, a in items]))
        assert out["crash"]["status"] == FAILED and out["b"]["arg"] == 2


def _dispatch(arg):
    fn, value = arg
    return (fn or env_probe)(value)


def tiny(**kw) -> TrainConfig:
    model = GPTConfig(vocab_size=16, seq_len=8, n_layers=1, d_model=16, n_heads=2)
    base = dict(model=model, steps=6, warmup=1, batch_size=4, eval_interval=3, eval_batches=1)
    return TrainConfig(**{**base, **kw})


def test_divergence_is_a_result_and_failures_are_retried(tmp_path):
    corpus = tmp_path / "corpus.txt"
    ok = tiny(lr=1e-3)
    wild = tiny(lr=5.0, warmup=0, schedule="constant", grad_clip=None, divergence_factor=1.05)
    text = tiny(data="file", data_path=str(corpus))  # the file is not there yet
    out = tmp_path / "out"
    records = run_sweep([ok, wild, text], out, executor=SerialExecutor())
    assert [r.status for r in records] == [DONE, DIVERGED, FAILED]
    assert "exploded past 1.05 x the first step's" in records[1].reason
    assert records[1].result["stopped"] == records[1].reason
    assert len(records[1].metrics()["history"]) == 2  # it stopped at step 1
    assert "corpus.txt" in records[2].reason
    failed_dir = records[2].path
    status = json.loads((failed_dir / "status.json").read_text())
    assert status["status"] == FAILED and "Traceback" in status["traceback"]
    assert sorted(f.name for f in failed_dir.iterdir()) == ["config.json", "status.json"]
    finished = {p: v for p, v in snapshot(out / "runs").items() if not p.startswith(records[2].id)}

    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    again = run_sweep([ok, wild, text], out, executor=SerialExecutor())
    assert [r.status for r in again] == [DONE, DIVERGED, DONE]
    assert [r.reused for r in again] == [True, True, False]
    assert json.loads((failed_dir / "status.json").read_text())["attempt"] == 2
    now = snapshot(out / "runs")
    assert {p: v for p, v in now.items() if not p.startswith(records[2].id)} == finished
    events = [(e["event"], e["id"]) for e in RunStore(out).events()]
    assert (events.count(("failed", records[2].id)) == 1
            and events.count(("done", records[2].id)) == 1)


def test_an_interrupted_run_is_run_again_and_its_leftovers_removed(tmp_path):
    cfg = tiny()
    out = tmp_path / "out"
    [rec] = read_sweep([cfg], out)
    assert rec.status == PENDING
    d = out / "runs" / rec.id
    d.mkdir(parents=True)
    (d / "metrics.json").write_text("{}")  # what a killed attempt may leave
    (d / ".result.json.abc.tmp").write_text("half")
    [rec] = run_sweep([cfg], out, executor=SerialExecutor())
    assert rec.status == DONE and not temp_files(out)
    with pytest.raises(RuntimeError, match="never rewritten"):
        RunStore(out).prepare(make_points([cfg])[0])


# ---- the metric and the summary ----------------------------------------------------------------
def test_lr_sensitivity_follows_the_definition():
    lrs = [1e-3, 1e-2, 1e-1, 1.0]
    losses = [2.0, 1.5, 2.5, None]  # 2.5 is worse than at init, None diverged: both count 2.3
    assert lr_sensitivity(lrs, losses, 2.3) == pytest.approx((2.0 + 1.5 + 2.3 + 2.3) / 4 - 1.5)
    assert lr_sensitivity(lrs, losses, 2.3, (1e-2, 1e-1)) == pytest.approx((1.5 + 2.3) / 2 - 1.5)
    assert lr_sensitivity(lrs, [1.0, 1.0, 1.0, 1.0], 2.3) == 0.0  # flat: insensitive
    assert lr_sensitivity(lrs, [2.0, float("inf"), float("nan"), 1.9], 2.3) == pytest.approx(
        (2.0 + 2.3 + 2.3 + 1.9) / 4 - 1.9)
    assert math.isnan(lr_sensitivity(lrs, [None] * 4, 2.3))  # nothing trained: undefined
    with pytest.raises(ValueError, match="no learning rate"):
        lr_sensitivity(lrs, losses, 2.3, (2.0, 3.0))
    with pytest.raises(ValueError, match="one length"):
        lr_sensitivity(lrs, losses[:2], 2.3)
    with pytest.raises(ValueError, match="loss_at_init"):
        lr_sensitivity(lrs, losses, float("nan"))


def _record(lr, placement, seed, status, loss=None, init=2.8):
    cfg = TrainConfig(lr=lr, seed=seed, model=dataclasses.replace(TrainConfig().model,
                                                                  placement=placement))
    result = None if status not in (DONE, DIVERGED) else {
        "final_val_loss": loss, "loss_at_init": init, "entropy_floor": 1.2}
    return RunRecord(f"{lr}{placement}{seed}", cfg.to_dict(), status, result=result)


def test_summarize_groups_variants_averages_seeds_and_clips_divergence():
    records = [
        _record(1e-3, "pre", 0, DONE, 2.0), _record(1e-3, "pre", 1, DONE, 2.2),
        _record(1e-2, "pre", 0, DONE, 1.5), _record(1e-2, "pre", 1, DIVERGED, None),
        _record(1e-1, "pre", 0, FAILED), _record(1e-1, "pre", 1, PENDING),
        _record(1e-3, "post", 0, DONE, 2.4), _record(1e-3, "post", 1, DONE, 2.6),
        _record(1e-2, "post", 0, DIVERGED, 9.0), _record(1e-2, "post", 1, DIVERGED, float("nan")),
    ]
    s = summarize(records)
    assert s.variant_fields == ["model.placement"]
    assert s.counts == {DONE: 5, DIVERGED: 3, FAILED: 1, PENDING: 1}
    cell = {(c.variant, c.x): c for c in s.cells}
    assert cell["placement=pre", 1e-3].loss == pytest.approx(2.1)
    assert cell["placement=pre", 1e-2].loss == pytest.approx((1.5 + 2.8) / 2)  # diverged -> init
    c = cell["placement=pre", 1e-1]
    assert (c.runs, c.failed, c.pending, c.loss) == (2, 1, 1, None)
    assert cell["placement=post", 1e-2].loss == pytest.approx(2.8)
    sens = {t.variant: t for t in s.sensitivity}
    pre, post = sens["placement=pre"], sens["placement=post"]
    assert pre.xs == [1e-3, 1e-2] and pre.best_loss == pytest.approx(2.1) and pre.best_x == 1e-3
    assert pre.value == pytest.approx((2.1 + 2.15) / 2 - 2.1)
    assert post.value == pytest.approx((2.5 + 2.8) / 2 - 2.5)
    json.dumps(s.to_dict(), allow_nan=False)


def test_cli_summary_dry_run_and_the_missing_ray_extra(tmp_path, capsys, monkeypatch):
    path = write_spec(tmp_path, '[grid]\nlr = [1e-3, 1e-2, 5.0]\n',
                      head="seeds = [0, 1]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "6 points" in text and text.count("pending") == 6 and not out.exists()
    run_sweep(load_spec(path).points()[:4], out, executor=SerialExecutor())
    assert main(["sweep", str(path), "--out", str(out), "--summary"]) == 0
    text = capsys.readouterr().out
    assert "LR sensitivity" in text and "final loss" in text
    files = sorted(f.name for f in (out / "summary").iterdir())
    assert files == ["final_loss_vs_lr.png", "lr_sensitivity.png", "summary.json"]
    summary = json.loads((out / "summary" / "summary.json").read_text())
    assert summary["counts"] == {"done": 4, "diverged": 0, "failed": 0, "pending": 2}
    assert (out / "summary" / "final_loss_vs_lr.png").read_bytes()[:4] == b"\x89PNG"

    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    fresh = tmp_path / "fresh"
    assert main(["sweep", str(path), "--out", str(fresh), "--ray", "auto"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'normlab[ray]'" in err and not fresh.exists()
    assert main(["sweep", str(path), "--out", str(fresh), "--workers", "0"]) == 2
    assert main(["sweep", str(path), "--out", str(fresh), "--ray", "auto", "--workers", "2"]) == 2


def test_the_sweep_package_imports_ray_and_matplotlib_only_when_used():
    import subprocess

    code = ("import sys, normlab.lab.sweep, normlab.lab.commands.sweep\n"
            "bad = [m for m in ('ray', 'matplotlib', 'rich') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runs_are_grouped_into_ensembles_that_keep_every_worker_busy(monkeypatch):
    from normlab.lab.sweep import runner
    from normlab.lab.sweep.runner import as_points, ensembles

    monkeypatch.setattr(runner, "_members_that_fit", lambda config: 16)
    cfg = TrainConfig(model=GPTConfig(vocab_size=16, seq_len=8, n_layers=2, d_model=16,
                                      n_heads=2), steps=10)
    one_shape = as_points([dataclasses.replace(cfg, seed=s) for s in range(20)])
    groups = ensembles(one_shape, 2)  # 16 + 4 would leave a worker idle for three quarters
    assert [len(g) for g in groups] == [10, 10]
    assert [p for g in groups for p in g] == one_shape  # each point once, in its order
    assert [len(g) for g in ensembles(one_shape, 1)] == [10, 10]  # the memory's cap of 16
    # three shapes of 5 runs, of equal cost (the heads split d = 16 differently): 5, 5, 5 keeps
    # one worker idle for a third of the time, one shape cut in two does not
    heads = as_points([dataclasses.replace(cfg, seed=s, model=dataclasses.replace(
        cfg.model, n_heads=h)) for h in (1, 2, 4) for s in range(5)])
    groups = ensembles(heads, 2)
    assert sorted(len(g) for g in groups) == [2, 3, 5, 5]
    assert all(len({p.config.model.n_heads for p in g}) == 1 for g in groups)
    costs = [runner._cost(g) for g in groups]
    assert costs == sorted(costs, reverse=True)  # the costliest first
    whole = [runner._cost(heads[i:i + 5]) for i in (0, 5, 10)]
    assert runner._finish_time(costs, 2) < runner._finish_time(whole, 2)
    # different costs that already balance are left whole
    widths = as_points([dataclasses.replace(cfg, seed=s, model=dataclasses.replace(
        cfg.model, d_model=d)) for d in (16, 24, 32) for s in range(5)])
    assert sorted(len(g) for g in ensembles(widths, 2)) == [5, 5, 5]
