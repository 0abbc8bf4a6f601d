"""final-logit-softcap at its tiny size (seconds, in this process), and judge on hand-made data:
premises first (the uncapped logits exceed the cap, the uncapped arm's late loss spikes), the
bound shown as a derivation, the two effects counted once each, every verdict reachable, bad
configs refused."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import final_logit_softcap as M


def _arm(val, late, peak):
    n = len(val)
    return {"val": list(val), "late_max": list(late), "max_logit": list(peak),
            "stopped": [None] * n, "loss_at_init": [3.4] * n}


def _data(no, cap=None):
    data = {"cap": 30.0, "precision": "amp_bf16", "lr": 3e-2, "seeds": [0, 1, 2],
            "arms": {"no cap": _arm(*no)}}
    if cap is None:
        return {**data, "tested": False}
    data["arms"]["cap"] = _arm(*cap)
    return data


def _verdict(data, size="full"):
    rows = M.judge(data, E.configure(M, size))
    register.check_rows(M, rows, size)
    return E.verdict_of(rows), {c.id: c for c in rows}


UNSTABLE = ([0.30, 0.25, 0.35], [1.2, 1.0, 1.4], [45.0, 50.0, 48.0])


def test_the_tiny_size_runs_end_to_end():
    """The tiny size trains the uncapped arm and reads its logits and late losses; its rows
    carry their records' ids (the premises at least)."""
    r = E.run_experiment("final-logit-softcap", size="tiny", seed=0, executor="serial",
                         plots=False).result
    no = r.data["arms"]["no cap"]
    assert len(no["val"]) == E.configure(M, "tiny").seeds
    assert all(np.isfinite(no["val"])) and all(np.isfinite(no["late_max"]))
    ids = {c.id for c in r.checks}
    assert {"logits-exceed-cap", "uncapped-late-spike"} <= ids
    assert {"softcap-stabilizes", "softcap-lowers-loss"} <= ids


def test_a_cap_that_removes_the_spikes_is_reproduced(tmp_path):
    verdict, rows = _verdict(_data(UNSTABLE, ([0.01, 0.02, 0.01], [0.05, 0.04, 0.06],
                                              [29.0, 29.5, 28.9])))
    assert verdict == E.REPRODUCED
    assert rows["cap-bounds-logits"].passed is True
    assert rows["cap-bounds-logits"].kind == E.DERIVATION
    assert rows["softcap-stabilizes"].estimate == pytest.approx(np.mean([1.15, 0.96, 1.34]))
    assert rows["softcap-lowers-loss"].threshold == [0.0]
    from normlab.lab.contract import Result
    res = Result(card=M.CARD, setting="", measured="", checks=list(rows.values()),
                 data=_data(UNSTABLE, ([0.01, 0.02, 0.01], [0.05, 0.04, 0.06],
                                       [29.0, 29.5, 28.9])))
    files = M.plot(res, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_a_cap_that_makes_it_worse_is_not_reproduced():
    verdict, rows = _verdict(_data(UNSTABLE, ([0.9, 1.0, 0.95], [2.0, 2.1, 2.2],
                                              [29.9, 29.9, 29.9])))
    assert verdict == E.NOT_REPRODUCED
    assert rows["softcap-stabilizes"].passed is False


def test_each_row_is_judged_only_where_its_pilot_resolves_it():
    """The quick size's stability row is not judged (its pilot's effect needs more than 200
    seeds), its validation-loss row is (24 seeds, the pilot's count); at the full size both are
    (20 seeds). Each count is the fewest that resolves what some count resolves."""
    from normlab.lab.experiments import _pilots as P
    data = _data(UNSTABLE, ([0.01, 0.02, 0.01], [0.05, 0.04, 0.06], [29.0, 29.5, 28.9]))
    _, quick = _verdict(data, "quick")
    assert quick["softcap-stabilizes"].passed is None
    assert "not judged at this size" in quick["softcap-stabilizes"].rule
    assert "more than 200" in quick["softcap-stabilizes"].note
    assert quick["softcap-lowers-loss"].passed is True
    _, full = _verdict(data, "full")
    assert full["softcap-stabilizes"].passed is True and full["softcap-lowers-loss"].passed
    for steps, size in ((1000, "quick"), (2000, "full")):
        pilots = M.PILOTS[steps]
        counts = [P.needed(p, M.BETTER) for p in pilots.values()]
        assert E.configure(M, size).seeds == max(c for c in counts if c is not None)


def test_logits_below_the_cap_mean_not_tested():
    verdict, rows = _verdict(_data(([0.3, 0.2, 0.3], [1.2, 1.0, 1.4], [20.0, 21.0, 22.0])))
    assert verdict == E.NOT_TESTED
    assert rows["logits-exceed-cap"].passed is False
    assert rows["softcap-lowers-loss"].measured.startswith("not run: the premise did not hold")


def test_no_spike_means_not_tested_even_with_large_logits():
    verdict, rows = _verdict(_data(([0.001, 0.002, 0.001], [0.01, 0.02, 0.01],
                                    [45.0, 50.0, 48.0])))
    assert verdict == E.NOT_TESTED
    assert rows["logits-exceed-cap"].passed is True
    assert rows["uncapped-late-spike"].passed is False


def test_the_register_holds():
    register.validate(M)
    assert M.RECORDS["logits-exceed-cap"].margin == (M.Config().cap,)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="cap must be"):
        E.configure(M, "tiny", overrides={"cap": -1.0})
    with pytest.raises(ValueError, match="final_softcap must be"):
        E.configure(M, "tiny", overrides={"base.model.final_softcap": 30.0})
    with pytest.raises(ValueError, match="seeds must be >= 2"):
        E.configure(M, "tiny", overrides={"seeds": 1})
