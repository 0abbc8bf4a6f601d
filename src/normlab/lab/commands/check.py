"""``normlab check``: gradient-check every op and compare it with PyTorch.

For each op, the float64 row checks the hand-written backward against central finite differences
and the forward and backward against PyTorch in float64. The float32, float16 and bfloat16 rows
compare normlab and PyTorch *each against PyTorch's float64 result on the same rounded inputs*
(``normlab.testing.parity``, the driver the tests use, with the same tolerances): an op passes
when its error is at most twice PyTorch's plus a few units of the format's epsilon (the tolerance
pattern of flash-attention's tests), so neither library is taken as exact.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np

from ... import functional as Fn
from ...functional import centernorm, gating, ngpt
from ...testing import gradcheck
from ...testing.parity import DEFAULT, GEMM, Tolerance, derf_scales, dyt_scales
from ..formatting import fmt

DTYPES = ("float64", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class OpCheck:
    """One op to check: how to make inputs, normlab's pair, and PyTorch's version."""

    name: str
    inputs: Callable[[np.random.Generator], dict[str, np.ndarray]]  # float64 inputs
    forward: Callable[..., tuple[Any, Any]]  # forward(*inputs) -> (out, cache)
    backward: Callable[[np.ndarray, Any], Any]  # -> gradients in the order of inputs
    torch: Callable[..., Any] | None = None  # torch(**tensors) -> out tensor, or None
    out_mask: Callable[[dict], np.ndarray] | None = None  # outputs that carry gradient
    tol: Tolerance = DEFAULT  # GEMM for matrix products, whose sums torch orders differently
    scales: Callable | None = None  # natural magnitudes of gradients that are sums (parity)
    covers: str = ""  # the functional forward a wrapping ``forward`` checks (its name)

    def checks(self) -> str:
        """The name of the ``normlab.functional`` forward this check exercises."""
        f = self.forward
        while isinstance(f, partial):
            f = f.func
        return self.covers or getattr(f, "__name__", "")


def _norm_inputs(rng, shape=(3, 5, 16), params=("weight", "bias")):
    C = shape[-1]
    d = {"x": rng.normal(1.0, 2.0, size=shape)}
    for p in params:  # random, never ones and zeros: they hide wrong backwards
        d[p] = rng.normal(size=C)
    return d


def _bn_inputs(rng, masked=False):
    d = _norm_inputs(rng, (4, 6, 8))
    d["running_mean"] = rng.normal(size=8)
    d["running_var"] = rng.uniform(0.5, 2.0, size=8)
    return d


_MASK = np.random.default_rng(7).random((4, 6)) > 0.35
_IDS = np.random.default_rng(8).integers(0, 11, size=(3, 5))  # token ids into an (11, 16) table
_TARGETS = np.random.default_rng(9).integers(0, 13, size=(3, 5))  # class ids for (3, 5, 13) logits
_ROPE = Fn.rope_tables(6, 8)  # (cos, sin) for T = 6, D = 8
_SIGMOID_BIAS = -np.log(6.0)  # sigmoid attention's b = -log(T) (Ramapuram et al.)


def _bn(training, mask=None):
    def forward(x, gamma, beta, running_mean, running_var):
        out, cache, _, _ = Fn.batch_norm_forward(
            x, gamma, beta, running_mean, running_var, training=training, mask=mask
        )
        return out, cache

    def backward(dout, cache):
        return Fn.batch_norm_backward(dout, cache) + (None, None)

    return forward, backward


def _torch_ops():
    """PyTorch's versions, or None when torch is not installed."""
    try:
        from ...testing import oracles as O
    except ImportError:
        return None
    import torch
    from torch.nn.functional import linear as F_linear

    from ...testing import center_oracle

    def bn(training, mask=None):
        def f(x, weight, bias, running_mean, running_var):
            rm, rv = running_mean.detach().clone(), running_var.detach().clone()
            if mask is None:
                return O.batch_norm(x, weight, bias, rm, rv, training=training)
            m = torch.from_numpy(mask)
            out = O.batch_norm(x[m], weight, bias, rm, rv, training=training)  # valid rows only
            full = torch.zeros_like(x)
            full[m] = out
            return full
        return f

    return {
        "layer_norm": O.layer_norm,
        "rms_norm": O.rms_norm,
        "rms_norm(partial=0.25)": lambda x, weight: O.rms_norm(x, weight, partial=0.25),
        "rms_norm(offset=1)": lambda x, weight: O.rms_norm(x, weight, offset=1.0),
        "batch_norm(train)": bn(True),
        "batch_norm(train, mask)": bn(True, _MASK),
        "batch_norm(eval)": bn(False),
        "dyt": O.dyt,
        "center_norm": center_oracle.center_norm,
        "derf": O.derf,
        "sigmoid_gate": O.sigmoid_gate,
        "l2_normalize (nGPT)": O.justnorm,
        "ngpt_update": O.ngpt_update,
        "ngpt_qk(rope)": partial(O.ngpt_qk, rope=_ROPE),
        "linear": F_linear,
        "embedding": partial(O.embedding, ids=_IDS),
        "gelu(tanh)": partial(O.gelu, approximate="tanh"),
        "gelu(erf)": O.gelu,
        "relu": torch.relu,
        "swiglu": O.swiglu,
        "softmax": lambda x: torch.softmax(x, -1),
        "attention": O.attention,
        "attention(qk-norm, rope, cap)": partial(O.attention, qk_norm="rmsnorm", rope=_ROPE,
                                                 softcap=2.0),
        "attention(sigmoid)": partial(O.attention, sigmoid_bias=_SIGMOID_BIAS),
        "cross_entropy": partial(O.cross_entropy, targets=_TARGETS),
        "cross_entropy(cap, z, smooth)": partial(O.cross_entropy, targets=_TARGETS, softcap=3.0,
                                                 z_loss=1e-2, label_smoothing=0.1),
    }


