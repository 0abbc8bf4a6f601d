"""PyTorch parity for the Transformer ops: run normlab and torch on the same inputs, compare the
forward and every gradient (float64 tightly; float32 against torch's float64 result with a
tolerance in units of float32's epsilon)."""

from __future__ import annotations

import numpy as np

from normlab.testing import errors, format_eps, oracles


def check_vjp(ours_fwd, ours_bwd, torch_fn, inputs: dict, dtype, rng, *, ulps: float = 64.0,
              rtol64: float = 1e-12) -> tuple[np.ndarray, dict]:
    """Compare normlab with ``torch_fn(**tensors)`` on ``inputs`` rounded to ``dtype``.

    float64: every result within ``rtol64`` (norm-wise) of torch's. Lower formats: normlab's error
    against torch's float64 result on the same rounded inputs is at most ``ulps`` units of the
    format's epsilon (norm-wise), and at most twice torch's own error plus a few units.
    Returns normlab's (out, grads by name).
    """
    dtype = np.dtype(dtype)
    rounded = {k: v.astype(dtype) for k, v in inputs.items()}
    exact = {k: v.astype(np.float64) for k, v in rounded.items()}
    out, cache = ours_fwd(*rounded.values())
    dout = rng.normal(size=np.shape(out)).astype(dtype)
    grads = ours_bwd(dout, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    grads = dict(zip(rounded, grads))
    wrt = tuple(k for k, g in grads.items() if g is not None)
    ref_out, ref_grads = oracles.vjp(torch_fn, exact, dout.astype(np.float64), wrt)
    pairs = [("forward", out, ref_out)] + [(f"d{k}", grads[k], ref_grads[k]) for k in wrt]
    if dtype == np.float64:
        for what, a, e in pairs:
            rel = errors(a, e)[1]
            assert rel <= rtol64, f"{what}: norm-wise relative error {rel:.3g} > {rtol64:.3g}"
        return out, grads
    t_out, t_grads = oracles.vjp(torch_fn, rounded, dout, wrt)
    theirs = {"forward": t_out, **{f"d{k}": t_grads[k] for k in wrt}}
    eps = format_eps(dtype)
    for what, a, e in pairs:
        ours = errors(np.asarray(a).astype(np.float64), e)[1]
        base = errors(np.asarray(theirs[what]).astype(np.float64), e)[1]
        bound = max(ulps * eps, 2.0 * base + 8 * eps)
        assert ours <= bound, (
            f"{what} in {dtype}: relative error {ours:.3g} vs float64 torch exceeds {bound:.3g} "
            f"(torch's own: {base:.3g})"
        )
    return out, grads
