"""``normlab.portable``: the environment that pins NumPy, OpenBLAS and numba to one instruction
set, given to a new process."""

import subprocess
import sys

import pytest

from normlab import portable


def test_the_environment_sets_every_variable_and_keeps_the_rest():
    env = portable.environ({"PATH": "/bin", "OPENBLAS_CORETYPE": "SkylakeX"})
    assert env["PATH"] == "/bin"
    assert env["OPENBLAS_CORETYPE"] == "Haswell"  # a value of the caller's is replaced
    assert env["NUMBA_CPU_NAME"] == "haswell" and "+avx2" in env["NUMBA_CPU_FEATURES"]
    assert "+avx512f" not in env["NUMBA_CPU_FEATURES"]
    assert "X86_V3" not in env["NPY_DISABLE_CPU_FEATURES"].split()
    assert not portable.active() or all(k in env for k in portable.VARIABLES)


@pytest.mark.skipif(portable.unsupported() is not None, reason=str(portable.unsupported()))
def test_a_process_started_under_it_runs_x86_64_v3_code_only():
    probe = ("import numba, numpy as np; from normlab import portable; "
             "from numpy._core._multiarray_umath import __cpu_features__ as f; "
             "print(portable.active(), f['X86_V3'], f.get('X86_V4', False), "
             "numba.config.CPU_NAME)")
    out = subprocess.run([sys.executable, "-m", "normlab.portable", sys.executable, "-c", probe],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False", "haswell"]


def test_a_command_it_cannot_run_is_refused_in_one_line():
    r = subprocess.run([sys.executable, "-m", "normlab.portable", "no-such-program-here"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a program" in r.stderr
    r = subprocess.run([sys.executable, "-m", "normlab.portable"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage:")