def _dropout_forward(x):
    # A fresh generator per call: every finite-difference evaluation sees the same mask.
    return Fn.dropout_forward(x, 0.3, training=True, rng=np.random.default_rng(1))


def _heads(rng, qk_norm=False):
    d = {n: rng.normal(0.0, 1.5, size=(2, 2, 6, 8)) for n in ("q", "k", "v")}  # (B, H, T, D)
    if qk_norm:
        d["q_norm_weight"], d["k_norm_weight"] = rng.normal(1.0, 0.5, size=(2, 8))
    return d


def _first(n, backward):
    """A backward returning only the gradients of the first ``n`` inputs (the op has more)."""
    return lambda dout, cache: tuple(backward(dout, cache))[:n]


def _design_checks() -> list[OpCheck]:
    """The ops of the 2024-26 designs (Derf, gated and sigmoid attention, nGPT's three) and of
    the ablations (centering only)."""
    return [
        OpCheck("center_norm", _norm_inputs, centernorm.center_norm_forward,
                centernorm.center_norm_backward),
        OpCheck("attention(sigmoid)", _heads,
                partial(Fn.attention_forward, sigmoid_bias=_SIGMOID_BIAS),
                _first(3, Fn.attention_backward), tol=GEMM),
        OpCheck("derf", lambda rng: {"x": rng.normal(0.0, 2.0, size=(3, 5, 16)),
                                     "alpha": np.array(0.7), "shift": np.array(-0.3),
                                     "weight": rng.normal(size=16), "bias": rng.normal(size=16)},
                Fn.derf_forward, Fn.derf_backward, scales=derf_scales),
        OpCheck("sigmoid_gate", lambda rng: {"y": rng.normal(size=(3, 5, 16)),
                                             "g": rng.normal(0.0, 2.0, size=(3, 5, 16))},
                gating.sigmoid_gate_forward, gating.sigmoid_gate_backward),
        OpCheck("l2_normalize (nGPT)", lambda rng: {"x": rng.normal(size=(3, 5, 16))},
                ngpt.l2_normalize_forward, ngpt.l2_normalize_backward),
        OpCheck("ngpt_update", lambda rng: {"h": rng.normal(size=(3, 5, 16)),
                                            "f": rng.normal(0.0, 0.3, size=(3, 5, 16)),
                                            "alpha": rng.normal(0.0, 0.4, size=16)},
                ngpt.ngpt_update_forward, ngpt.ngpt_update_backward),
        OpCheck("ngpt_qk(rope)", lambda rng: {"x": rng.normal(size=(2, 2, 6, 8)),
                                              "s": rng.normal(1.0, 0.5, size=(2, 8))},
                partial(ngpt.ngpt_qk_forward, rope=_ROPE), ngpt.ngpt_qk_backward),
    ]


