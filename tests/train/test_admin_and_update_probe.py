"""The Trainer's two once-drawn batches: Admin's profiling batch (omega filled before the first
step) and the model-update probe (DeepNet's ||F(x, W_t) - F(x, W_0)||). Both come from their own
generators: reruns and resumed runs stay bit-identical, and the training batches, masks and
weights are those of a run without them."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPTConfig
from normlab.train import TrainConfig, Trainer

MODEL = GPTConfig(vocab_size=8, seq_len=12, n_layers=2, d_model=16, n_heads=2, placement="admin",
                  dropout=0.1)
TINY = TrainConfig(model=MODEL, steps=8, batch_size=4, warmup=2, eval_interval=4,
                   eval_batches=2, lr=1e-2, markov_order=1)


def _same_history(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra == rb  # every float bit for bit


def _omegas(trainer: Trainer) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in trainer.params.items() if k.endswith("omega")}


def test_the_trainer_profiles_omega_on_its_own_batch():
    t = Trainer(TINY)
    omegas = _omegas(t)
    assert len(omegas) == 2 * MODEL.n_layers
    assert np.all(omegas["blocks.0.attn.omega"] == 1.0)
    assert not np.all(omegas["blocks.1.mlp.omega"] == 1.0)
    # the profile batch is drawn from the fifth generator spawned from the seed
    profile_seq = np.random.SeedSequence(TINY.seed).spawn(5)[4]
    x, _ = t.source.train_batch(TINY.batch_size, MODEL.seq_len, np.random.default_rng(profile_seq))
    again = Trainer(dataclasses.replace(TINY, steps=9))
    expected = again.model.profile_admin(x)
    assert [float(w[0]) for w in omegas.values()] == pytest.approx(expected, rel=1e-6)
    # the training batches and dropout masks are a Post-LN run's: only omega differs
    post = Trainer(dataclasses.replace(TINY, model=dataclasses.replace(MODEL, placement="post")))
    assert t.data_rng.bit_generator.state == post.data_rng.bit_generator.state
    assert (t.model.dropout_rng.bit_generator.state
            == post.model.dropout_rng.bit_generator.state)
    for k, p in post.params.items():
        np.testing.assert_array_equal(p, t.params[k])


def test_admin_reruns_are_bit_identical_and_omega_trains():
    a, b = Trainer(TINY), Trainer(TINY)
    start = _omegas(a)
    ra, rb = a.run(), b.run()
    _same_history(ra.history, rb.history)
    for k, p in a.params.items():
        np.testing.assert_array_equal(p, b.params[k])
    assert any(not np.array_equal(start[k], a.params[k]) for k in start)  # a parameter


def test_admin_resume_is_bit_identical(tmp_path):
    straight = Trainer(TINY)
    full = straight.run()
    first = Trainer(TINY)
    first.run(until=3)
    first.save(tmp_path / "run.npz")
    resumed = Trainer.resume(tmp_path / "run.npz", TINY)
    for k, w in _omegas(first).items():  # the trained omega, not a fresh profile
        np.testing.assert_array_equal(resumed.params[k], w)
    result = resumed.run()
    _same_history(result.history, full.history)
    for k, p in straight.params.items():
        np.testing.assert_array_equal(p, resumed.params[k])


PROBED = dataclasses.replace(TINY, model=dataclasses.replace(MODEL, placement="post"),
                             update_probe=5)


def test_the_update_probe_is_recorded_and_changes_nothing_else():
    probed = Trainer(PROBED).run()
    plain = Trainer(dataclasses.replace(PROBED, update_probe=0)).run()
    for key in ("model_update", "logit_update"):
        updates = [r.get(key) for r in probed.history]
        assert all(u is not None and u > 0 for u in updates[:5]) and updates[5:] == [None] * 3
    for rp, r in zip(probed.history, plain.history):
        assert {k: v for k, v in rp.items() if not k.endswith("_update")} == r
    assert probed.final_val_loss == plain.final_val_loss
    t = Trainer(PROBED)
    probe = t.probes["update_probe"]
    assert probe.model_update() == (0.0, 0.0)  # F(x, W_0) against itself
    h0, z0 = probe.at_init
    t.model.eval()  # the probe runs without dropout
    np.testing.assert_array_equal(h0, t.model.hidden(probe.probe).astype(np.float64))
    assert z0.shape == (*probe.probe.shape, MODEL.vocab_size)
    assert "update_probe" not in Trainer(dataclasses.replace(PROBED, update_probe=0)).probes
    with pytest.raises(ValueError, match="update_probe = n > 0"):
        dataclasses.replace(PROBED, update_probe=0, probes=("update_probe",))


def test_the_update_probe_leaves_a_rounding_policy_alone():
    cfg = dataclasses.replace(PROBED, precision="fp8_hybrid")
    probed, plain = Trainer(cfg).run(), Trainer(dataclasses.replace(cfg, update_probe=0)).run()
    assert [r["loss"] for r in probed.history] == [r["loss"] for r in plain.history]


def test_a_probed_run_resumes_bit_identically(tmp_path):
    full = Trainer(PROBED).run()
    first = Trainer(PROBED)
    first.run(until=2)
    first.save(tmp_path / "run.npz")
    result = Trainer.resume(tmp_path / "run.npz", PROBED).run()
    _same_history(result.history, full.history)


def test_update_probe_is_checked():
    with pytest.raises(ValueError, match="update_probe must be an integer >= 0"):
        dataclasses.replace(TINY, update_probe=-1)
