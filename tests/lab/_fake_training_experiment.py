"""A fake training experiment for the report's tests: two tiny training runs through the sweep
store, the report's resumability at the full size (it can be told to stop after the first run)."""

from dataclasses import dataclass, field

from normlab.lab.framework import Card, Check
from normlab.models import GPTConfig
from normlab.train import TrainConfig

# measured in the test's own process, where the tests' patches live (a report would otherwise
# measure an in-process experiment in a second process)
LANE = "alone"

CARD = Card(name="fake-training", title="a fake training experiment", citation="nobody 2024",
            claim="claim", published="1", method="It trains two tiny runs.")
INTERRUPT = {"on": False}


def _base() -> TrainConfig:
    return TrainConfig(model=GPTConfig(vocab_size=8, seq_len=8, n_layers=1, d_model=16,
                                       n_heads=2), steps=4, batch_size=2, warmup=1,
                       eval_interval=4, eval_batches=1, lr=1e-2)


@dataclass(frozen=True)
class Config:
    base: TrainConfig = field(default_factory=_base)  # the runs' recipe
    seed: int = 0  # the runs' seeds start here


SIZES = {"tiny": {}, "quick": {}, "full": {"base.steps": 6}}


def measure(config, ctx):
    from dataclasses import replace

    from normlab.lab.experiments import _training as T

    ctx = replace(ctx, executor="serial")  # the store is what is tested, not the pool
    points = [("a", {"seed": config.seed}), ("b", {"seed": config.seed + 1})]
    T.run_points(config.base, points[:1], ctx, name="grid")
    if INTERRUPT["on"]:
        raise KeyboardInterrupt
    runs = T.run_points(config.base, points, ctx, name="grid")
    return {"losses": [r.final_val_loss for r in runs]}


def judge(data, config):
    return [Check(claim="both runs finish", published="-", measured=f"{data['losses']}",
                  rule="finite", passed=all(x is not None for x in data["losses"]))]


def headline(data, config):
    return f"{data['losses']}"


def plot(result, out_dir):
    return []
