"""The functional tests' PyTorch-parity assertion: ``normlab.testing.parity.torch_parity`` (the
one driver, shared with ``normlab check``), failing the test with the report's rows."""

from normlab.testing.parity import Tolerance, torch_parity

# Ops built on matrix products: torch sums in another order, so float64 agrees to about 1e-12
# and a low format to a few dozen units of its epsilon (``normlab.testing.parity.GEMM``).
GEMM = {"min_ulps": 64.0, "rtol64": 1e-12}


def check_against_torch(ours_fwd, ours_bwd, torch_fn, inputs, dtype, rng, *, out_keep=None,
                        skip=(), scales=None, ulps=8.0, min_ulps=0.0, rtol64=None):
    """Assert that normlab is no worse than PyTorch on ``inputs`` in ``dtype`` (see
    ``torch_parity`` for the rule); returns normlab's (out, grads)."""
    report = torch_parity(ours_fwd, ours_bwd, torch_fn, inputs, dtype, rng, out_keep=out_keep,
                          skip=skip, scales=scales, tol=Tolerance(ulps, min_ulps, rtol64))
    assert report.dtype_kept, f"the forward returned another dtype than {dtype}"
    assert report.ok, report.failures()
    return report.out, report.grads
