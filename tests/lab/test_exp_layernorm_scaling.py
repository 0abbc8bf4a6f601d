"""layernorm-scaling at its tiny size (seconds, in this process) and its judge on hand-made data:
premises first (Pre-LN's deep half contributes less; the task separates Post-LN from Pre-LN),
LayerNorm Scaling trained only where both hold, each effect counted once, and a bad config
refused by name."""

import numpy as np
import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import layernorm_scaling as M
from normlab.models import GPTConfig
from normlab.train import Trainer


def _run(loss: float, removal: list[float] | None, angular: float = 0.1) -> dict:
    L = 4
    return {"status": "done" if removal is not None else "diverged", "loss": loss,
            "loss_at_init": 4.0, "grad": [0.1] * L, "removal": removal,
            "angular": None if removal is None else [angular] * L}


def _data(pre_removal, post_losses, pre_losses, lns=None) -> dict:
    arms = {"post": [_run(x, [0.3, 0.1, 0.1, 0.1]) for x in post_losses],
            "pre": [_run(x, r) for x, r in zip(pre_losses, pre_removal)]}
    if lns is not None:
        arms["lns"] = [_run(x, r) for x, r in lns]
    return {"n_layers": 4, "seeds": [0, 1, 2], "steps": 10, "arms": arms,
            "tested": lns is not None}


_PRE = [[0.4, 0.2, 0.05, 0.05], [0.5, 0.2, 0.06, 0.04], [0.45, 0.25, 0.05, 0.05]]  # share ~0.2


def _status(rows, rec_id):
    return next(c.status for c in rows if c.id == rec_id)


def test_judge_passes_when_lns_raises_the_deep_share_and_lowers_the_loss():
    lns = [(1.9, [0.3, 0.2, 0.2, 0.2]), (1.95, [0.3, 0.25, 0.2, 0.2]),
           (1.92, [0.3, 0.2, 0.25, 0.2])]
    rows = M.judge(_data(_PRE, [2.3, 2.4, 2.35], [2.0, 2.05, 2.02], lns), M.Config())
    register.check_rows(M, rows, "full")
    assert _status(rows, "lns-deep-blocks-contribute-more") == "pass"
    assert _status(rows, "lns-lowers-the-loss") == "pass"
    assert E.verdict_of(rows) == E.REPRODUCED
    counted = [tuple(c.interval) for c in rows if c.counted]
    assert len(set(counted)) == len(counted) == 2


def test_judge_fails_when_lns_ends_higher_and_its_deep_blocks_contribute_less():
    lns = [(2.2, [0.6, 0.2, 0.02, 0.02]), (2.25, [0.7, 0.2, 0.03, 0.02]),
           (2.21, [0.65, 0.25, 0.02, 0.03])]
    rows = M.judge(_data(_PRE, [2.3, 2.4, 2.35], [2.0, 2.05, 2.02], lns), M.Config())
    assert _status(rows, "lns-deep-blocks-contribute-more") == "FAIL"
    assert _status(rows, "lns-lowers-the-loss") == "FAIL"
    assert E.verdict_of(rows) == E.NOT_REPRODUCED


@pytest.mark.parametrize("which", ["phenomenon", "separation"])
def test_a_premise_that_fails_makes_the_experiment_not_tested(which):
    pre = [[0.1, 0.1, 0.4, 0.4]] * 3 if which == "phenomenon" else _PRE  # deep share 0.8
    post = [1.9, 1.95, 1.92] if which == "separation" else [2.3, 2.4, 2.35]  # below Pre-LN
    data = _data(pre, post, [2.0, 2.05, 2.02])
    premises = M._premises(data)
    assert any(p.passed is False for p in premises)
    rows = M.judge(data, M.Config())
    assert E.verdict_of(rows) == E.NOT_TESTED
    claims = [c for c in rows if c.kind == E.CLAIM]
    assert [c.id for c in claims] == ["lns-deep-blocks-contribute-more", "lns-lowers-the-loss"]
    assert all(c.passed is None and c.measured.startswith("not run") for c in claims)


