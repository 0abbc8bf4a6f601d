"""``normlab report``: a well-formed, self-contained page; an interrupted report resumes."""

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import _fake_experiment as fake
import pytest

from normlab.lab import experiments
from normlab.lab.cli import main as cli
from normlab.lab.report_page import markdown_html
from normlab.lab.reporting import write_report

REAL = ["dropout", "batchnorm-vs-layernorm"]  # two cheap real ones
ROOT = Path(__file__).resolve().parents[2]


def _parse(page: str) -> ET.Element:
    assert page.startswith("<!DOCTYPE html>")
    return ET.fromstring(page[len("<!DOCTYPE html>"):])  # raises on unbalanced tags


def test_report_is_well_formed_and_self_contained(tmp_path):
    path, entries, _ = write_report(tmp_path, size="tiny", names=REAL, show_progress=False)
    page = path.read_text(encoding="utf-8")
    root = _parse(page)
    # no external URL
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", page, re.IGNORECASE)
    imgs = root.findall(".//img")
    n_figures = sum(len(r.figures) for _, r, _, _ in entries)
    assert n_figures >= len(REAL) and len(imgs) == n_figures + 1  # and the forest plot, first
    assert "forest plot" in imgs[0].get("alt") and (tmp_path / "verdicts.png").is_file()
    assert all(img.get("src").startswith("data:image/png;base64,") for img in imgs)
    # the page states the confidence level and the verdict rule before the table
    from normlab.lab.framework import VERDICT_RULE
    from normlab.lab.results import CONFIDENCE

    head = page[:page.index("<table>")]
    assert CONFIDENCE.replace("'", "&#x27;") in head and "Student-t" in head
    assert VERDICT_RULE.replace("'", "&#x27;") in head
    for tag in ("script", "link", "iframe"):
        assert root.find(f".//{tag}") is None
    # the page opens with the summary table: one row per experiment, with a verdict
    first_table = root.find(".//table")
    assert len(first_table.findall("tr")) == 1 + len(REAL)
    for _, r, _, _ in entries:
        assert r.verdict in page and r.title in page
    assert (tmp_path / "summary.json").is_file()
    # each experiment links to the companion notebooks that teach it, and they exist
    for name in REAL:
        links = root.findall(f".//section[@id='{name}']//a")
        assert links, f"{name}: no notebook link"
        for a in links:
            assert (ROOT / "notebooks" / a.get("href").removeprefix("../notebooks/")).is_file()


def test_interrupted_report_resumes(with_fake, tmp_path):
    names = ["dropout", "fake"]
    fake.INTERRUPT["on"] = True
    with pytest.raises(KeyboardInterrupt):  # serial: in names' order, dropout first
        write_report(tmp_path, size="tiny", names=names, show_progress=False, executor="serial")
    assert (tmp_path / "dropout" / "result.json").is_file()  # finished before the interrupt
    assert not (tmp_path / "fake" / "result.json").exists()
    assert not (tmp_path / "report.html").exists()
    fake.INTERRUPT["on"] = False
    _, _entries, _ = write_report(tmp_path, size="tiny", names=names, show_progress=False)
    assert fake.CALLS["n"] == 2
    assert (tmp_path / "report.html").is_file()
    # a third run reuses both: nothing is recomputed
    write_report(tmp_path, size="tiny", names=names, show_progress=False)
    assert fake.CALLS["n"] == 2


