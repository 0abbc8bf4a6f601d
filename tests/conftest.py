import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from normlab import portable

# The dtype grid of the parity tests: name -> numpy dtype.
DTYPES = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
# The shape grid: 2-D and 3-D, widths 1, 7, 64, 1024.
SHAPES = [(5, 1), (3, 4, 7), (6, 64), (2, 3, 1024)]


@pytest.fixture
def ml_dtypes_before_0_7():
    """ml_dtypes 0.7 fixed two roundings normlab's tests name: E8M0 of float32 subnormals, and
    float64 -> fp8 through float32 (double rounding). Older versions keep both."""
    return tuple(int(p) for p in ml_dtypes.__version__.split(".")[:2]) < (0, 7)


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


@pytest.fixture
def ran_under_portable(request):
    """For a bit-for-bit claim that holds for one instruction set (a transposed operand summed in
    the same order as a copied one, say): True when the test was run again, in a process of its
    own under ``normlab.portable``'s environment, and passed there; the caller then returns. Under
    that environment (in the process run here) it is False and the test runs."""
    if portable.active():
        return False
    why = portable.unsupported()
    if why is not None:
        pytest.skip(why)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{request.node.path}::{request.node.name}"],
                       env=portable.environ(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    return True
