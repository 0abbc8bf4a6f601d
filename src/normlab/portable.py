"""One instruction set for every machine: results that reproduce bit for bit across processors.

NumPy, OpenBLAS and numba each choose their machine code from the processor they run on. A float32
training run therefore ends in different last bits on an AVX-512 machine and on an AVX2 one: NumPy
dispatches its reductions and transcendental loops to 512-bit code, OpenBLAS picks a GEMM kernel per
core type, and numba compiles for the host processor with a vector width of its own. Each result is
correctly rounded where a bit is defined; the summation orders differ.

The portable environment pins all three to Haswell's instruction set (x86-64-v3: AVX2 and FMA):

- ``OPENBLAS_CORETYPE=Haswell`` and one OpenBLAS thread;
- ``NPY_DISABLE_CPU_FEATURES``: NumPy's dispatch targets above x86-64-v3 turned off;
- ``NUMBA_CPU_NAME=haswell`` with Haswell's features, so numba compiles the same code everywhere.

The libraries read these variables when they load, so they are given to a new process:
``python -m normlab.portable CMD [ARG ...]`` runs CMD under them, and
``subprocess.run(cmd, env=portable.environ())`` does it from Python. Any x86-64 processor with AVX2
(Intel since 2013, AMD since 2015) runs it; :func:`unsupported` says why another cannot. ``make
results`` measures the committed results under it, and the tests that compare runs bit for bit with
a recording run under it. Its cost is the wider vectors left unused, on the machines that have
them.
"""

from __future__ import annotations

import importlib
import os
import platform
from collections.abc import Mapping
from typing import Any

__all__ = ["VARIABLES", "active", "environ", "unsupported"]

#: LLVM's features of the Haswell processor, given to numba with ``NUMBA_CPU_NAME=haswell``.
_HASWELL_FEATURES = (
    "+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+invpcid,"
    "+lzcnt,+mmx,+movbe,+pclmul,+popcnt,+rdrnd,+sahf,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,"
    "+xsave,+xsaveopt"
)

#: NumPy's dispatch target that stays on; every target above it is disabled.
_NUMPY_TARGET = "X86_V3"

#: The variables and their values (NumPy's list is completed by :func:`environ` from the running
#: NumPy's dispatch targets, since disabling one it was not built with is an error).
VARIABLES: dict[str, str] = {
    "OPENBLAS_CORETYPE": "Haswell",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMBA_CPU_NAME": "haswell",
    "NUMBA_CPU_FEATURES": _HASWELL_FEATURES,
}


def _numpy_cpu(name: str) -> Any:  # NumPy's private lists of dispatch targets and features
    return getattr(importlib.import_module("numpy._core._multiarray_umath"), name)


def _numpy_disabled() -> str:
    return " ".join(t for t in _numpy_cpu("__cpu_dispatch__") if t != _NUMPY_TARGET)


def environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the portable variables set."""
    env = dict(os.environ if base is None else base)
    env.update(VARIABLES)
    env["NPY_DISABLE_CPU_FEATURES"] = _numpy_disabled()
    return env


def active() -> bool:
    """Whether this process was started under the portable environment."""
    want = environ({})
    return all(os.environ.get(k) == v for k, v in want.items())


def unsupported() -> str | None:
    """Why this machine cannot run the portable environment, or None when it can."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the portable environment is x86-64 code; this machine is {platform.machine()}"
    if _NUMPY_TARGET not in _numpy_cpu("__cpu_dispatch__"):
        return f"this NumPy was built without the {_NUMPY_TARGET} dispatch target"
    if not _numpy_cpu("__cpu_features__").get(_NUMPY_TARGET):
        return f"this processor lacks {_NUMPY_TARGET} (AVX2, FMA, BMI2, F16C)"
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m normlab.portable CMD [ARG ...]``: CMD run under the portable environment."""
    import shutil
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m normlab.portable CMD [ARG ...]  (CMD runs under the portable "
              "environment)", file=sys.stderr)
        return 2
    why = unsupported()
    if why is not None:
        print(f"normlab.portable: {why}", file=sys.stderr)
        return 2
    exe = shutil.which(args[0])
    if exe is None:
        print(f"normlab.portable: CMD {args[0]!r} is not a program on PATH", file=sys.stderr)
        return 2
    os.execve(exe, args, environ())
    return 0  # not reached: execve replaces this process


if __name__ == "__main__":
    raise SystemExit(main())
