"""The sweep store under faults: a store or run directory that cannot be written is named and the
sweep goes on or stops cleanly; a damaged result or metrics file is re-queued with its files kept
aside, never trusted; --summary validates results; specs are bounded, their data_path checked
first, and a field that no point reads refused."""

import json
import os

import pytest
from _sweep_helpers import write_spec

from normlab.lab.cli import main
from normlab.lab.sweep import (
    DONE,
    FAILED,
    PENDING,
    RunStore,
    SerialExecutor,
    SpecError,
    load_spec,
    make_points,
    read_sweep,
    run_sweep,
    summarize,
)
from normlab.lab.sweep.store import StoreError
from normlab.models import GPTConfig
from normlab.train import TrainConfig

as_root = hasattr(os, "geteuid") and os.geteuid() == 0  # root writes through read-only modes


def tiny(**kw) -> TrainConfig:
    model = GPTConfig(vocab_size=16, seq_len=8, n_layers=1, d_model=16, n_heads=2)
    return TrainConfig(**{**dict(model=model, steps=3, warmup=1, batch_size=2, eval_interval=3,
                                 eval_batches=1), **kw})


def test_a_run_directory_replaced_by_a_file_fails_that_point_and_the_rest_go_on(tmp_path):
    a, b = tiny(lr=1e-3), tiny(lr=2e-3)
    out = tmp_path / "out"
    pa = make_points([a, b])[0]
    (out / "runs").mkdir(parents=True)
    (out / "runs" / pa.id).write_text("in the way")
    records = run_sweep([a, b], out, executor=SerialExecutor())
    assert [r.status for r in records] == [FAILED, DONE]
    assert "is not a folder (a file is in its place)" in records[0].reason
    assert (out / "runs" / pa.id).read_text() == "in the way"  # never replaced
    (out / "runs" / pa.id).unlink()
    again = run_sweep([a, b], out, executor=SerialExecutor())  # the next sweep is not stuck
    assert [r.status for r in again] == [DONE, DONE] and again[1].reused