def op_checks() -> list[OpCheck]:
    """Every op ``normlab check`` runs (``CHECKED_ELSEWHERE`` names the rest)."""
    bn_train, bn_train_b = _bn(True)
    bn_mask, bn_mask_b = _bn(True, _MASK)
    bn_eval, bn_eval_b = _bn(False)

    def masked(d: dict) -> np.ndarray:
        return np.broadcast_to(_MASK[..., None], d["x"].shape)

    return [
        OpCheck("layer_norm", _norm_inputs, Fn.layer_norm_forward, Fn.layer_norm_backward),
        OpCheck("rms_norm", partial(_norm_inputs, params=("weight",)),
                Fn.rms_norm_forward, Fn.rms_norm_backward),
        OpCheck("rms_norm(partial=0.25)", partial(_norm_inputs, params=("weight",)),
                partial(Fn.rms_norm_forward, partial=0.25), Fn.rms_norm_backward),
        OpCheck("rms_norm(offset=1)", partial(_norm_inputs, params=("weight",)),
                partial(Fn.rms_norm_forward, offset=1.0), Fn.rms_norm_backward),
        OpCheck("batch_norm(train)", _bn_inputs, bn_train, bn_train_b,
                covers="batch_norm_forward"),
        OpCheck("batch_norm(train, mask)", _bn_inputs, bn_mask, bn_mask_b, out_mask=masked),
        OpCheck("batch_norm(eval)", _bn_inputs, bn_eval, bn_eval_b),
        OpCheck("dyt", lambda rng: {"x": rng.normal(size=(3, 5, 16)), "alpha": np.array(0.7),
                                    "weight": rng.normal(size=16), "bias": rng.normal(size=16)},
                Fn.dyt_forward, Fn.dyt_backward, scales=dyt_scales),
        OpCheck("dropout(p=0.3)", lambda rng: {"x": rng.normal(size=(3, 5, 16))},
                _dropout_forward, Fn.dropout_backward, covers="dropout_forward"),
        OpCheck("linear", lambda rng: {"x": rng.normal(size=(3, 5, 16)),
                                       "weight": rng.normal(size=(12, 16)) / 4,
                                       "bias": rng.normal(size=12)},
                Fn.linear_forward, Fn.linear_backward, tol=GEMM),
        OpCheck("embedding", lambda rng: {"weight": rng.normal(size=(11, 16))},
                partial(Fn.embedding_forward, _IDS),
                lambda dout, cache: Fn.embedding_backward(dout, cache)[1:], tol=GEMM),
        OpCheck("gelu(tanh)", lambda rng: {"x": rng.normal(0, 2, size=(3, 5, 16))},
                partial(Fn.gelu_forward, approximate="tanh"), Fn.gelu_backward, tol=GEMM),
        OpCheck("gelu(erf)", lambda rng: {"x": rng.normal(0, 2, size=(3, 5, 16))},
                Fn.gelu_forward, Fn.gelu_backward, tol=GEMM),
        OpCheck("relu", lambda rng: {"x": rng.normal(0, 2, size=(3, 5, 16))},
                Fn.relu_forward, Fn.relu_backward),
        OpCheck("swiglu", lambda rng: {"a": rng.normal(0, 2, size=(3, 5, 16)),
                                       "b": rng.normal(size=(3, 5, 16))},
                Fn.swiglu_forward, Fn.swiglu_backward, tol=GEMM),
        OpCheck("softmax", lambda rng: {"x": rng.normal(0, 3, size=(3, 5, 16))},
                Fn.softmax_forward, Fn.softmax_backward, tol=GEMM),
        OpCheck("attention", _heads, Fn.attention_forward, _first(3, Fn.attention_backward),
                tol=GEMM),
        OpCheck("attention(qk-norm, rope, cap)", partial(_heads, qk_norm=True),
                partial(Fn.attention_forward, qk_norm="rmsnorm", rope=_ROPE, softcap=2.0),
                _first(5, Fn.attention_backward), tol=GEMM),
        OpCheck("cross_entropy", lambda rng: {"logits": rng.normal(0, 3, size=(3, 5, 13))},
                partial(Fn.cross_entropy_forward, targets=_TARGETS),
                _first(1, Fn.cross_entropy_backward), tol=GEMM),
        OpCheck("cross_entropy(cap, z, smooth)",
                lambda rng: {"logits": rng.normal(0, 3, size=(3, 5, 13))},
                partial(Fn.cross_entropy_forward, targets=_TARGETS, softcap=3.0, z_loss=1e-2,
                        label_smoothing=0.1),
                _first(1, Fn.cross_entropy_backward), tol=GEMM),
        *_design_checks(),
    ]


