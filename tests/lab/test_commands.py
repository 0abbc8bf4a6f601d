"""Bad command-line input to the lab's commands: one line naming the flag, exit status 2, before
any work starts or any output is touched; never a traceback, never a hang, never a changed input
file. A test per class of fault, then a hypothesis test over the flags of run, report, bench,
list, formats and check (the measuring work mocked: only the argument handling runs)."""

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normlab.lab import framework, running
from normlab.lab.cli import main as cli
from normlab.lab.commands import bench, check, report


def _run(capsys, *argv):
    rc = cli(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line_error(err: str, flag: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and flag in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, flag", [
    (["bench", "--rows", "-1"], "--rows"),
    (["bench", "--rows", "0"], "--rows"),
    (["bench", "--widths", "0"], "--widths"),
    (["bench", "--widths", "64", "-3"], "--widths"),
    (["bench", "--repeats", "0"], "--repeats"),
    (["bench", "--rows", "1000000000"], "--rows"),
    (["bench", "--rows", "1.5"], "--rows"),
    (["run", "dropout", "--seed", "-1"], "--seed"),
    (["run", "dropout", "--seed", "nan"], "--seed"),
    (["report", "--seed", "-1"], "--seed"),
    (["run", "dropout", "--ray", "bogus"], "--ray"),
    (["report", "--ray", "bogus"], "--ray"),
    (["run", "dropout", "--workers", "0"], "--workers"),
    (["run", "dropout", "--draws", "many"], "--draws"),
    (["run", "warmup", "--base.steps", "0"], "--base.steps"),
    (["run", "warmup", "--base.model.placement", "middle"], "--base.model.placement"),
    (["run", "warmup", "--no-such-field", "1"], "--no-such-field"),
    (["run", "warmup", "--base.steps", "1000000000000"], "--base.steps"),
    (["run", "warmup", "--base.model.n-layers", "1000000000"], "--base.model.n-layers"),
    (["run", "warmup", "--base.markov-order", "1000000000"], "--base.markov-order"),
    (["run", "no-such-experiment"], "no experiment named"),
    (["report", "--only", "dropot"], "--only"),
])
def test_bad_flags_are_one_line_naming_the_flag(capsys, argv, flag, monkeypatch):
    monkeypatch.setattr(bench, "run", _never)
    monkeypatch.setattr(running, "run_experiment", _never)
    rc, _out, err = _run(capsys, *argv)
    assert rc == 2
    _one_line_error(err, flag)


def _never(*args, **kwargs):
    raise AssertionError("work started despite a bad argument")


def test_bench_json_must_be_a_file_in_an_existing_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "run", _never)
    for path in (str(tmp_path), str(tmp_path / "nodir" / "x.json")):
        rc, _, err = _run(capsys, "bench", "--json", path)
        assert rc == 2
        _one_line_error(err, "--json")
    monkeypatch.setattr(bench, "run", lambda *a, **k: {"rows": 1, "widths": {}, "x": float("inf")})
    target = tmp_path / "b.json"
    assert _run(capsys, "bench", "--rows", "1", "--widths", "8", "--json", str(target))[0] == 0
    assert '"inf"' in target.read_text()  # the one non-finite convention


@pytest.mark.parametrize("command", [["run", "dropout"], ["report"]])
def test_out_naming_a_file_or_an_impossible_folder(capsys, tmp_path, command, monkeypatch):
    monkeypatch.setattr(running, "run_experiment", _never)
    monkeypatch.setattr(report, "write_report", _never)
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me")
    for out in (a_file, a_file / "below"):
        rc, _, err = _run(capsys, *command, "--out", str(out))
        assert rc == 2
        _one_line_error(err, "--out")
    assert a_file.read_text() == "keep me"


@pytest.mark.parametrize("command,where,make", [
    (["run", "dropout"], "dropout", "file"),
    (["run", "dropout"], "dropout/result.json", "dir"),
    (["run", "dropout"], "dropout/result.json", "fifo"),
    (["report", "--only", "dropout"], "report.html", "fifo"),
    (["report", "--only", "dropout"], "summary.json", "dir"),
    (["report", "--only", "dropout"], "dropout", "file"),
])
def test_an_output_file_that_cannot_be_written_is_refused_before_work(capsys, tmp_path, monkeypatch,
                                                                      command, where, make):
    import os

    monkeypatch.setattr(running, "run_experiment", _never)
    monkeypatch.setattr(report, "write_report", _never)
    out = tmp_path / "out"
    target = out / where
    target.parent.mkdir(parents=True)
    {"file": lambda: target.write_text("keep me"), "dir": target.mkdir,
     "fifo": lambda: os.mkfifo(target)}[make]()
    rc, _, err = _run(capsys, *command, "--out", str(out))
    assert rc == 2
    _one_line_error(err, f"--out ({where if make != 'file' else where + '/result.json'})")
    assert make != "file" or target.read_text() == "keep me"


