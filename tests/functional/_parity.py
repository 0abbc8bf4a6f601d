"""Shared PyTorch-parity check for the functional tests."""

import numpy as np

from normlab.testing import assert_no_worse_than, errors, format_eps, oracles


# Ops built on matrix products: torch sums in another order, so float64 agrees to about 1e-12
# and a low format to a few dozen units of its epsilon.
GEMM = {"min_ulps": 64.0, "rtol64": 1e-12}


def check_against_torch(ours_fwd, ours_bwd, torch_fn, inputs, dtype, rng, *, out_keep=None,
                        skip=(), scales=None, ulps=8.0, min_ulps=0.0, rtol64=None):
    """Run normlab and ``torch_fn(**tensors)`` in ``dtype`` on the same (rounded) inputs and
    compare the forward and every gradient (but those named in ``skip``) with torch's float64
    result on those inputs.

    Lower formats: normlab's norm-wise relative error is at most twice torch's own plus ``ulps``
    units of the format's epsilon, or ``min_ulps`` units, whichever is larger. float64: within
    ``rtol64`` of torch when given (ops whose float64 results differ by summation order), else the
    same rule (torch's own error is then 0). ``out_keep`` masks don't-care outputs; ``scales(
    exact_inputs, dout) -> {name: magnitude}`` gives the natural magnitude of a gradient that is
    a sum with cancellation (see ``normlab.testing.errors``). Returns normlab's (out, grads).
    """
    dtype = np.dtype(dtype)
    inputs = {k: v.astype(dtype) for k, v in inputs.items()}
    exact = {k: v.astype(np.float64) for k, v in inputs.items()}
    out, cache = ours_fwd(*inputs.values())
    dout = rng.normal(size=np.shape(out))
    if out_keep is not None:
        dout = dout * out_keep
    dout = dout.astype(dtype)
    grads = ours_bwd(dout, cache)
    grads = dict(zip(inputs, grads if isinstance(grads, tuple) else (grads,)))
    wrt = tuple(k for k, g in grads.items() if g is not None and k not in skip)
    ref_out, ref_grads = oracles.vjp(torch_fn, exact, dout.astype(np.float64), wrt)
    t_out, t_grads = oracles.vjp(torch_fn, inputs, dout, wrt)
    keep = 1.0 if out_keep is None else out_keep
    f64 = lambda a: np.asarray(a).astype(np.float64) * keep  # noqa: E731
    assert out.dtype == dtype
    scale = {} if scales is None else scales(exact, dout.astype(np.float64))
    rows = [("forward", f64(out), f64(t_out), f64(ref_out), 0.0)]
    rows += [(f"d{k}", grads[k], t_grads[k], ref_grads[k], scale.get(k, 0.0)) for k in wrt]
    for what, ours, theirs, ref, s in rows:
        if dtype == np.float64 and rtol64 is not None:
            rel = errors(ours, ref, s)[1]
            assert rel <= rtol64, f"{what}: norm-wise relative error {rel:.3g} > {rtol64:.3g}"
            continue
        if errors(ours, ref, s)[1] <= min_ulps * format_eps(dtype):
            continue
        assert_no_worse_than(ours, theirs, ref, dtype=dtype, ulps=ulps, scale=s, what=what)
    return out, grads
