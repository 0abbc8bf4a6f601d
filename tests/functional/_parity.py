"""Shared PyTorch-parity check for the functional tests."""

import numpy as np

from normlab.testing import assert_no_worse_than, oracles


def check_against_torch(ours_fwd, ours_bwd, torch_fn, inputs, dtype, rng, *, out_keep=None,
                        skip=(), scales=None):
    """Run normlab and torch in ``dtype`` on the same (rounded) inputs and compare both to torch in
    float64: forward and every gradient (but those named in ``skip``). ``scales(exact_inputs,
    dout) -> {name: magnitude}`` gives the natural magnitude of a gradient that is a sum with
    cancellation (see ``normlab.testing.errors``). Returns normlab's (out, grads)."""
    inputs = {k: v.astype(dtype) for k, v in inputs.items()}
    exact = {k: v.astype(np.float64) for k, v in inputs.items()}
    out, cache = ours_fwd(*inputs.values())
    dout = rng.normal(size=out.shape)
    if out_keep is not None:
        dout = dout * out_keep
    dout = dout.astype(dtype)
    grads = dict(zip(inputs, ours_bwd(dout, cache)))
    wrt = tuple(k for k, g in grads.items() if g is not None and k not in skip)
    ref_out, ref_grads = oracles.vjp(torch_fn, exact, dout.astype(np.float64), wrt)
    t_out, t_grads = oracles.vjp(torch_fn, inputs, dout, wrt)
    keep = 1.0 if out_keep is None else out_keep
    f64 = lambda a: np.asarray(a).astype(np.float64) * keep  # noqa: E731
    assert out.dtype == dtype
    assert_no_worse_than(f64(out), f64(t_out), f64(ref_out), dtype=dtype, what="forward")
    scale = {} if scales is None else scales(exact, dout.astype(np.float64))
    for k in wrt:
        assert_no_worse_than(grads[k], t_grads[k], ref_grads[k], dtype=dtype,
                             scale=scale.get(k, 0.0), what=f"d{k}")
    return out, grads