def test_in_process_experiments_measured_beside_the_others_give_the_serial_numbers(tmp_path):
    from normlab.lab.reporting import lanes

    names = ["dropout", "rmsnorm-quality", "layernorm-jacobian", "batchnorm-vs-layernorm"]
    assert lanes(names, "pool:2") == (["rmsnorm-quality"], ["dropout", "layernorm-jacobian",
                                                            "batchnorm-vs-layernorm"], [])
    assert lanes(names, "pool:1") == ([], [], names)
    assert lanes(names, "serial")[1] == lanes(names, "ray:auto")[1] == []
    cheap = ["layernorm_jacobian", "batchnorm-vs-layernorm"]  # module names work too
    summaries = []
    for executor in ("pool:2", "serial"):
        out = tmp_path / executor.replace(":", "")
        _, entries, _ = write_report(out, size="tiny", names=cheap, show_progress=False,
                                     executor=executor)
        assert [n for n, *_ in entries] == cheap and all(r is not None for _, r, _, _ in entries)
        summaries.append(json.loads((out / "summary.json").read_text()))
        assert summaries[-1]["reused"] == []  # measured in this invocation, in either process
    aside, serial = ([{k: e[k] for k in ("name", "verdict", "measured", "checks")}
                      for e in s["experiments"]] for s in summaries)
    assert aside == serial
    # a failure beside the others is reported on the page, as one in the calling process is
    path, entries, _ = write_report(tmp_path / "bad", size="tiny", names=cheap[:1], seed=-1,
                                    show_progress=False, executor="pool:2")
    assert entries[0][1] is None and "seed must be an integer >= 0" in entries[0][3]
    assert "measured beside the others, failed" in path.read_text()


def test_a_failing_experiment_is_reported_not_fatal(with_fake, tmp_path, monkeypatch):
    def boom(config, ctx):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(fake, "measure", boom)
    path, entries, _ = write_report(tmp_path, size="tiny", names=["fake", "dropout"],
                                    show_progress=False)
    page = path.read_text()
    _parse(page)
    assert "broken on purpose" in page
    assert entries[0][1] is None and entries[1][1] is not None


