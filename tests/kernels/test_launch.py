"""``kernels._common.launch``: below PARALLEL_MIN elements a kernel runs on one thread and the
caller's thread count is restored; in a process whose numba pool has one thread the count is
not asked for again after the first launch. Each case runs in a fresh interpreter, since numba
fixes its pool's size when the pool starts."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json
import numba
from numba import njit, prange
from normlab.kernels import _common as C

@njit(parallel=True)
def seen(out):  # the thread count a kernel runs with, from inside it
    for i in prange(1):
        out[0] = numba.get_num_threads()

import numpy as np
out = np.zeros(1, np.int64)
report = {"before": C._ONE_THREAD}
C.launch(seen, 10, out)
report.update(small=int(out[0]), after=C._ONE_THREAD, caller=numba.get_num_threads())
calls = []
real = numba.get_num_threads
numba.get_num_threads = lambda: calls.append(1) or real()
C.launch(seen, 10, out)
report.update(small_again=int(out[0]), asked=len(calls))
numba.get_num_threads = real
C.launch(seen, C.PARALLEL_MIN, out)
report["large"] = int(out[0])
print(json.dumps(report))
"""


def _run(threads: int) -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_thread_pool_launches_without_asking_again():
    r = _run(1)
    assert r == {"before": False, "small": 1, "after": True, "caller": 1, "small_again": 1,
                 "asked": 0, "large": 1}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores for a pool of two")
def test_two_thread_pool_runs_small_work_on_one_and_restores_the_count():
    r = _run(2)
    assert r == {"before": False, "small": 1, "after": False, "caller": 2, "small_again": 1,
                 "asked": 1, "large": 2}
