"""The framework's one validation hook (``framework.check_config``): an experiment's cross-field
rules and the memory budget refuse a configuration by field name before ``measure`` runs, at the
command line like any field error; ``--rejudge`` validates every cached result first and leaves
the page and the cache as they were when one is damaged."""

import json

import _fake_experiment as fake
import pytest

from normlab.lab import framework as E
from normlab.lab.cli import main as cli
from normlab.train import budget
from normlab.train.budget import MemoryBudgetError

GB = 2**30


def test_a_size_flag_beyond_the_memory_budget_is_refused_by_name(tmp_path, capsys, monkeypatch):
    """``normlab run dropout --draws 10000000`` asks for about 25 GB: refused before any work."""
    monkeypatch.setattr(budget, "available_memory", lambda: 16 * GB)
    out = tmp_path / "run"
    assert cli(["run", "dropout", "--draws", "10000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "draws 10000000" in err and "lower draws" in err and "--draws" in err, err
    assert not out.exists()  # nothing written, nothing measured


def test_the_budget_reads_the_experiments_estimate():
    m = E.load("dropout")
    quick = E.configure(m, "quick")
    E.check_budget(m, quick, available=1 * GB)  # the quick size fits in a gigabyte
    from normlab.train.config import with_overrides

    huge = with_overrides(quick, {"draws": 10_000_000})
    with pytest.raises(MemoryBudgetError, match=r"^draws 10000000: .* lower draws"):
        E.check_budget(m, huge, available=16 * GB)
    with pytest.raises(MemoryBudgetError, match=r"^fan_out"):
        E.check_budget(m, with_overrides(quick, {"fan_out": 10**6}), available=4 * GB)


def test_a_training_recipe_beyond_the_budget_is_refused_by_its_field():
    m = E.load("warmup")
    config = E.configure(m, "tiny")
    from normlab.train.config import with_overrides

    with pytest.raises(MemoryBudgetError, match=r"base.steps"):
        E.check_budget(m, with_overrides(config, {"base.steps": 10**9}), available=4 * GB)


@pytest.mark.parametrize("name, flags, says", [
    ("attention-logit-growth", ["--seeds", "1"], "seeds must be >= 2"),
    ("attention-logit-growth", ["--softcap-seeds", "9", "--seeds", "3"], "softcap_seeds"),
    ("output-logit-divergence", ["--other-seeds", "99"], "other_seeds must be at most"),
    ("output-change", ["--sublayers", "3"], "sublayers must be even"),
    ("gradients-at-init", ["--profile-depth", "7"], "profile_depth"),
    ("precision-recipes", ["--master-seeds", "1", "--seeds", "2"], "master_seeds"),
    ("lr-sensitivity-recipes", ["--head-dim", "7"], "head_dim"),
])
def test_a_cross_field_rule_is_refused_at_the_command_line(name, flags, says, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["run", name, "--tiny", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert not out.exists()


def test_configure_calls_the_hook_and_validate_is_the_only_place(monkeypatch):
    """The rule lives in ``validate``: configure refuses; measure does not re-check."""
    m = E.load("attention-logit-growth")
    with pytest.raises(ValueError, match="seeds must be >= 2"):
        E.configure(m, "tiny", overrides={"seeds": 1})
    import inspect

    assert "seeds must be" not in inspect.getsource(m.measure)


def _report(tmp_path):
    out = tmp_path / "rep"
    assert cli(["report", "--tiny", "--only", "fake", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("damage, says", [
    (lambda d: d["config"].update(value=-1.0), "its config is refused by fake's checks"),
    (lambda d: d["data"].pop("value"), "its data does not have fake's schema"),
    (lambda d: d.pop("checks") and d.update(name=7, checks="x"), "not a readable result"),
])
def test_rejudge_leaves_the_page_and_the_cache_as_they_were_when_one_is_damaged(
        with_fake, tmp_path, capsys, damage, says):
    out = _report(tmp_path)
    path = out / "fake" / "result.json"
    d = json.loads(path.read_text())
    damage(d)
    path.write_text(json.dumps(d))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert cli(["report", "--rejudge", "--only", "fake", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and str(path) in err and err.count("\n") == 1, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert fake.CALLS["n"] == 1  # nothing measured


def test_rejudge_of_an_intact_cache_still_rewrites(with_fake, tmp_path):
    out = _report(tmp_path)
    assert cli(["report", "--rejudge", "--only", "fake", "--out", str(out)]) == 0
    assert E.judge_cached("fake", out).verdict == "reproduced"
