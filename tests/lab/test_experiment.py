"""The lab's framework: the verdict rule, results as JSON, configuration sizes, caching."""

import json
import math

import numpy as np
import pytest

import _fake_experiment as fake
from normlab.lab import experiment as E


def _check(passed):
    return E.Check("c", "p", "m", "r", passed)


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


def test_verdict_needs_a_counted_check():
    with pytest.raises(ValueError, match="counted"):
        E.verdict_of([_check(None)])


def test_result_json_round_trip():
    r = E.Result("n", "t", "claim", "cit", "pub", "set", "meas", [_check(True), _check(None)],
                 data={"a": np.arange(3.0), "b": np.float32(1.5), "inf": np.inf, "i": np.int64(2)})
    d = json.loads(json.dumps(r.to_json(), allow_nan=False))  # strict JSON: no NaN/Infinity
    assert d["verdict"] == E.REPRODUCED
    back = E.Result.from_json(d)
    assert back.checks[1].passed is None and back.verdict == r.verdict
    assert back.data["a"] == [0.0, 1.0, 2.0] and back.data["i"] == 2
    assert math.isinf(E.num(back.data["inf"]))


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
        assert m.NAME == name and m.TITLE and m.CITATION
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
