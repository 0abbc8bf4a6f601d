"""``_training.run_points``: one run per (variant, overrides), each with its own lr and seed,
through the sweep API, in the order given; the same numbers as ``run_grid`` for the same runs."""

import pytest

from normlab.lab.experiments import _training as T
from normlab.lab.framework import RunContext
from normlab.models import GPTConfig
from normlab.train import TrainConfig

BASE = TrainConfig(model=GPTConfig(vocab_size=8, seq_len=8, n_layers=1, d_model=16, n_heads=2),
                   steps=6, batch_size=2, warmup=1, eval_interval=6, eval_batches=1, lr=1e-2)
SERIES = {"nll": lambda rec: rec["nll"]}


def test_points_carry_their_own_lr_seed_and_lr_dependent_fields(tmp_path):
    ctx = RunContext(executor="serial", store=tmp_path)
    points = [("a", {"lr": 3e-2, "seed": 2, "weight_decay": 1e-4 / 3e-2}),
              ("b", {"seed": 1}), ("a", {"lr": 1e-2, "seed": 2, "weight_decay": 1e-2})]
    runs = T.run_points(BASE, points, ctx, series=SERIES, name="pts")
    assert [(r.variant, r.lr, r.seed) for r in runs] == [("a", 3e-2, 2), ("b", 1e-2, 1),
                                                         ("a", 1e-2, 2)]
    assert all(r.status == "done" and r.curves["nll"] and r.final_val_loss for r in runs)
    grid = T.run_grid(BASE, {"b": {}}, ctx, seeds=[1], series=SERIES, name="grid")
    assert grid[0].final_val_loss == runs[1].final_val_loss  # one run, either way
    assert runs[0].loss_at_init == runs[2].loss_at_init  # same seed, same init and first batch
    again = T.run_points(BASE, points, ctx, series=SERIES, name="pts")  # read back from the store
    assert [r.final_val_loss for r in again] == [r.final_val_loss for r in runs]


def _train_loss(seed: int) -> float:
    """A module-level task: a seeded single run's final validation loss (as floats, exactly)."""
    from normlab.train import train

    return train(BASE.with_overrides({"seed": seed})).final_val_loss


def _fails(arg):
    if arg == 7:
        raise ValueError(f"no task for {arg}")
    return arg


def test_run_tasks_on_the_pool_equal_the_same_calls_here_in_their_order():
    seen = []
    args = [3, 0, 2, 1, 0]
    pooled = T.run_tasks(_train_loss, args, RunContext(executor="pool:2"), progress=seen.append)
    here = [_train_loss(s) for s in args]
    assert pooled == here and pooled[1] == pooled[4]  # bit for bit, in args' order
    assert seen == [1, 2, 3, 4, 5]
    assert T.run_tasks(_train_loss, args[:2], RunContext(executor="serial")) == here[:2]
    assert T.run_tasks(_train_loss, [], RunContext(executor="serial")) == []


@pytest.mark.parametrize("executor", ["serial", "pool:2"])
def test_a_failing_task_raises_with_its_traceback(executor):
    with pytest.raises(RuntimeError, match=r"_fails\(7\) failed: ValueError: no task for 7"
                                           r"(.|\n)*Traceback"):
        T.run_tasks(_fails, [1, 7], RunContext(executor=executor))
