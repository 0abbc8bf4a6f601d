"""A fake experiment for the framework's tests: counts its runs and can be told to fail."""

from dataclasses import dataclass

from normlab.lab.experiment import Check, Result

NAME = "fake"
TITLE = "a fake experiment"
CITATION = "nobody 2024"
CALLS = {"n": 0}
INTERRUPT = {"on": False}


@dataclass(frozen=True)
class Config:
    value: float = 1.0  # the number it "measures"
    seed: int = 0  # unused


SIZES = {"tiny": {"value": 2.0}, "quick": {}, "full": {"value": 3.0}}


def run(config, progress):
    CALLS["n"] += 1
    if INTERRUPT["on"]:
        raise KeyboardInterrupt
    progress(1, 1, "done")
    return Result(NAME, TITLE, "claim", CITATION, "1", "setting", f"{config.value}",
                  [Check("value is positive", "> 0", f"{config.value}", "> 0", config.value > 0)],
                  data={"value": config.value})


def plot(result, out_dir):
    from normlab.lab.plotting import figure, save

    fig, (ax,) = figure()
    ax.plot([0, 1], [0, result.data["value"]])
    return [save(fig, out_dir, "fake.png")]