#: The functional forwards ``normlab check`` does not list, each with where it is checked: the
#: parts of an op it checks whole, and the variants the model and the ensemble engine call
#: (tests/lab/test_check.py keeps every public ``*_forward`` of ``normlab.functional`` either in
#: ``op_checks()`` or here).
CHECKED_ELSEWHERE: dict[str, str] = {
    "add_norm_forward": "the fused residual add and norm: tests/functional/test_add_norm.py "
                        "against layer_norm / rms_norm of the sum",
    "qk_norm_forward": "a part of attention(qk-norm, rope, cap)",
    "qk_norm_members_forward": "the ensemble's QK-norm: tests/functional/test_attention.py",
    "capped_softmax_forward": "a part of attention(qk-norm, rope, cap) (the soft-cap and the "
                              "softmax)",
    "rope_forward": "a part of attention(qk-norm, rope, cap) and ngpt_qk(rope); "
                    "tests/functional/test_rope.py",
    "shift_noise_forward": "the lab's injected noise (internal-covariate-shift): "
                           "tests/functional/test_noise.py",
}


@dataclass
class Row:
    op: str
    dtype: str
    fwd: float | None = None  # normlab forward error (relative, vs torch float64)
    fwd_torch: float | None = None  # torch's own forward error in this dtype
    bwd: float | None = None  # normlab backward error (relative, worst input)
    bwd_torch: float | None = None
    fd: float | None = None  # backward vs finite differences (float64 row)
    ok: bool = True
    note: str = ""


def check_op(op: OpCheck, torch_fn: Callable[..., Any] | None, dtype_name: str,
             rng_seed: int = 0) -> Row:
    """One op in one dtype: finite differences (float64) and PyTorch parity (``torch_parity``)."""
    from ...testing.parity import torch_parity

    base = op.inputs(np.random.default_rng(rng_seed))
    dtype = np.dtype(getattr(ml_dtypes, dtype_name) if dtype_name == "bfloat16" else dtype_name)
    row = Row(op.name, dtype_name)
    mask = None if op.out_mask is None else op.out_mask(base)  # padded outputs: don't-care
    if dtype_name == "float64":
        fwd = op.forward if mask is None else (
            lambda *a: (op.forward(*a)[0] * mask, op.forward(*a)[1]))
        rep = gradcheck(fwd, op.backward, base, rng=np.random.default_rng(rng_seed + 2))
        row.fd, row.ok = rep.max_rel, rep.passed
    if torch_fn is None:
        return row
    report = torch_parity(op.forward, op.backward, torch_fn, base, dtype,
                          np.random.default_rng(rng_seed + 1), out_keep=mask, scales=op.scales,
                          tol=op.tol)
    row.fwd, row.fwd_torch = report.forward.ours, report.forward.torch
    row.bwd, row.bwd_torch = report.backward()
    row.ok &= report.ok
    if not report.ok:
        row.note = report.failures()
    return row


def run_checks(ops: list[OpCheck] | None = None, dtypes: Sequence[str] = DTYPES,
               use_torch: bool = True) -> list[Row]:
    ops = op_checks() if ops is None else ops
    torch_ops = _torch_ops() if use_torch else None
    rows = []
    for op in ops:
        torch_fn = None if torch_ops is None else torch_ops.get(op.name)
        for dt in dtypes if torch_fn is not None else ("float64",):
            try:
                rows.append(check_op(op, torch_fn, dt))
            except Exception as exc:  # a crash is a failure, reported in the table
                rows.append(Row(op.name, dt, ok=False, note=f"{type(exc).__name__}: {exc}"))
    return rows


def format_table(rows: list[Row]) -> str:
    def f(v):
        return fmt(v, spec=".1e")

    head = (f"{'op':<30} {'dtype':<9} {'fwd err':>8} {'torch':>8} {'bwd err':>8} {'torch':>8} "
            f"{'vs FD':>8}  result")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.op:<30} {r.dtype:<9} {f(r.fwd):>8} {f(r.fwd_torch):>8} {f(r.bwd):>8} "
            f"{f(r.bwd_torch):>8} {f(r.fd):>8}  {'pass' if r.ok else 'FAIL'} {r.note}"
        )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")


def main(args: argparse.Namespace) -> int:
    rows = run_checks(use_torch=not args.no_torch)
    print(format_table(rows))
    print()
    print("errors are relative (max |error| / max |reference|); the reference is PyTorch in "
          "float64 on the same rounded inputs;\n'torch' is PyTorch's own error in that dtype; "
          "'vs FD' is the backward against central finite differences in float64.")
    if _torch_ops() is None and not args.no_torch:
        print("PyTorch is not installed: only the finite-difference checks ran "
              "(pip install 'normlab[test]').")
    failed = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(failed)} of {len(rows)} checks passed")
    return 1 if failed else 0
