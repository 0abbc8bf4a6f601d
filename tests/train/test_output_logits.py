"""The output logits' drift as the trainer records it (mean logit, mean logit of the tokens not
yet a training target, the head's norm), kept across a checkpoint; and the Markov source's Zipf
base measure (many rare symbols)."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.train import CheckpointError, MarkovSource, TrainConfig, Trainer
from normlab.train import checkpoint as ckpt
from normlab.train.probes import LogitDrift, Watch

MODEL = GPTConfig(vocab_size=40, seq_len=8, n_layers=1, d_model=16, n_heads=2)
CFG = TrainConfig(model=MODEL, data="markov", markov_order=1, markov_alpha=0.05, markov_zipf=1.5,
                  steps=6, batch_size=3, warmup=1, eval_interval=6, eval_batches=1, lr=3e-2)


def _drift(model: GPT, x, y) -> tuple[np.ndarray, float]:
    """The logit_drift probe's (token_logit, mean_logit) over one forward."""
    probe, record = LogitDrift(model), {}
    watch = Watch(model.numerics_root, probe.hooks())
    model.set_numerics(watch)
    with watch.armed_for():
        model.forward(x, y)
    probe.forward(record, y)
    return probe.token_logit, record["mean_logit"]


def test_the_probe_records_the_mean_logit_of_every_token():
    model = GPT(MODEL, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 40, size=(2, 8)), rng.integers(0, 40, size=(2, 8))
    token_logit, mean_logit = _drift(model, x, y)
    z = model._trunk(x).reshape(-1, 40).astype(np.float64)  # (B T, V), before any cap
    np.testing.assert_allclose(token_logit, z.mean(0), rtol=1e-6, atol=1e-7)
    assert mean_logit == pytest.approx(z.mean(), abs=1e-7)
    capped = GPT(dataclasses.replace(MODEL, final_softcap=0.1), rng=np.random.default_rng(0))
    # the head's output, not the capped logits the softmax sees
    assert _drift(capped, x, y)[1] == pytest.approx(mean_logit, abs=1e-7)


def test_the_trainer_records_the_drift_of_never_seen_tokens_and_the_head_norm():
    t = Trainer(CFG)
    seen = np.zeros(40, bool)
    for _ in range(CFG.steps):
        head = t.params["head.weight"].copy()
        state = t.data_rng.bit_generator.state
        _, y = t.source.train_batch(CFG.batch_size, MODEL.seq_len, t.data_rng)
        t.data_rng.bit_generator.state = state  # the step draws the same batch
        rec = t.train_step()
        t.history.append(rec)
        t.step += 1
        token_logit = t.probes["logit_drift"].token_logit
        assert rec["head_norm"] == pytest.approx(np.linalg.norm(head.astype(np.float64)))
        assert rec["mean_logit"] == pytest.approx(token_logit.mean())
        if seen.all():
            assert "mean_logit_unseen" not in rec
        else:
            assert rec["mean_logit_unseen"] == pytest.approx(token_logit[~seen].mean())
        seen[y.reshape(-1)] = True
    counts = t.probes["logit_drift"].target_counts
    np.testing.assert_array_equal(counts > 0, seen)
    assert counts.sum() == CFG.steps * CFG.batch_size * MODEL.seq_len


def test_tied_embeddings_report_the_table_as_the_head():
    cfg = dataclasses.replace(CFG, model=dataclasses.replace(MODEL, tie_embeddings=True), steps=1)
    t = Trainer(cfg)
    norm = float(np.linalg.norm(t.params["wte.weight"].astype(np.float64)))
    assert t.run().history[0]["head_norm"] == pytest.approx(norm)


def test_the_target_counts_survive_a_checkpoint(tmp_path):
    full = Trainer(CFG).run()
    first = Trainer(CFG)
    first.run(until=3)
    path = tmp_path / "run.npz"
    first.save(path)
    resumed = Trainer.resume(path, CFG)
    np.testing.assert_array_equal(resumed.probes["logit_drift"].target_counts,
                                  first.probes["logit_drift"].target_counts)
    assert resumed.run().history == full.history  # mean_logit_unseen included, bit for bit


def test_a_checkpoint_without_counts_resumes_and_bad_counts_are_refused(tmp_path):
    first = Trainer(CFG)
    first.run(until=2)
    path = tmp_path / "run.npz"
    first.save(path)
    arrays, meta = ckpt.load(path)
    old = tmp_path / "old.npz"
    ckpt.save(old, {k: v for k, v in arrays.items() if k != "data/target_counts"}, meta)
    resumed = Trainer.resume(old, CFG)  # written before the counts were saved
    assert all("mean_logit_unseen" not in r for r in resumed.run().history[2:])
    for bad in (np.full(40, -1), np.zeros(39, np.int64), np.zeros(40)):
        broken = tmp_path / "bad.npz"
        ckpt.save(broken, {**arrays, "data/target_counts": bad}, meta)
        with pytest.raises(CheckpointError, match="target_counts must be 40 counts"):
            Trainer.resume(broken, CFG)


# ---- the Markov source's Zipf base measure -----------------------------------------------------
def test_zipf_zero_is_the_symmetric_dirichlet_as_before():
    src = MarkovSource(vocab_size=7, order=2, alpha=0.3, seed=4)
    P = np.random.default_rng(4).dirichlet(np.full(7, 0.3), size=49)
    np.testing.assert_array_equal(src.transitions, P)
    assert "zipf" not in src.describe()


def test_zipf_centres_the_rows_on_zipf_frequencies():
    V, s = 300, 1.2
    src = MarkovSource(vocab_size=V, order=1, alpha=0.5, seed=0, zipf=s)
    q = np.arange(1, V + 1) ** -s
    q /= q.sum()
    # the mean row is the base measure (Dirichlet(alpha V q) has mean q), up to sampling noise
    mean_row = src.transitions.mean(axis=0)
    assert np.corrcoef(np.log(mean_row), np.log(q))[0, 1] > 0.9
    assert mean_row[:10].sum() == pytest.approx(q[:10].sum(), rel=0.1)
    # rare symbols: the tail of the stationary law is orders of magnitude below uniform
    pi = np.sort(src.stationary)
    assert pi[: V // 2].sum() < 0.1 and pi[-1] > 20 / V
    assert src.describe()["zipf"] == s
    uniform = MarkovSource(vocab_size=V, order=1, alpha=0.5, seed=0)
    assert np.sort(uniform.stationary)[: V // 2].sum() > 0.3


def test_zipf_is_checked_in_the_source_and_the_config():
    with pytest.raises(ValueError, match="zipf must be a finite number >= 0"):
        MarkovSource(vocab_size=5, order=1, zipf=-1.0)
    with pytest.raises(ValueError, match="markov_zipf must be a finite number >= 0"):
        dataclasses.replace(CFG, markov_zipf=float("nan"))
    t = Trainer(CFG)
    assert t.source.zipf == 1.5 and t.result().data["zipf"] == 1.5
