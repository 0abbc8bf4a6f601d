"""The process's memory allocator, set for NumPy training: one home for the glibc ``mallopt``
call that the measuring commands (``normlab run``, ``report``, ``train``), every pool worker (the
report's second process included) and the benchmarks share (it sits below both the commands and
the sweep, so neither imports the other for it)."""

from __future__ import annotations


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the kernel.

    A NumPy training step allocates and frees the same few-MB temporaries again and again; by
    default glibc hands large blocks back to the kernel and every new one page-faults (about
    13,000 faults and a sixth of the step time for the benchmark's model). Returns False where
    this is not glibc (nothing changes)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 256 << 20)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False
