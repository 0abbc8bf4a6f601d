"""Kill ``normlab sweep`` mid-run (SIGTERM, SIGKILL), run it again: every point finishes exactly
once, no finished run is rewritten, nothing temporary is left, no worker outlives the driver."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _sweep_helpers import snapshot, temp_files, write_spec

from normlab.lab.sweep import DONE, RunStore, load_spec


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited


def _finished(out: Path) -> dict[str, dict]:
    done = {}
    for status in (out / "runs").glob("*/status.json"):
        s = json.loads(status.read_text())
        if s["status"] == DONE:
            done[status.parent.name] = s
    return done


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_sweep_resumes_without_loss_or_duplicates(tmp_path, sig):
    # 4 points of ~60 steps each (a second or two), one worker: the kill lands mid-run
    path = write_spec(tmp_path, steps=60)
    points = load_spec(path).points()
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "normlab.lab", "sweep", str(path), "--out", str(out),
           "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and _finished(out)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no point finished in 120 s"
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
    if sig == signal.SIGTERM:
        assert b"interrupted" in err and b"run the same command to resume" in err

    finished = _finished(out)
    assert 1 <= len(finished) < len(points), "the kill must land mid-sweep"
    worker = next(iter(finished.values()))["pid"]
    deadline = time.monotonic() + 10
    while _alive(worker):  # SIGTERM: the driver stops it; SIGKILL: it sees the driver gone
        assert time.monotonic() < deadline, "the pool worker outlived the driver"
        time.sleep(0.05)
    kept = {rel: v for rel, v in snapshot(out / "runs").items() if rel.split("/")[0] in finished}
    if sig == signal.SIGTERM:
        assert not temp_files(out)

    rerun = subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert f"{len(finished)} from the store".encode() in rerun.stdout

    assert sorted(_finished(out)) == sorted(p.id for p in points)
    now = snapshot(out / "runs")
    assert {rel: v for rel, v in now.items() if rel.split("/")[0] in finished} == kept
    events = RunStore(out).events()
    for p in points:
        assert [e["event"] for e in events if e["id"] == p.id].count(DONE) == 1, p.id
    assert not temp_files(out)
    assert sorted(os.listdir(out)) == ["events.jsonl", "runs"]
