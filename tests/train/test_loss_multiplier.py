"""The small-gradient probe ``TrainConfig.loss_multiplier`` (every gradient is that of the loss
times it, never undone) and the per-block gradient RMS the trainer records."""

import dataclasses
import math

import numpy as np
import pytest

from normlab.models import GPTConfig
from normlab.train import TrainConfig, Trainer, train

TINY = TrainConfig(model=GPTConfig(vocab_size=8, seq_len=12, n_layers=2, d_model=16, n_heads=2),
                   steps=6, batch_size=4, warmup=2, eval_interval=6, eval_batches=2, lr=1e-2,
                   grad_clip=None)


def test_the_gradient_is_the_multiplied_loss_gradient():
    """Same init and batches: every recorded gradient norm of the first step is M times the
    unscaled one (float32, so to a relative 1e-6), and the loss is the unscaled loss."""
    a = train(dataclasses.replace(TINY, steps=1))
    b = train(dataclasses.replace(TINY, steps=1, loss_multiplier=1e-7))
    ra, rb = a.history[0], b.history[0]
    assert rb["loss"] == ra["loss"]
    assert rb["grad_norm"] == pytest.approx(1e-7 * ra["grad_norm"], rel=1e-5)
    for ga, gb in zip(ra["layer_grad_rms"], rb["layer_grad_rms"]):
        assert gb == pytest.approx(1e-7 * ga, rel=1e-5)


def test_sgd_updates_shrink_with_the_multiplier_and_adam_with_tiny_eps_does_not():
    """SGD's update is linear in the gradient: x1e-3 at the first step. Adam's m / sqrt(v) does
    not see a constant factor when eps is far below the gradient, so with eps = 1e-15 the
    multiplied run follows the plain one; with eps = 1e-8 above its gradient RMS it barely moves
    (Wortsman et al. 2023, section 3.4)."""
    sgd = dict(optimizer="sgd", momentum=0.0, weight_decay=0.0, steps=1)
    u1 = train(dataclasses.replace(TINY, **sgd)).history[0]["update_rms"]
    u2 = train(dataclasses.replace(TINY, **sgd, loss_multiplier=1e-3)).history[0]["update_rms"]
    assert u2 == pytest.approx(1e-3 * u1, rel=1e-4)
    ref = train(dataclasses.replace(TINY, adam_eps=1e-15))
    tiny_eps = train(dataclasses.replace(TINY, adam_eps=1e-15, loss_multiplier=1e-7))
    big_eps = train(dataclasses.replace(TINY, adam_eps=1e-8, loss_multiplier=1e-7))
    for r, t in zip(ref.history, tiny_eps.history):
        assert t["update_rms"] == pytest.approx(r["update_rms"], rel=1e-2)
    g = max(big_eps.history[0]["layer_grad_rms"])
    assert g < 1e-8  # the gradient RMS is below eps ...
    ratio = (sum(r["update_rms"] for r in big_eps.history)
             / sum(r["update_rms"] for r in ref.history))
    assert ratio < 0.5  # ... so Adam's update shrinks


def test_layer_grad_rms_is_the_norm_over_the_root_of_the_count():
    t = Trainer(TINY)
    rec = t.train_step()
    counts = [0] * TINY.model.n_layers
    for name, p in t.params.items():
        if t.model.layer_of(name) is not None:
            counts[t.model.layer_of(name)] += p.size
    for norm, rms, n in zip(rec["layer_grad_norm"], rec["layer_grad_rms"], counts):
        assert rms == pytest.approx(norm / math.sqrt(n), rel=1e-12) and rms > 0


def test_a_bad_multiplier_is_refused():
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="loss_multiplier"):
            dataclasses.replace(TINY, loss_multiplier=bad)
    assert np.isclose(TrainConfig().loss_multiplier, 1.0)
