"""An emulated low-precision matmul: round the inputs, accumulate, round the output.

    out = round_out( sum_k round_a(a)[..., m, k] * round_b(b)[k, n] )

Products of inputs with at most 12 significant bits (bfloat16, float16, fp8, fp6, fp4) are exact
in float32. With a float32 ``accumulate`` role the sum is NumPy's float32 matmul. With a lower
accumulate format the K products are summed ``accumulate_every`` at a time in float32, and each
partial sum is added to the accumulator and the exact sum rounded to the accumulate format once
(the addition in float64 rounded to odd, ``accumulate.add_to_odd``, then the format): with
``accumulate_every=1`` that is a running sum
in the low format, which stalls once the accumulator's half-ulp exceeds the terms (swamping).
With ``accumulate_chunk`` (the policy's promotion interval) the accumulator restarts every
``accumulate_chunk`` products and each chunk's sum is added to a float32 total (rounded once), as
fp8 GEMMs promote their partial sums to CUDA-core float32 registers every 128 products
(DeepSeek-V3, section 3.3.2: every 4 WGMMAs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .accumulate import add_to_odd
from .policy import ROLES, PrecisionPolicy, get_policy
from .rounding import quantize
from .scaling import DelayedScalingState


def matmul(a: Any, b: Any, policy: PrecisionPolicy | str = "fp32", *,
           roles: tuple[str, str] = ("compute", "compute"),
           rng: np.random.Generator | None = None,
           states: tuple[DelayedScalingState | None, DelayedScalingState | None] = (None, None)
           ) -> Array:
    """a @ b under a precision policy.

    Args:
        a: float array (..., M, K).
        b: float array (K, N) or (..., K, N).
        policy: a PrecisionPolicy or a preset name. Its ``roles`` round the inputs (MX blocks
            run along K), its ``accumulate`` role and ``accumulate_every`` the sum, and its
            ``activations`` role rounds the output.
        roles: the roles that round a and b: ("compute", "compute") for the forward pass,
            ("gradients", "compute") for a data-gradient matmul dY @ W^T, and so on.
        rng: for stochastic rounding in any of these roles.
        states: delayed-scaling states for a and b (``policy.<role>.new_state()``), required
            when their role uses delayed scaling.

    Returns:
        (..., M, N), float32 (float64 when a or b is float64).
    """
    a = ck.float_array(a, "a")
    b = ck.float_array(b, "b")
    if isinstance(policy, str):
        policy = get_policy(policy)
    if not isinstance(policy, PrecisionPolicy):
        raise TypeError(f"policy must be a PrecisionPolicy or a preset name; got "
                        f"{type(policy).__name__}")
    if not (isinstance(roles, tuple) and len(roles) == 2):
        raise TypeError(f"roles must be a pair of role names; got {roles!r}")
    for r in roles:
        if r not in ROLES or r == "master":
            raise ValueError(f"roles: {r!r} is not a role a matmul input can take; roles: "
                             f"{', '.join(x for x in ROLES if x != 'master')}")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"a and b must have at least 2 dimensions; got {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"a's last axis ({a.shape[-1]}) must match b's second-to-last "
                         f"({b.shape[-2]})")
    ct = np.result_type(ck.compute_dtype(a.dtype), ck.compute_dtype(b.dtype))
    # every role but master (refused above) always has a precision
    aq = policy.role(roles[0]).apply(  # type: ignore[union-attr]
        a, rng=rng, state=states[0], axis=-1).astype(ct, copy=False)
    bq = policy.role(roles[1]).apply(  # type: ignore[union-attr]
        b, rng=rng, state=states[1], axis=-2).astype(ct, copy=False)
    K = aq.shape[-1]
    if not policy.accumulate.rounds or K == 0:
        out = aq @ bq
    elif policy.accumulate_chunk is None:
        out = _accumulated(aq, bq, policy, rng, ct)
    else:  # a fresh accumulator every accumulate_chunk products, added to a float32 total
        c = policy.accumulate_chunk
        out = _accumulated(aq[..., :c], bq[..., :c, :], policy, rng, ct)
        for i in range(c, K, c):
            part = _accumulated(aq[..., i:i + c], bq[..., i:i + c, :], policy, rng, ct)
            out = quantize(add_to_odd(out, part), "float32").astype(ct)
    return policy.activations.apply(out, rng=rng).astype(ct, copy=False)


def _accumulated(aq: Array, bq: Array, policy: PrecisionPolicy, rng: np.random.Generator | None,
                 ct: np.dtype) -> Array:
    """sum_k aq[..., k] bq[k, :] in the accumulate format: ``accumulate_every`` products at a
    time in float32, each partial added to the accumulator, the exact sum rounded once (K >= 1)."""
    acc, k, K = policy.accumulate, policy.accumulate_every, aq.shape[-1]
    out = None
    for i in range(0, K, k):
        part = (aq[..., i:i + k] @ bq[..., i:i + k, :]).astype(np.float64)
        total = part if out is None else add_to_odd(out, part)
        out = quantize(total, acc.format, rounding=acc.rounding, overflow=acc.overflow,
                       rng=rng).astype(ct)
    assert out is not None
    return out