def test_rejudge_with_nothing_cached_leaves_the_page_alone(capsys, tmp_path, monkeypatch):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.html").write_text("a page")
    (out / "summary.json").write_text("{}")
    rc, _, err = _run(capsys, "report", "--rejudge", "--only", "dropout", "--out", str(out))
    assert rc == 2
    _one_line_error(err, "--rejudge")
    assert ((out / "report.html").read_text() == "a page"
            and (out / "summary.json").read_text() == "{}")


def test_report_with_an_unknown_name_leaves_the_report_alone(capsys, tmp_path, monkeypatch):
    out = tmp_path / "rep"
    assert cli(["report", "--tiny", "--only", "dropout", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert {"report.html", "summary.json"} <= set(before)
    monkeypatch.setattr(running, "run_experiment", _never)
    rc, _, err = _run(capsys, "report", "--tiny", "--only", "dropout", "nope", "--out", str(out))
    assert rc == 2
    _one_line_error(err, "--only")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_run_overrides_any_config_field(tmp_path):
    out = tmp_path / "runs"
    assert cli(["run", "dropout", "--tiny", "--draws", "400", "--p-drops", "0.2", "0.6",
                "--out", str(out)]) == 0
    result = framework.Result.from_json(
        __import__("json").loads((out / "dropout" / "result.json").read_text()))
    assert result.config["draws"] == 400 and result.config["p_drops"] == [0.2, 0.6]
    assert [r["p"] for r in result.data["rows"]] == [0.2, 0.6]
    assert "draws=400" in result.setting


# ---- hypothesis: every flag fed wrong types, non-finite and extreme values ------------------
def _fake_outcome(name, **kwargs):
    module = framework.load(name)
    config = framework.configure(module, kwargs["size"], kwargs["seed"], kwargs["overrides"])
    card = framework.Card(name=name, title="t", citation="cit", claim="c", published="p",
                          method="")
    result = framework.Result(card, "s", "m",
                              [framework.Check(claim="c", published="p", measured="m", rule="r",
                                               passed=True)], config={})
    return framework.Outcome(result, False, Path(kwargs["out_dir"]) / name), config


VALUES = st.one_of(
    st.sampled_from(["-1", "0", "1", "2", "nan", "inf", "-inf", "1e9", "1e308", "-0", "0.5",
                     "1000000000000", "", " ", "none", "True", "x", "--", "ray:", "pool:0"]),
    st.integers(-10**12, 10**12).map(str), st.floats(allow_nan=True).map(repr),
    st.text(max_size=8))

RUN_FLAGS = ["--seed", "--out", "--workers", "--ray", "--draws", "--width", "--p-drops",
             "--fan-out", "--tiny", "--full", "--cache"]
REPORT_FLAGS = ["--seed", "--out", "--workers", "--ray", "--only", "--no-cache", "--rejudge",
                "--tiny"]
BENCH_FLAGS = ["--rows", "--widths", "--repeats", "--ops", "--json", "--no-reference"]
OTHER = {"list": ["-v", "--verbose"], "formats": ["--values", "--policies"],
         "check": ["--no-torch"]}
SWITCHES = {"--tiny", "--full", "--cache", "--no-cache", "--rejudge", "--no-reference", "-v",
            "--verbose", "--policies", "--no-torch"}


def _argv(draw, flags):
    chosen = draw(st.lists(st.sampled_from(flags), max_size=3))
    argv = []
    for flag in chosen:
        argv.append(flag)
        if flag not in SWITCHES:
            argv.append(draw(VALUES))
    return argv


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(["run", "report", "bench", "list", "formats", "check"]))
    flags = {"run": RUN_FLAGS, "report": REPORT_FLAGS, "bench": BENCH_FLAGS}.get(
        command, OTHER.get(command))
    head = [command] + (["dropout"] if command == "run" else [])
    return head + _argv(draw, flags)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=command_lines())
def test_any_flags_exit_2_naming_the_flag_or_succeed(argv, tmp_path_factory, monkeypatch, capsys):
    work = tmp_path_factory.mktemp("cmd")
    watched = work / "input.txt"
    watched.write_text("an input that no command may change")
    digest = hashlib.sha256(watched.read_bytes()).hexdigest()
    calls = []

    def fake_run(name, **kwargs):
        outcome, config = _fake_outcome(name, **kwargs)
        calls.append(config)
        return outcome

    monkeypatch.setattr(running, "run_experiment", fake_run)
    monkeypatch.setattr(report, "write_report", lambda out, **kw: (Path(out) / "r.html", [], 0.0))
    monkeypatch.setattr(bench, "run", lambda *a, **k: {"rows": a[0]})
    monkeypatch.setattr(check, "run_checks", lambda use_torch=True: [])
    monkeypatch.setattr(check, "format_table", lambda rows: "")
    monkeypatch.chdir(work)
    argv = [a.replace("OUT", str(work)) for a in argv]
    try:
        rc = cli(argv)
    except SystemExit as exc:  # --help and the like print and exit 0
        rc = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0], err
        assert not calls  # refused before any work
    else:
        assert rc in (0, None), (argv, rc, err)
    assert hashlib.sha256(watched.read_bytes()).hexdigest() == digest
