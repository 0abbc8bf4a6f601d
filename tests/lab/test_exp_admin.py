"""The admin experiment at its tiny size (in this process): the direction of the output-change
effect (Admin's change below Post-LN's, near Pre-LN's), the profiled omegas, and a divergence
path (a diverged run is its loss at init and every check still evaluates)."""

import json

import numpy as np

from normlab._files import jsonable
from normlab.lab import framework as E
from normlab.lab.experiments import admin

_CACHE = {}


def tiny():
    if "r" not in _CACHE:
        _CACHE["r"] = E.run_experiment("admin", size="tiny", seed=0, executor="serial").result
    return _CACHE["r"]


def test_admins_output_change_is_below_post_lns():
    d = tiny().data
    change = {p: np.asarray(v)[:, -1] for p, v in d["per_seed"].items()}  # at the largest N
    assert change["admin"].mean() < change["post"].mean() / 2
    assert change["admin"].mean() < 2 * change["pre"].mean()  # Pre-LN's size
    assert np.all(np.diff(d["omega_last"]) > 0)  # omega grows with the number of sublayers
    assert d["admin_norm_err"] < 1e-3  # every sublayer ends normalized


def test_result_shape_and_checks():
    r = tiny()
    assert r.verdict == E.verdict_of(r.checks)
    assert sum(c.counted for c in r.checks) == 6 and any(c.identity for c in r.checks)
    t = r.data["train"]
    assert set(t["loss"]) == set(admin.PLACEMENTS)
    assert all(t["floor"] < x < t["ln_v"] + 1 for v in t["loss"].values() for x in v)
    json.dumps(r.data, allow_nan=False)


def test_a_diverged_run_counts_as_its_loss_at_init():
    config = E.configure(admin, "tiny", overrides={
        "base.lr": 50.0, "base.divergence_factor": 1.2, "base.steps": 12, "sublayers": (2, 4),
        "seeds": 2})
    data = admin.measure(config, E.RunContext(executor="serial"))
    t = data["train"]
    assert sum(t["diverged"].values()) > 0
    for _p, losses in t["loss"].items():
        assert all(np.isfinite(losses))
    checks = admin.judge(json.loads(json.dumps(jsonable(data))), config)
    assert all(c.status in ("pass", "FAIL", "inconclusive", "shown", "holds") for c in checks)
