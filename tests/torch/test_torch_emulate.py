"""emulate: normlab's GPT under a policy and its torch twin under emulate agree."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from twin import TwinGPT

from normlab.models import GPT, GPTConfig
from normlab.nn.numerics import PolicyNumerics, numerics_scope
from normlab.precision import Precision, TensorScaling, get_policy
from normlab.torch import emulate

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layers=2, d_model=64, n_heads=4)
CUSTOM = replace(get_policy("amp_bf16"), name="custom", compute="float8_e5m2",
                 activations="float16", gradients=Precision("float8_e4m3fn",
                                                             scaling=TensorScaling()))
ULPS = 64  # float32 rounding: the products sum in another order (numpy's BLAS, torch's)
POLICIES = ["fp32", "amp_bf16", "amp_fp16", "pure_bf16", "fp8_hybrid", "mxfp8", "custom"]


def _policy(name):
    return CUSTOM if name == "custom" else get_policy(name)


def _scale(policy) -> float:
    """The loss scale of the policy's first step (its scaler's initial scale; 1 without)."""
    return 1.0 if policy.loss_scaling is None else float(policy.loss_scaling.init_scale)


def _normlab(model, idx, targets, policy, steps):
    numerics = PolicyNumerics(policy)
    with numerics_scope(model, numerics):
        for _ in range(steps):
            model.zero_grad()
            loss = model.forward(idx, targets).loss
            model.backward(_scale(policy))
            numerics.end_step()
    return float(loss), model.gradients()


def _torch(model, idx, targets, policy, steps):
    with emulate(model, policy, stream=[f"layers.{i}" for i in range(len(model.layers))],
                 embed="embed") as em:
        for _ in range(steps):
            model.zero_grad()
            loss = model(torch.from_numpy(idx), torch.from_numpy(targets))
            (loss * _scale(policy)).backward()
            em.end_step()
    return float(loss.detach()), {k: t.grad.numpy() for k, t in model.named.items()}


def twin_differences(name: str, steps: int = 2, seed: int = 0) -> dict:
    """Loss difference and the largest gradient difference in units of float32's rounding
    (ulp of each gradient's largest magnitude), normlab against the twin under emulate."""
    rng = np.random.default_rng(seed)
    model = GPT(CFG, rng=rng)
    idx = rng.integers(0, CFG.vocab_size, (2, CFG.seq_len))
    targets = rng.integers(0, CFG.vocab_size, (2, CFG.seq_len))
    twin = TwinGPT(CFG, model.parameters())
    policy = _policy(name)
    loss_a, grads_a = _normlab(model, idx, targets, policy, steps)
    loss_b, grads_b = _torch(twin, idx, targets, policy, steps)
    worst, where, beyond, total, rel = 0.0, "", 0, 0, 0.0
    for k, ga in grads_a.items():
        top = float(np.abs(ga).max())
        ulp = float(np.spacing(np.float32(top)))
        d = np.abs(ga - grads_b[k]) / ulp
        rel = max(rel, float(d.max()) * ulp / top)
        beyond += int(np.count_nonzero(d > ULPS))
        total += d.size
        if d.max() > worst:
            worst, where = float(d.max()), k
    return {"loss_a": loss_a, "loss_b": loss_b, "loss_diff": abs(loss_a - loss_b),
            "grad_ulps": worst, "worst": where, "beyond": beyond, "elements": total,
            "grad_rel": rel, "format_step": _step(policy)}


def _step(policy) -> float:
    """2^-(M+1): half the relative spacing of the coarsest format a rounding role uses."""
    m = min((getattr(policy, r).format.mantissa_bits for r in
             ("params", "compute", "activations", "gradients") if getattr(policy, r).rounds),
            default=23)
    return 2.0 ** -(m + 1)


@pytest.mark.parametrize("name", POLICIES)
def test_twin_agrees(name):
    r = twin_differences(name)
    print(name, r)
    # The loss within float32 rounding. Gradients: where a product lands within float32 rounding
    # of a rounding boundary of the policy's format, the two sums (numpy's and torch's order)
    # round to neighbouring values of the format, and that difference flows on down the
    # backward. So: every gradient within a few of the format's rounding steps (relative to the
    # tensor's largest value), and without such a flip within ULPS float32 roundings.
    assert r["loss_diff"] <= 1e-6 * abs(r["loss_a"]), r
    assert r["grad_rel"] <= max(4 * r["format_step"], ULPS * 2.0**-23), r
    if name in ("fp32", "amp_bf16", "pure_bf16", "mxfp8"):  # (no flip at this seed)
        assert r["beyond"] == 0, r


def test_bad_arguments():
    m = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        emulate(object(), "amp_bf16")
    with pytest.raises(TypeError, match="policy must be"):
        emulate(m, 3)
    with pytest.raises(ValueError, match="no module named"):
        emulate(m, "amp_bf16", stream=["nope"])
    with pytest.raises(ValueError):
        emulate(m, "no_such_preset")
    sr = replace(get_policy("amp_bf16"), name="sr",
                 params=Precision("bfloat16", rounding="stochastic"))
    with pytest.raises(TypeError, match="rng="):
        emulate(m, sr)


def test_linear_is_rounded_and_restored():
    m = torch.nn.Linear(8, 4, bias=False)
    x = torch.randn(3, 8)
    with emulate(m, "amp_bf16"):
        y = m(x)
    q = lambda t: t.to(torch.bfloat16).float()  # noqa: E731
    want = q(q(x) @ q(m.weight).T)
    assert torch.equal(y, want)
    assert torch.equal(m(x), x @ m.weight.T)  # afterwards: untouched


def test_gpt2_conv1d_addmm_is_a_linear():
    w = torch.nn.Parameter(torch.randn(8, 4))  # (in, out), as transformers' Conv1D
    b = torch.nn.Parameter(torch.randn(4))
    m = torch.nn.Module()
    m.w, m.b = w, b
    x = torch.randn(3, 8)
    with emulate(m, "amp_bf16"):
        y = torch.addmm(b, x, w)
    q = lambda t: t.to(torch.bfloat16).float()  # noqa: E731
    assert torch.equal(y, q(torch.addmm(b, q(x), q(w))))
