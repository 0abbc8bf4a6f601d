"""nGPT in the training loop: the matrices stay on the unit sphere step after step (the Trainer's
renormalization after each update, as NVIDIA/ngpt train.py), without it they leave it, and a run
resumed from a checkpoint is the straight run bit for bit."""

from __future__ import annotations

import numpy as np

from normlab.models import GPTConfig
from normlab.train import TrainConfig, Trainer

MODEL = GPTConfig(vocab_size=16, seq_len=8, n_layers=2, d_model=16, n_heads=2, placement="ngpt",
                  norm="none", positions="rope", activation="swiglu")
RUN = TrainConfig(model=MODEL, steps=5, warmup=0, weight_decay=0.0, batch_size=2,
                  eval_interval=5, eval_batches=1)


def _norm_errors(t: Trainer) -> float:
    """The largest |1 - ||v|||| over every matrix's vectors along its embedding axis."""
    return max(float(np.max(np.abs(np.linalg.norm(w.astype(np.float64), axis=a) - 1.0)))
               for _n, w, a in t.model.matrices())


def test_the_matrices_stay_on_the_sphere_and_leave_it_without_the_renormalization():
    t = Trainer(RUN)
    t.run()
    assert _norm_errors(t) < 1e-6
    bare = Trainer(RUN)
    bare._renormalize = lambda: None  # type: ignore[method-assign]  # the update alone
    bare.run()
    assert _norm_errors(bare) > 1e-3


def test_an_ngpt_run_resumes_bit_identically(tmp_path):
    straight = Trainer(RUN)
    full = straight.run()
    first = Trainer(RUN)
    first.run(until=3)
    first.save(tmp_path / "run.npz")
    resumed = Trainer.resume(tmp_path / "run.npz", RUN)
    result = resumed.run()
    assert [r["loss"] for r in result.history] == [r["loss"] for r in full.history]
    for k, p in straight.params.items():
        np.testing.assert_array_equal(p, resumed.params[k])
