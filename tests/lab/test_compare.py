"""``normlab.lab.compare``: two results compared bit for bit, and the restructured lab checked
against a tiny-size report made with the code before the restructuring (the fixture
``fixtures/tiny-before/``: each experiment's ``result.json`` at ``--tiny``, made by ``normlab
report --tiny`` at main da85eb3 with today's reduction flags ``kernels._common.REDUCE``, figures
and sweep stores left out). The fixture was made under
:mod:`normlab.portable`'s environment, and the experiments are rerun under it, in a process of their
own with an empty numba cache: the last bits depend on the instruction set the libraries choose."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from normlab import portable
from normlab.lab import compare as C
from normlab.lab import framework as E

BEFORE = Path(__file__).with_name("fixtures") / "tiny-before"
# a configuration field added since the fixture, at its default, changes no number measured
_DEFAULTS = json.loads((Path(__file__).with_name("data") / "config_defaults.json").read_text())
CHEAP = ["output-change", "batchnorm-vs-layernorm", "invariances-and-cost", "dropout"]


def test_wall_clock_timings_are_set_apart_and_every_other_number_still_counts():
    row = {"name": "invariances-and-cost", "verdict": "reproduced", "measured": "saves 40%",
           "data": {"speed": [1.0], "table": [0.5]},
           "checks": [{"claim": "RMSNorm takes less time per training step than LayerNorm",
                       "measured": "40%"},
                      {"claim": "the invariance table", "measured": "24/24"}]}
    other = json.loads(json.dumps(row))
    other.update(verdict="partly reproduced", measured="saves 30%")
    other["data"]["speed"] = [2.0]
    other["checks"][0]["measured"] = "30%"
    diffs, timed = C.experiment_differences("invariances-and-cost", row, other, "x")
    assert diffs == [] and len(timed) == 4, timed
    other["data"]["table"] = [0.25]
    other["checks"][1]["measured"] = "23/24"
    diffs, _ = C.experiment_differences("invariances-and-cost", row, other, "x")
    assert diffs == ["x.data.table[0]: 0.5 != 0.25", "x.checks[0].measured: '24/24' != '23/24'"]
    assert C.experiment_differences("dropout", row, other, "x")[1] == []  # not a timed one
MEASURED = sorted(p.parent.name for p in BEFORE.glob("*/result.json"))


def test_only_wall_times_the_timestamp_and_hashes_are_ignored():
    a = {"generated": "x", "wall_s": 1.0, "cache_key": "a", "figures": ["f.png"], "reused": [],
         "tally": {"n": 1}, "rows": [{"v": 0.1, "wall_s_this_invocation": 3}]}
    b = {"generated": "y", "wall_s": 2.0, "cache_key": "b", "figures": [], "reused": ["x"],
         "tally": {"n": 1}, "rows": [{"v": 0.1, "wall_s_this_invocation": 4}]}
    assert C.differences(a, b) == []
    b["rows"][0]["v"] = math.nextafter(0.1, 1.0)  # one bit of one number
    assert C.differences(a, b) == ["$.rows[0].v: 0.1 != 0.10000000000000002"]
    assert C.differences({"n": 1}, {"n": 1.0}) == ["$.n: 1 != 1.0"]  # an int is not a float
    assert C.differences({"n": [1]}, {"n": [1, 2]}) == ["$.n: 1 items != 2 items"]
    assert C.differences({"a": 1}, {}) == ["$.a: missing in the second"]
    assert C.differences({"v": "nan"}, {"v": "nan"}) == []  # _files' non-finite convention


def test_the_command_compares_folders_and_files(tmp_path, capsys):
    for side in ("a", "b"):
        (tmp_path / side / "x").mkdir(parents=True)
        (tmp_path / side / "summary.json").write_text(json.dumps({"generated": side, "n": 1}))
        (tmp_path / side / "x" / "result.json").write_text(json.dumps({"data": [1.5]}))
    assert C.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "identical" in capsys.readouterr().out
    (tmp_path / "b" / "x" / "result.json").write_text(json.dumps({"data": [1.25]}))
    assert C.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "x.data[0]: 1.5 != 1.25" in capsys.readouterr().out
    assert C.main([str(tmp_path / "a"), str(tmp_path / "a" / "summary.json")]) == 2
    assert C.main([str(tmp_path / "a" / "summary.json"), str(tmp_path / "b" / "summary.json")]) == 0


# The experiments whose tiny measurement was changed on purpose since the fixture, with why: the
# verdicts' rework (faithful set-ups, premises, seeds chosen from pilots) changed what they
# measure. Every other experiment of the fixture measures the same numbers bit for bit; its rows
# may differ, since the rules now have the claims' forms and Student-t intervals.
CHANGED: dict[str, str] = {
    "output-change": "three seeds per placement at tiny: the model comparison and the premise "
                     "are per seed (0d03123)",
    "dropout": "three seeds at tiny for the Student-t intervals (0d03123)",
    "attention-logit-growth": "three seeds per arm at tiny; the soft-cap read from the model's "
                              "attention (1a7119f)",
    "dyt": "the paper's LLaMA recipe (alpha0 per position, a learnable embedding scalar) and "
           "three seeds (1f22642)",
    "invariances-and-cost": "the whole training step's model in the configuration: the speed "
                            "claim reads the step's time, not the norm op's (ca8a9fa)",
    "warmup": "Xavier init as the other placement experiments and the learning rates 1e-3, "
              "3e-3, 1e-2 (94b2ac3, 6787028)",
    "output-logit-divergence": "premises first: the no-fix arm's loss does not degrade late at "
                               "the tiny size, so the fix arms are not run",
}


def _measure(out: Path, names: list[str]) -> None:
    """Each experiment measured at ``--tiny`` into ``out/NAME``."""
    for name in names:
        E.run_experiment(name, size="tiny", out_dir=out, plots=False)


@pytest.fixture(scope="module")
def after(tmp_path_factory):
    """The fixture's experiments measured again at ``--tiny``, under the portable environment, in
    one process; ``after(name)`` is the differences of the measurement (its data and its
    configuration, a timed experiment's times set apart) from the fixture's (empty when
    equal)."""
    why = portable.unsupported()
    if why is not None:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("tiny-after")
    env = portable.environ()
    env["NUMBA_CACHE_DIR"] = str(tmp / "numba")
    subprocess.run([sys.executable, __file__, str(tmp), *MEASURED], env=env, check=True,
                   timeout=1200)

    def differences(name: str) -> list[str]:
        rows = [json.loads(p.read_text()) for p in (BEFORE / name / "result.json",
                                                     tmp / name / "result.json")]
        a, b = ({"data": r["data"], "config": r["config"]} for r in rows)
        b["config"] = without_new_defaults(a["config"], b["config"])
        return C.experiment_differences(name, a, b, "$")[0]  # wall-clock times set apart

    return differences


def without_new_defaults(before, after):
    """``after`` less the configuration fields ``before`` lacks that hold their default
    (tests/lab/data/config_defaults.json: a field is added there with its default)."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return after
    defaults = {k: v for part in ("TrainConfig", "GPTConfig") for k, v in _DEFAULTS[part].items()}
    return {k: without_new_defaults(before[k], v) if k in before else v
            for k, v in after.items()
            if k in before or k not in defaults or v != defaults[k]}


def test_a_new_field_at_its_default_is_no_difference_and_any_other_is():
    before = {"base": {"lr": 0.01, "model": {"norm": "layernorm"}}}
    grown = {"base": {"lr": 0.01, "model": {"norm": "layernorm", "derf_alpha": 0.5}}}
    assert without_new_defaults(before, grown) == before
    off = {"base": {"lr": 0.01, "model": {"norm": "layernorm", "derf_alpha": 0.25}}}
    assert without_new_defaults(before, off) == off
    assert without_new_defaults(before, {"base": {"lr": 0.01, "model": {}}}) != before


@pytest.mark.parametrize("name", [n for n in CHEAP if n not in CHANGED])
def test_a_tiny_measurement_is_the_one_before_bit_for_bit(name, after):
    """Every number of the measured data and the configuration equal the fixture's."""
    assert after(name) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MEASURED if n not in CHEAP and n not in CHANGED])
