"""dropout-regularizes at its tiny size (seconds, in this process), and judge on hand-made data:
premise first (the arm without dropout must overfit), the gap and the validation loss each
counted once, every verdict reachable, bad configs refused."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import dropout_regularizes as M


def _data(no_train, no_val, yes_train=None, yes_val=None, p=0.2):
    arms = {M._arm(0.0): {"train": list(no_train), "val": list(no_val)}}
    data = {"chars": 10000, "p_drop": p, "seeds": list(range(len(no_train))), "arms": arms}
    if yes_train is None:
        return {**data, "tested": False}
    arms[M._arm(p)] = {"train": list(yes_train), "val": list(yes_val)}
    return data


def _verdict(data):
    rows = M.judge(data, E.configure(M, "quick"))
    register.check_rows(M, rows, "quick")
    return E.verdict_of(rows), {c.id: c for c in rows}


def test_the_tiny_size_runs_end_to_end_with_paired_seeds(tmp_path):
    """The tiny size trains both arms (or only the premise's when it fails) on the slice, the
    training NLL is read in evaluation mode, and the rows carry their records' rules."""
    r = E.run_experiment("dropout-regularizes", size="tiny", seed=0, executor="serial",
                         plots=False).result
    d = r.data
    no = d["arms"][M._arm(0.0)]
    assert len(no["train"]) == len(no["val"]) == E.configure(M, "tiny").seeds
    assert all(np.isfinite(no["train"])) and all(np.isfinite(no["val"]))
    premise = next(c for c in r.checks if c.id == "no-dropout-overfits")
    assert premise.estimate == pytest.approx(float(np.mean(np.subtract(no["val"],
                                                                         no["train"]))))
    assert {c.id for c in r.checks} >= {"no-dropout-overfits", "train-loss-context",
                                        "dropout-narrows-gap", "dropout-lowers-val-loss"}
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_dropout_that_closes_the_gap_and_lowers_val_is_reproduced():
    verdict, rows = _verdict(_data([1.0, 1.1, 1.05], [1.8, 1.85, 1.9],
                                   [1.4, 1.45, 1.42], [1.6, 1.62, 1.66]))
    assert verdict == E.REPRODUCED
    gap = rows["dropout-narrows-gap"]
    assert gap.estimate == pytest.approx(np.mean([0.8 - 0.2, 0.75 - 0.17, 0.85 - 0.24]))
    assert (gap.form, gap.threshold, gap.side) == ("superiority", [0.1], "above")
    assert rows["dropout-lowers-val-loss"].threshold == [0.0]


def test_dropout_that_hurts_the_validation_loss_fails_that_row():
    """The gap narrows (the training loss rises more than the validation loss), but the
    validation loss rises: partly reproduced, the validation row failing."""
    verdict, rows = _verdict(_data([1.0, 1.1, 1.05], [1.8, 1.85, 1.9],
                                   [1.9, 1.95, 1.98], [2.0, 2.04, 2.1]))
    assert verdict == E.PARTLY
    assert rows["dropout-narrows-gap"].passed is True
    assert rows["dropout-lowers-val-loss"].passed is False


def test_no_overfitting_means_not_tested():
    verdict, rows = _verdict(_data([1.8, 1.85, 1.9], [1.82, 1.86, 1.9]))
    assert verdict == E.NOT_TESTED
    assert rows["no-dropout-overfits"].passed is False
    assert rows["dropout-narrows-gap"].passed is None
    assert rows["dropout-narrows-gap"].measured.startswith("not run: the premise did not hold")


def test_the_register_holds():
    register.validate(M)
    assert [r.id for r in M.REGISTER if r.kind == E.CLAIM] == ["dropout-narrows-gap",
                                                               "dropout-lowers-val-loss"]


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="p_drop must be"):
        E.configure(M, "tiny", overrides={"p_drop": 0.0})
    with pytest.raises(ValueError, match="seeds must be >= 2"):
        E.configure(M, "tiny", overrides={"seeds": 1})
    with pytest.raises(ValueError, match="chars must be"):
        E.configure(M, "tiny", overrides={"chars": 50})
    with pytest.raises(ValueError, match=r"base\.model\.dropout"):
        E.configure(M, "tiny", overrides={"base.model.dropout": 0.1})
