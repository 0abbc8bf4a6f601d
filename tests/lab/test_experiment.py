"""The lab's framework: the verdict rule, results as JSON, configuration sizes and overrides,
the setting written from the config, caching and re-judging, and the shape of every experiment
module (card, config, measure, judge, plot; no function over 60 lines)."""

import ast
import dataclasses
import inspect
import json
import math

import _fake_experiment as fake
import numpy as np
import pytest

from normlab._files import dumps_json, number
from normlab.lab import framework as E


def _check(passed):
    return E.Check(claim="c", published="p", measured="m", rule="r", passed=passed)


def _card():
    return E.Card(name="n", title="t", citation="cit", claim="claim", published="pub",
                  method="how", explanation="why", short="in short")


@pytest.mark.parametrize("passes, verdict", [
    ([True, True], E.REPRODUCED),
    ([True, False], E.PARTLY),
    ([False, False], E.NOT_REPRODUCED),
    ([True, None], E.REPRODUCED),  # shown rows are not counted
    ([False, None], E.NOT_REPRODUCED),
    ([None, True, False, True], E.PARTLY),
])
def test_verdict_rule(passes, verdict):
    assert E.verdict_of([_check(p) for p in passes]) == verdict


def _inconclusive():
    return E.Check(claim="c", published="p", measured="m", rule="r", passed=None, inconclusive=True)


def _identity(holds):
    return E.Check(claim="c", published="p", measured="m", rule="r", passed=holds, kind="identity")


@pytest.mark.parametrize("checks, verdict", [
    ([_inconclusive(), _inconclusive()], E.INCONCLUSIVE),
    ([_check(True), _inconclusive()], E.PARTLY),
    ([_check(False), _inconclusive()], E.NOT_REPRODUCED),
    ([_check(True), _identity(False)], E.REPRODUCED),  # identities are counted apart
    ([_check(False), _identity(True)], E.NOT_REPRODUCED),
])
def test_verdict_rule_with_intervals_and_identities(checks, verdict):
    assert E.verdict_of(checks) == verdict
    assert [c.status for c in checks if c.inconclusive] == [E.INCONCLUSIVE] * sum(
        c.inconclusive for c in checks)


def test_identity_and_inconclusive_status():
    assert _identity(True).status == "holds" and _identity(False).status == "FAIL"
    assert not _identity(True).counted and _inconclusive().counted
    with pytest.raises(ValueError, match="inconclusive"):
        E.Check(claim="c", published="p", measured="m", rule="r", passed=True, inconclusive=True)


def test_decided_check_reads_the_interval():
    from normlab.lab.stats import Interval
    iv = Interval(1.0, 0.5, 1.5, 4, "mean +- 2 se")
    above = E.Check.decided(claim="c", published="p", interval=iv, threshold=0.2, side="above")
    straddle = E.Check.decided(claim="c", published="p", interval=iv, threshold=1.0, side="above")
    below = E.Check.decided(claim="c", published="p", interval=iv, threshold=2.0, side="below")
    assert above.passed is True and straddle.inconclusive and below.passed is True
    assert E.Check.decided(claim="c", published="p", interval=iv, threshold=0.2,
                           side="below").passed is False
    assert above.interval == [0.5, 1.5] and "[0.5, 1.5]" in above.measured and "> 0.2" in above.rule
    back = E.Result.from_json(E.Result(_card(), "s", "m", [straddle]).to_json())
    assert back.checks[0].inconclusive and back.verdict == E.INCONCLUSIVE


def test_verdict_needs_a_counted_check():
    with pytest.raises(ValueError, match="counted"):
        E.verdict_of([_check(None)])


def test_result_json_round_trip():
    r = E.Result(_card(), "set", "meas", [_check(True), _check(None)],
                 data={"a": np.arange(3.0), "b": np.float32(1.5), "inf": np.inf, "i": np.int64(2)})
    d = json.loads(json.dumps(r.to_json(), allow_nan=False))  # strict JSON: no NaN/Infinity
    assert d["verdict"] == E.REPRODUCED
    back = E.Result.from_json(d)
    assert back.checks[1].passed is None and back.verdict == r.verdict
    assert back.data["a"] == [0.0, 1.0, 2.0] and back.data["i"] == 2
    assert math.isinf(number(back.data["inf"]))
    assert list(d)[:8] == ["name", "title", "claim", "citation", "published", "setting",
                           "measured", "checks"]  # the card's texts at the top, in file order
    assert (d["title"], d["explanation"], d["short"]) == ("t", "why", "in short")
    assert back.card == r.card._replace(method="") and back.title == "t"  # no method in a file
    assert back.to_json() == d


def test_fmt():
    assert E.fmt(0.0) == "0" and E.fmt(1.23456) == "1.23" and E.fmt(1e-7) == "1.00e-07"


def test_configure_sizes_and_seed(with_fake):
    m = E.load("fake")
    assert E.configure(m, "quick").value == 1.0
    assert E.configure(m, "tiny").value == 2.0
    assert E.configure(m, "full", seed=5).seed == 5
    with pytest.raises(ValueError, match="size"):
        E.configure(m, "huge")


def test_unknown_experiment():
    with pytest.raises(KeyError, match="no experiment named"):
        E.load("no-such-thing")


def test_registry_names_match_modules():
    for name in E.registry():
        m = E.load(name)
        assert m.CARD.name == name and m.CARD.title and m.CARD.citation and m.CARD.method
        assert m.__name__.rsplit(".", 1)[1] == name.replace("-", "_")
        assert {"tiny", "quick", "full"} <= set(m.SIZES)
        cfg = m.Config()
        assert hasattr(cfg, "seed")
        for size in ("tiny", "full"):  # every override names a real field
            E.configure(m, size)


