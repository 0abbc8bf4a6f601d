"""A fake experiment for the framework's tests: counts its measurements and can be told to fail."""

from dataclasses import dataclass

from normlab.lab.framework import Card, Check

# measured in the test's own process, where its call counter and the tests' patches live (a
# report would otherwise measure an in-process experiment in a second process)
LANE = "alone"

CARD = Card(name="fake", title="a fake experiment", citation="nobody 2024", claim="claim",
            published="1", method="It returns its config's value.")
CALLS = {"n": 0}
INTERRUPT = {"on": False}


@dataclass(frozen=True)
class Config:
    value: float = 1.0  # the number it "measures"
    seed: int = 0  # unused


SIZES = {"tiny": {"value": 2.0}, "quick": {}, "full": {"value": 3.0}}


def measure(config, ctx):
    CALLS["n"] += 1
    if INTERRUPT["on"]:
        raise KeyboardInterrupt
    ctx.progress(1, 1, "done")
    return {"value": config.value}


def judge(data, config):
    return [Check(claim="value is positive", published="> 0", measured=f"{data['value']}",
                  rule="> 0", passed=data["value"] > 0)]


def headline(data, config):
    return f"{data['value']}"


def plot(result, out_dir):
    from normlab.lab.plotting import figure, save

    fig, (ax,) = figure()
    ax.plot([0, 1], [0, result.data["value"]])
    return [save(fig, out_dir, "fake.png")]