def test_a_diverged_run_reads_as_its_loss_at_init_and_drops_out_of_the_shares():
    data = _data(_PRE, [2.3, 2.4, 2.35], [2.0, 2.05, 2.02])
    data["arms"]["post"][0] = _run(4.0, None)
    assert M.losses(data["arms"]["post"])[0] == 4.0
    assert np.isnan(M.deep_share(data["arms"]["post"][0]))


def test_angular_distance_is_zero_for_parallel_and_one_half_for_orthogonal_rows():
    a = np.array([[[1.0, 0.0], [0.0, 2.0]]])  # (B=1, T=2, C=2)
    assert M.angular_distance(a, 3 * a) == pytest.approx(0.0, abs=1e-7)
    b = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    assert M.angular_distance(a, b) == pytest.approx(0.5)


def test_removal_losses_restore_the_model_and_equal_a_model_built_without_the_block():
    """The loss with block l removed is the loss of the same weights with that block left out
    (the blocks list restored afterwards)."""
    cfg = E.configure(M, "tiny").base.with_overrides({"model.placement": "pre", "steps": 3})
    t = Trainer(cfg)
    t.run()
    full = t.evaluate()
    drops = M._removal_losses(t, full)
    assert len(drops) == len(t.model.blocks) == cfg.model.n_layers
    assert t.evaluate() == full
    blocks = t.model.blocks
    t.model.blocks = blocks[:1] + blocks[2:]
    assert t.evaluate() - full == pytest.approx(drops[1])
    t.model.blocks = blocks


def test_the_tiny_size_runs_end_to_end(tmp_path):
    r = E.run_experiment("layernorm-scaling", size="tiny", seed=0, executor="serial",
                         plots=False).result
    arms = r.data["arms"]
    assert set(arms) >= {"post", "pre"}
    n = E.configure(M, "tiny").seeds
    assert all(len(runs) == n for runs in arms.values())
    assert all(len(run["grad"]) == 4 for runs in arms.values() for run in runs)
    ids = [c.id for c in r.checks]
    assert ids[:2] == ["pre-ln-deep-blocks-contribute-less", "text-separates-post-and-pre"]
    register.check_rows(M, r.checks, "tiny")
    register.validate(M)
    files = M.plot(r, tmp_path)
    assert (tmp_path / files[0]).stat().st_size > 1000


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="at least 4 blocks"):
        E.configure(M, "tiny", overrides={"base.model.n_layers": 2})
    with pytest.raises(ValueError, match="grad_stats"):
        E.configure(M, "tiny", overrides={"base.probes": ()})
    with pytest.raises(ValueError, match="'none' is not accepted"):
        E.configure(M, "tiny", overrides={"base.model.norm": "none"})
    with pytest.raises(ValueError, match="diminishes LNS"):
        E.configure(M, "tiny", overrides={"base.model.init": "normal"})
    assert isinstance(E.configure(M, "quick").base.model, GPTConfig)


def test_the_loss_row_is_untested_at_the_quick_size_and_judged_at_the_full_size():
    """The register lists the loss claim as not tested at the quick size (with the pilot's
    reason); the quick config does not judge it, and a row of it at the quick size is
    refused."""
    quick, full = E.configure(M, "quick"), E.configure(M, "full")
    assert quick.loss_row is False and full.loss_row is True
    rec = M.RECORDS["lns-lowers-the-loss"]
    assert not rec.tested_at("quick") and rec.tested_at("full") and "23 seeds" in rec.untested
    lns = [(1.9, [0.3, 0.2, 0.2, 0.2])] * 3
    data = _data(_PRE, [2.3, 2.4, 2.35], [2.0, 2.05, 2.02], lns)
    rows = M.judge(data, quick)
    assert "lns-lowers-the-loss" not in [c.id for c in rows]
    register.check_rows(M, rows, "quick")
    with pytest.raises(register.RegisterError, match="not tested at the quick size"):
        register.check_rows(M, M.judge(data, full), "quick")