def test_every_other_tiny_measurement_is_the_one_before_bit_for_bit(name, after):
    assert after(name) == []


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_a_measurement_listed_as_changed_did_change(name, after):
    """The list of changed measurements cannot go stale: each one differs from the fixture."""
    assert name in MEASURED and after(name) != []


def test_the_fixture_holds_the_cheap_experiments():
    assert set(CHEAP) <= set(MEASURED), MEASURED


def test_a_report_still_running_is_compared_on_what_it_finished(tmp_path, capsys):
    """The committed summary against a folder without summary.json: the rows of the finished
    experiments (made from their result.json as the report makes them) are compared."""
    from normlab.lab import results as R
    from normlab.lab.framework import Result

    names = ["dropout", "output-change"]
    rows = [R.experiment_row(n, Result.from_json(json.loads(
        (BEFORE / n / "result.json").read_text())), "") for n in names]
    summary = tmp_path / "quick.json"
    summary.write_text(json.dumps({"experiments": rows}))
    (tmp_path / "rep" / "dropout").mkdir(parents=True)
    (tmp_path / "rep" / "dropout" / "result.json").write_bytes(
        (BEFORE / "dropout" / "result.json").read_bytes())
    out = C.compare(summary, tmp_path / "rep")
    assert list(out) == [] and out.missing == ["output-change"]
    rows[0]["verdict"] = "reproduced"
    summary.write_text(json.dumps({"experiments": rows}))
    assert C.compare(summary, tmp_path / "rep") == [
        "summary.dropout.verdict: 'reproduced' != 'identities hold'"]
    assert C.main([str(summary), str(tmp_path / "rep")]) == 1
    assert "not finished" in capsys.readouterr().out


if __name__ == "__main__":
    _measure(Path(sys.argv[1]), sys.argv[2:])