@pytest.mark.skipif(as_root, reason="root writes into read-only folders")
def test_a_read_only_store_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    os.chmod(out / "runs", 0o555)
    try:
        with pytest.raises(StoreError, match="is not writable"):
            run_sweep([tiny()], out, executor=SerialExecutor())
        path = write_spec(tmp_path, "[grid]\nlr = [1e-3]\n")
        assert main(["sweep", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert (err.startswith("normlab sweep: store") and "not writable" in err
                and err.count("\n") == 1)
    finally:
        os.chmod(out / "runs", 0o755)


def test_store_checks_name_a_file_where_a_folder_belongs(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "runs").write_text("x")
    with pytest.raises(StoreError, match="runs' is a file; expected a folder"):
        RunStore(tmp_path / "out").check_writable()
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="cannot be created"):
        RunStore(tmp_path / "f" / "sub").check_writable()


@pytest.mark.parametrize("damage", [
    lambda d: (d / "result.json").write_text("{}"),
    lambda d: (d / "result.json").write_text('{"final_val_loss": "low"}'),
    lambda d: (d / "result.json").write_text("[1, 2"),
    lambda d: (d / "result.json").unlink(),
    lambda d: (d / "result.json").write_text(json.dumps(
        {**json.loads((d / "result.json").read_text()), "final_val_loss": "2.5"})),
    lambda d: (d / "result.json").write_text(json.dumps(
        {**json.loads((d / "result.json").read_text()), "steps_done": -1})),
    lambda d: (d / "metrics.json").unlink(),
    lambda d: (d / "metrics.json").write_text('{"history": "x", "evals": []}'),
    lambda d: (d / "metrics.json").write_text('{"history": [{"step": 0}], "evals": []}'),
    lambda d: (d / "metrics.json").write_text(json.dumps(
        {**json.loads((d / "metrics.json").read_text()), "evals": [{"val_loss": 1.0}]})),
])
def test_a_damaged_result_is_requeued_with_its_files_kept_aside(tmp_path, capsys, damage):
    cfg = tiny()
    out = tmp_path / "out"
    [rec] = run_sweep([cfg], out, executor=SerialExecutor())
    d = rec.path
    good = json.loads((d / "result.json").read_text())
    damage(d)
    damaged = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    [pending] = read_sweep([cfg], out)
    assert pending.status == PENDING and pending.damaged and pending.result is None
    with pytest.raises(ValueError, match=f"run {rec.id}: result.json"):
        summarize([rec.__class__(**{**rec.__dict__, "result": {"final_val_loss": "x"}})])
    [again] = run_sweep([cfg], out, executor=SerialExecutor())
    assert again.status == DONE and not again.reused
    assert json.loads((d / "result.json").read_text())["final_val_loss"] == good["final_val_loss"]
    aside = d / "damaged-1"
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == damaged  # kept for inspection
    assert [e["event"] for e in RunStore(out).events()].count("damaged") == 1


def test_summary_uses_only_results_that_validate(tmp_path, capsys):
    path = write_spec(tmp_path, "[grid]\nlr = [1e-3, 1e-2]\n", steps=3)
    out = tmp_path / "out"
    records = run_sweep(load_spec(path), out, executor=SerialExecutor())
    (records[1].path / "result.json").write_text('{"final_val_loss": 0.001}')  # a damaged number
    capsys.readouterr()
    assert main(["sweep", str(path), "--out", str(out), "--summary"]) == 0
    captured = capsys.readouterr()
    assert f"run {records[1].id}: result.json lacks" in captured.err
    summary = json.loads((out / "summary" / "summary.json").read_text())
    assert summary["counts"]["done"] == 1 and summary["counts"]["pending"] == 1
    assert all(c["loss"] != 0.001 for c in summary["cells"])


def test_a_spec_is_bounded_and_dry_run_counts(tmp_path, capsys):
    body = "[random]\nsamples = 100000000\nlr = { log_uniform = [1e-4, 1e-1] }\n"
    path = write_spec(tmp_path, body)
    with pytest.raises(SpecError,
                       match=r"100,000,000 points .* more than the cap of 1,000") as info:
        load_spec(path)
    assert info.value.field == "random.samples"
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    assert "--max-points 100000000" in capsys.readouterr().err and not out.exists()
    assert main(["sweep", str(path), "--out", str(out), "--dry-run"]) == 0  # counts, lists nothing
    assert capsys.readouterr().out.startswith("100,000,000 points")
    grid = write_spec(tmp_path, "[grid]\nlr = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4]\nwarmup = [0, 1, 2]\n",
                      head="seeds = [0, 1]\n", name="grid.toml")
    assert len(load_spec(grid).points()) == 30
    with pytest.raises(SpecError, match="30 points"):
        load_spec(grid, max_points=29)
    assert main(["sweep", str(grid), "--out", str(out), "--max-points", "10", "--dry-run"]) == 0
    assert "30 points" in capsys.readouterr().out
    assert main(["sweep", str(grid), "--out", str(out), "--max-points", "0"]) == 2
    assert "--max-points must be an integer >= 1" in capsys.readouterr().err


def test_a_lifted_cap_still_refuses_a_list_of_points_that_cannot_fit(tmp_path, capsys, monkeypatch):
    from normlab.train import budget

    path = tmp_path / "s.toml"
    path.write_text("[random]\nsamples = 100000000\nlr = { log_uniform = [1e-4, 1e-1] }\n")
    monkeypatch.setattr(budget, "available_memory", lambda: 2**30)
    for extra in (["--dry-run"], []):
        assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--max-points",
                     "100000000", *extra]) == 2  # refused at once, never listed
        err = capsys.readouterr().err
        assert "--max-points 100000000: listing 100,000,000 points needs about" in err
    assert not (tmp_path / "o").exists()


def test_a_spec_data_path_is_checked_before_anything_is_dispatched(tmp_path, capsys):
    body = (f'[base]\ndata = "file"\ndata_path = "{tmp_path / "missing.txt"}"\n'
            '[grid]\nlr = [1e-3, 1e-2]\n')
    path = tmp_path / "s.toml"
    path.write_text('seeds = [0]\n' + body)
    with pytest.raises(SpecError, match=r"data_path: .*missing.txt' does not exist") as info:
        load_spec(path)
    assert info.value.field == "data_path"
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2 and not out.exists()
    path.write_text('seeds = [0]\n' + body.replace(str(tmp_path / "missing.txt"), str(tmp_path)))
    with pytest.raises(SpecError, match="is a directory; expected a regular file"):
        load_spec(path)
    path.write_text('seeds = [0]\n[base]\ndata_path = "x.txt"\n')
    with pytest.raises(SpecError, match="data_path is read only with data='file'"):
        load_spec(path)


@pytest.mark.parametrize("body,where,field", [
    ('[base]\ndata = "pydoc"\nmarkov_order = 3\n[grid]\nlr = [1e-3, 1e-2]\n', "base",
     "markov_order"),
    ('[base]\ndata = "copy"\n[grid]\nmarkov_alpha = [0.1, 0.5]\n', "grid", "markov_alpha"),
    ('[grid]\nmomentum = [0.5, 0.9]\n', "grid", "momentum"),
    ('[base]\nschedule = "constant"\n[random]\nsamples = 2\nmin_lr = [0.0, 1e-4]\n', "random",
     "min_lr"),
    ('[grid]\ndata = ["pydoc"]\nmodel.vocab_size = [30, 40]\n', "grid", "model.vocab_size"),
])
def test_a_spec_field_that_no_point_reads_is_refused(tmp_path, capsys, body, where, field):
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(SpecError, match=f"{where}.{field} is read only with") as info:
        load_spec(path)
    assert info.value.field == field
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    assert not (tmp_path / "o").exists()