def test_cache_is_reused_and_invalidated(with_fake, tmp_path):
    o1 = E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    assert not o1.reused and fake.CALLS["n"] == 1
    assert (tmp_path / "fake" / "result.json").is_file()
    assert (tmp_path / "fake" / "fake.png").is_file()
    o2 = E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    assert o2.reused and fake.CALLS["n"] == 1
    assert o2.result.to_json() == o1.result.to_json()
    (tmp_path / "fake" / "fake.png").unlink()  # a missing figure is redrawn, not recomputed
    o3 = E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    assert o3.reused and (tmp_path / "fake" / "fake.png").is_file() and fake.CALLS["n"] == 1
    E.run_experiment("fake", size="quick", out_dir=tmp_path)  # another configuration
    assert fake.CALLS["n"] == 2
    E.run_experiment("fake", size="quick", out_dir=tmp_path, use_cache=False)
    assert fake.CALLS["n"] == 3


def test_a_corrupt_cache_file_is_recomputed(with_fake, tmp_path):
    E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    (tmp_path / "fake" / "result.json").write_text("{not json")
    o = E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    assert not o.reused and fake.CALLS["n"] == 2


def test_overrides_reach_nested_fields_and_unknown_ones_are_refused():
    m = E.load("warmup")
    cfg = E.configure(m, "tiny", overrides={"base.model.d_model": 24, "seeds": 2})
    assert cfg.base.model.d_model == 24 and cfg.seeds == 2 and cfg.base.steps == 40
    assert m.Config().base.model.d_model == 32  # the default is not changed
    with pytest.raises(ValueError, match="did you mean 'seeds'"):
        E.configure(m, "tiny", overrides={"seds": 2})
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        E.configure(m, "tiny", overrides={"base.steps": 0})  # TrainConfig's own check


def test_the_setting_is_written_from_the_config(with_fake):
    r = E.run_experiment("fake", size="tiny").result
    assert r.setting == "It returns its config's value. tiny size: value=2, seed=0."
    m = E.load("dropout")
    text = E.setting_of(m, E.configure(m, "full"), "full")
    assert "draws=1000000" in text and text.startswith(m.CARD.method)


def test_rejudge_reads_the_cached_measurement_and_measures_nothing(with_fake, tmp_path,
                                                                    monkeypatch):
    E.run_experiment("fake", size="tiny", out_dir=tmp_path)
    assert fake.CALLS["n"] == 1

    def stricter(data, config):
        return [E.Check(claim="value is above 5", published="> 5", measured=f"{data['value']}",
                        rule="> 5", passed=data["value"] > 5)]

    monkeypatch.setattr(fake, "judge", stricter)
    o = E.rejudge("fake", tmp_path)
    assert fake.CALLS["n"] == 1 and o.result.verdict == E.NOT_REPRODUCED
    assert o.result.data == {"value": 2.0} and o.result.checks[0].claim == "value is above 5"
    on_disk = json.loads((tmp_path / "fake" / "result.json").read_text())
    assert on_disk["verdict"] == E.NOT_REPRODUCED and on_disk["size"] == "tiny"
    with pytest.raises(FileNotFoundError, match="no cached result"):
        E.rejudge("fake", tmp_path / "elsewhere")


@pytest.mark.parametrize("name", ["dropout", "residual-growth", "precision-basics"])
def test_a_rejudged_result_equals_the_fresh_one(name, tmp_path):
    """Judging the cached (JSON) data gives the fresh result's rows: judge reads only data (the
    cheap experiments; test_port holds every experiment's fresh numbers)."""
    fresh = E.run_experiment(name, size="tiny", out_dir=tmp_path, plots=False).result
    again = E.rejudge(name, tmp_path).result
    assert [dataclasses.asdict(c) for c in again.checks] == [
        dataclasses.asdict(c) for c in fresh.checks]
    assert again.measured == fresh.measured


@pytest.mark.parametrize("name", list(E.registry()))
def test_an_experiment_reads_card_config_measure_judge_plot(name):
    m = E.load(name)
    tree = ast.parse(inspect.getsource(m))
    order = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
             and n.name in ("Config", "measure", "judge", "headline", "plot")]
    assert order == ["Config", "measure", "judge", "headline", "plot"]
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 60]
    assert not long, long
    assert not any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Result"
                   for n in ast.walk(tree))  # the framework builds the Result


def test_a_config_comes_back_from_its_json_form():
    for name in ("invariances-and-cost", "warmup"):  # tuples of tuples; a nested TrainConfig
        m = E.load(name)
        for size in E.SIZES:
            config = E.configure(m, size)
            back = json.loads(dumps_json(dataclasses.asdict(config)))  # as result.json holds it
            assert E.config_from_json(m.Config, back) == config


def test_a_new_experiment_in_the_lab_style_is_short_and_runs(monkeypatch, tmp_path):
    from pathlib import Path

    from normlab.lab import experiments

    source = Path(__file__).with_name("_shift_experiment.py")
    assert len(source.read_text().splitlines()) < 150
    monkeypatch.setattr(experiments, "EXPERIMENTS",
                        {**experiments.EXPERIMENTS, "shift-and-scale": "_shift_experiment"})
    o = E.run_experiment("shift-and-scale", size="tiny", out_dir=tmp_path)
    assert o.result.verdict == E.REPRODUCED
    assert (tmp_path / "shift-and-scale" / "shift_and_scale.png").is_file()
    assert "tiny size: width=16, tokens=16" in o.result.setting
    test_an_experiment_reads_card_config_measure_judge_plot("shift-and-scale")