def test_cli_list_run_report(tmp_path, capsys):
    assert cli(["list"]) == 0
    out = capsys.readouterr().out
    for name in experiments.EXPERIMENTS:
        assert name in out
    assert cli(["run", "dropout", "--tiny", "--out", str(tmp_path / "runs"), "--seed", "3"]) == 0
    assert (tmp_path / "runs" / "dropout" / "result.json").is_file()
    assert cli(["report", "--tiny", "--only", "dropout", "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.html").is_file()
    assert cli(["run", "no-such-experiment", "--tiny", "--out", str(tmp_path)]) == 2


def test_notes_are_embedded_as_html(tmp_path):
    path, _entries, _ = write_report(tmp_path, size="tiny", names=["batchnorm-vs-layernorm"],
                                     show_progress=False)
    root = _parse(path.read_text(encoding="utf-8"))
    note = root.find(".//div[@class='note']")
    assert note is not None and note.find(".//li") is not None
    assert "Listing 16.3" in "".join(note.itertext())


def test_markdown_notes():
    html = markdown_html("Intro `x < y`.\n\n- one\n  continued\n- two\n\nAfter.")
    assert html == ("<p>Intro <code>x &lt; y</code>.</p><ul><li>one continued</li>"
                    "<li>two</li></ul><p>After.</p>")


def test_rejudge_from_the_command_line(with_fake, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "rep")
    assert cli(["report", "--tiny", "--only", "fake", "--out", out]) == 0
    assert fake.CALLS["n"] == 1
    assert "reproduced" in (tmp_path / "rep" / "summary.json").read_text()
    monkeypatch.setattr(fake, "judge", lambda data, config: [
        fake.Check(claim="value above 5", published="> 5", measured=str(data["value"]), rule="> 5",
                   passed=data["value"] > 5)])
    assert cli(["report", "--rejudge", "--only", "fake", "--out", out]) == 0
    assert fake.CALLS["n"] == 1  # nothing measured again
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["experiments"][0]["verdict"] == "not reproduced"
    assert "value above 5" in (tmp_path / "rep" / "report.html").read_text()
    assert cli(["report", "--rejudge", "--only", "fake", "--seed", "3", "--out", out]) == 2
    assert "--rejudge" in capsys.readouterr().err


def test_the_chapters_differences_read_this_reports_measurements():
    """The section 'Where the chapters and the sources differ' shows, for each row with an
    experiment, the measured text and status of the named check from this report's results, and
    every row's check names a row (a register id) its experiment really produces."""
    from normlab.lab import framework as F
    from normlab.lab.chapters import DIFFERENCES
    from normlab.lab.report_page import differences_html

    for d in DIFFERENCES:  # each named check exists in its experiment's judge
        if d.experiment:
            r = F.run_experiment(d.experiment, size="tiny", seed=0, plots=False).result
            hits = [c for c in r.checks if c.id in d.check]
            assert len(hits) == 1, d
            page = differences_html({d.experiment: r})
            assert _parse_fragment(page) is not None
            assert html.escape(hits[0].measured.split(";")[0]) in page
            assert f"({hits[0].status})" in page
    assert "not run in this report" in differences_html({})


def _parse_fragment(html_text: str):
    return ET.fromstring(f"<div>{html_text}</div>")


def test_an_interrupted_full_report_keeps_its_finished_training_runs(monkeypatch, tmp_path):
    """The size of record is resumable run by run: a full report stopped after its first training
    run keeps it in the sweep store, and the next invocation trains only the other one; the
    result equals an uninterrupted report's, number for number."""
    import _fake_training_experiment as ft

    import normlab.train
    from normlab.lab import experiments

    reg = {**experiments.EXPERIMENTS, "fake-training": "_fake_training_experiment"}
    monkeypatch.setattr(experiments, "EXPERIMENTS", reg)
    trained = []
    one, many = normlab.train.train, normlab.train.train_ensemble

    def train(cfg, *a, **kw):
        trained.append(cfg.seed)
        return one(cfg, *a, **kw)

    def train_ensemble(cfgs, *a, **kw):
        trained.extend(c.seed for c in cfgs)
        return many(cfgs, *a, **kw)

    monkeypatch.setattr(normlab.train, "train", train)
    monkeypatch.setattr(normlab.train, "train_ensemble", train_ensemble)
    ft.INTERRUPT["on"] = True
    try:
        with pytest.raises(KeyboardInterrupt):
            write_report(tmp_path / "a", size="full", names=["fake-training"],
                         show_progress=False)
    finally:
        ft.INTERRUPT["on"] = False
    assert len(trained) == 1 and not (tmp_path / "a" / "fake-training" / "result.json").exists()
    _, entries, _ = write_report(tmp_path / "a", size="full", names=["fake-training"],
                                 show_progress=False)
    assert len(trained) == 2  # the first run came from the store
    _, fresh, _ = write_report(tmp_path / "b", size="full", names=["fake-training"],
                               show_progress=False)
    assert entries[0][1].data == fresh[0][1].data and entries[0][1].size == "full"


def test_a_full_report_resumes_across_a_change_of_its_measuring_code(monkeypatch, tmp_path):
    """An experiment's sweep store is keyed by the code that trains (cache.training_hash),
    not by its result's cache key: after a change to what measures, judges or draws (the package
    hash every cache key holds), the next report reads the finished runs back and makes only the
    result again; a change to the code that trains trains again, with the old store removed."""
    import _fake_training_experiment  # noqa: F401

    import normlab.train
    from normlab.lab import cache, experiments
    from normlab.lab import framework as F

    reg = {**experiments.EXPERIMENTS, "fake-training": "_fake_training_experiment"}
    monkeypatch.setattr(experiments, "EXPERIMENTS", reg)
    trained = []
    one, many = normlab.train.train, normlab.train.train_ensemble
    monkeypatch.setattr(normlab.train, "train",
                        lambda cfg, *a, **kw: trained.append(cfg) or one(cfg, *a, **kw))
    monkeypatch.setattr(normlab.train, "train_ensemble",
                        lambda cfgs, *a, **kw: trained.extend(cfgs) or many(cfgs, *a, **kw))

    def report():
        return write_report(tmp_path, size="full", names=["fake-training"],
                            show_progress=False)[1][0][1]

    first = report()
    n, sweep = len(trained), tmp_path / "fake-training" / "sweep"
    assert n == 2 and [d.name for d in sweep.iterdir()] == [F.training_hash()]
    monkeypatch.setattr(cache, "package_hash", lambda: "another report")
    again = report()
    assert again.cache_key != first.cache_key and len(trained) == n  # runs read back
    assert again.data == first.data
    monkeypatch.setattr(cache, "training_hash", lambda: "another trainer")  # within the package
    monkeypatch.setattr(cache, "package_hash", lambda: "another package")
    assert report().data == first.data and len(trained) == 2 * n  # trained again
    assert [d.name for d in sweep.iterdir()] == ["another trainer"]