def test_a_spec_field_that_some_points_read_is_accepted(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[grid]\noptimizer = ["adamw", "sgd"]\nmomentum = [0.5, 0.9]\n')
    assert len(load_spec(path).points()) == 4


def test_a_spec_that_never_ends_is_refused_unread(tmp_path, capsys):
    os.mkfifo(tmp_path / "spec.toml")
    with pytest.raises(SpecError, match="is a FIFO; expected a regular file"):
        load_spec(tmp_path / "spec.toml")
    assert main(["sweep", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "o")]) == 2


def test_a_sweep_point_that_cannot_fit_is_refused_before_dispatch(tmp_path, capsys):
    path = write_spec(tmp_path, "[grid]\nmodel.n_layers = [1, 1000000000]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "model.n_layers=1000000000" in err and "model.n_layers 1000000000: the run needs" in err
    assert not out.exists()


def test_a_store_that_refuses_writes_mid_sweep_fails_those_points_and_goes_on(tmp_path,
                                                                              monkeypatch):
    # a folder made read-only (or a full disk) while the sweep runs: the write raises OSError
    from normlab.lab.sweep import store as store_mod

    a, b = tiny(lr=1e-3), tiny(lr=2e-3)
    pa = make_points([a, b])[0]
    real = store_mod._write

    def refuse(path, payload, **kw):
        if pa.id in str(path) and path.name == "status.json":
            raise PermissionError(13, "Permission denied")
        return real(path, payload, **kw)

    monkeypatch.setattr(store_mod, "_write", refuse)
    out = tmp_path / "out"
    records = run_sweep([a, b], out, executor=SerialExecutor())
    assert [r.status for r in records] == [FAILED, DONE]
    assert ("cannot write its outcome" in records[0].reason
            and "Permission denied" in records[0].reason)
    monkeypatch.setattr(store_mod, "_write", real)
    [ra, rb] = read_sweep([a, b], out)
    assert ra.status == PENDING and rb.status == DONE  # no status written: run again next time
    assert [r.status for r in run_sweep([a, b], out, executor=SerialExecutor())] == [DONE, DONE]


def test_an_unwritable_store_is_named_even_as_root(tmp_path, monkeypatch, capsys):
    from normlab.lab.sweep import store as store_mod

    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    monkeypatch.setattr(store_mod.os, "access", lambda path, mode: False)
    with pytest.raises(StoreError, match="is not writable"):
        RunStore(out).check_writable()


def test_a_journal_that_is_not_a_regular_file_is_refused_never_opened(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "events.jsonl")  # opening it to append would block
    with pytest.raises(StoreError, match=r"events.jsonl' is not a regular file"):
        run_sweep([tiny()], out, executor=SerialExecutor())
    assert RunStore(out).events() == []


def test_a_kill_between_a_runs_status_and_its_journal_line_waits_for_both():
    """SIGTERM raised inside the critical section is delivered only after it: the status and the
    journal line of a finished run are written together."""
    import signal

    from normlab.lab.sweep.store import _signals_held

    seen = []
    old = signal.signal(signal.SIGTERM, lambda *_: seen.append("term"))
    try:
        with _signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python runs handlers between bytecodes: give it the chance
                pass
            assert seen == []
        assert seen == ["term"]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_run_killed_between_its_status_and_its_journal_line_is_mended_by_the_next_sweep(tmp_path):
    """SIGKILL cannot be held back: the next sweep writes the missing outcome line, once."""
    a, b, c = tiny(lr=1e-3), tiny(lr=2e-3), tiny(lr=3e-3)
    out = tmp_path / "out"
    run_sweep([a, b], out, executor=SerialExecutor())
    pa, pb, pc = make_points([a, b, c])
    journal = out / "events.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("".join(line + "\n" for line in lines  # a's outcome line never written
                               if not (json.loads(line)["id"] == pa.id
                                       and json.loads(line)["event"] == DONE)))
    run_sweep([a, b, c], out, executor=SerialExecutor())
    run_sweep([a, b, c, tiny(lr=4e-3)], out, executor=SerialExecutor())  # mends nothing twice
    events = RunStore(out).events()
    for p in (pa, pb, pc):
        assert [e["event"] for e in events if e["id"] == p.id].count(DONE) == 1, p.id
    assert [e["id"] for e in events if e.get("mended")] == [pa.id]
