"""The same 4-point sweep as Ray tasks, on a local Ray instance this test starts (2 CPUs): the
same store, the same numbers as the process pool, and a rerun that runs nothing."""

import os

import numpy as np
import pytest
from _sweep_helpers import snapshot, temp_files, write_spec

from normlab.lab.sweep import (
    DONE,
    ProcessPool,
    RayExecutor,
    RunStore,
    load_spec,
    run_sweep,
)

if os.environ.get("CI"):  # CI installs normlab[ray]: a missing Ray there is a failure, not a skip
    import ray
else:
    ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'normlab[ray]'")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_four_point_sweep_on_ray_matches_the_process_pool(tmp_path, local_ray):
    spec = load_spec(write_spec(tmp_path))
    out = tmp_path / "ray"
    records = run_sweep(spec, out, executor=RayExecutor())  # the instance started above
    assert ray.is_initialized()  # a connection the caller made is left open
    assert [r.status for r in records] == [DONE] * 4 and not any(r.reused for r in records)
    for r in records:
        assert sorted(f.name for f in r.path.iterdir()) == ["config.json", "metrics.json",
                                                            "result.json", "status.json"]
    events = RunStore(out).events()
    assert sorted(e["event"] for e in events) == ["done"] * 4 + ["start"] * 4
    assert not temp_files(out)

    pool = run_sweep(spec, tmp_path / "pool", executor=ProcessPool(2))
    for a, b in zip(records, pool):
        assert a.id == b.id
        np.testing.assert_allclose(a.result["final_val_loss"], b.result["final_val_loss"],
                                   rtol=1e-6)
        np.testing.assert_allclose([h["loss"] for h in a.metrics()["history"]],
                                   [h["loss"] for h in b.metrics()["history"]], rtol=1e-6)

    before = snapshot(out / "runs")
    again = run_sweep(spec, out, executor=RayExecutor())
    assert all(r.reused and r.status == DONE for r in again)
    assert snapshot(out / "runs") == before
