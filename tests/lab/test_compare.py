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
CHEAP = ["output-change", "batchnorm-vs-layernorm", "invariances-and-cost", "dropout"]


def test_wall_clock_timings_are_set_apart_and_every_other_number_still_counts():
    row = {"name": "invariances-and-cost", "verdict": "reproduced", "measured": "saves 40%",
           "data": {"speed": [1.0], "table": [0.5]},
           "checks": [{"claim": "RMSNorm is faster than LayerNorm", "measured": "40%"},
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


def _measure(out: Path, names: list[str]) -> None:
    """Each experiment measured at ``--tiny`` into ``out/NAME``, and judged again from the
    fixture's data with today's code into ``out/judged/NAME``."""
    for name in names:
        E.run_experiment(name, size="tiny", out_dir=out, plots=False)
        (out / "judged" / name).mkdir(parents=True)
        (out / "judged" / name / "result.json").write_bytes(
            (BEFORE / name / "result.json").read_bytes())
        again = E.judge_cached(name, out / "judged").to_json()
        (out / "judged" / name / "result.json").write_text(json.dumps(again))


@pytest.fixture(scope="module")
def after(tmp_path_factory):
    """The fixture's experiments measured again at ``--tiny``, under the portable environment, in
    one process; ``after(name)`` is the differences from the fixture (empty when equal)."""
    why = portable.unsupported()
    if why is not None:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("tiny-after")
    env = portable.environ()
    env["NUMBA_CACHE_DIR"] = str(tmp / "numba")
    subprocess.run([sys.executable, __file__, str(tmp), *MEASURED], env=env, check=True,
                   timeout=1200)

    def differences(name: str, judged: bool = False) -> list[str]:
        diffs, _timing = C.experiment_differences(
            name, json.loads((BEFORE / name / "result.json").read_text()),
            json.loads((tmp / ("judged" if judged else ".") / name / "result.json").read_text()),
            name)
        return diffs

    return differences


@pytest.mark.parametrize("name", CHEAP)
def test_a_tiny_result_is_the_one_before_the_restructuring_bit_for_bit(name, after):
    """Every number of the measured data, every check (its interval and verdict), the texts and
    the configuration equal the fixture's."""
    assert after(name) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MEASURED if n not in CHEAP])
def test_every_other_tiny_result_is_the_one_before_bit_for_bit(name, after):
    assert after(name) == []


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


@pytest.mark.parametrize("name", MEASURED)
def test_todays_judge_reads_the_fixtures_data_to_the_same_rows(name, after):
    """Every experiment of the fixture, judged again from its data with today's code (cards,
    checks, intervals, verdict, headline), gives the fixture's result bit for bit: the judges'
    restructuring (keyword checks, one interval and bootstrap) changed no row."""
    assert after(name, judged=True) == []


if __name__ == "__main__":
    _measure(Path(sys.argv[1]), sys.argv[2:])
