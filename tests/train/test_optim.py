"""AdamW and SGD against torch.optim, step for step in float64; schedules; clipping rule."""

import math

import numpy as np
import pytest
import torch

from normlab.train import SGD, AdamW, learning_rate
from normlab.train.optim import clip_grad_norm
from normlab.train.schedules import check_schedule


def _params(rng):
    return {"w": rng.normal(size=(4, 3)), "g": rng.normal(size=3)}


def _run_both(ours_cls, torch_cls, ours_kw, torch_kw, steps=5, lrs=(1e-2, 5e-3, 2e-2, 1e-3, 1e-2)):
    rng = np.random.default_rng(0)
    params = _params(rng)
    tparams = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in params.items()}
    opt = ours_cls(params, **ours_kw)
    groups = [{"params": [tparams["w"]]},
              {"params": [tparams["g"]], "weight_decay": 0.0}]  # decay only matrices
    topt = torch_cls(groups, lr=lrs[0], **torch_kw)
    for t in range(steps):
        grads = {k: rng.normal(size=v.shape) for k, v in params.items()}
        for k, tp in tparams.items():
            tp.grad = torch.tensor(grads[k])
        for group in topt.param_groups:
            group["lr"] = lrs[t]
        topt.step()
        opt.step(grads, lrs[t])
        for k in params:
            np.testing.assert_allclose(
                params[k], tparams[k].detach().numpy(), rtol=1e-13, atol=1e-15
            )


def test_adamw_matches_torch():
    _run_both(AdamW, torch.optim.AdamW, dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
              dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1))


def test_sgd_matches_torch():
    _run_both(SGD, torch.optim.SGD, dict(momentum=0.9, weight_decay=0.05),
              dict(momentum=0.9, weight_decay=0.05))


def test_update_norms_and_moments_dtype():
    rng = np.random.default_rng(1)
    params = {"w": rng.normal(size=(3, 3)).astype(np.float32)}
    before = params["w"].copy()
    opt = AdamW(params, weight_decay=0.0)
    sq = opt.step({"w": rng.normal(size=(3, 3)).astype(np.float32)}, 1e-2)
    assert opt.state["w"]["m"].dtype == np.float32
    assert sq["w"] == pytest.approx(
        float(np.sum((params["w"] - before).astype(np.float64) ** 2)), rel=1e-5
    )
    # the first Adam step moves every weight by about lr (m/sqrt(v) = sign(g))
    np.testing.assert_allclose(np.abs(params["w"] - before), 1e-2, rtol=1e-3)


def test_rounding_hooks_are_applied():
    rng = np.random.default_rng(2)
    params = {"w": rng.normal(size=(2, 2))}
    to_quarter = lambda a: np.round(a * 4) / 4  # noqa: E731
    opt = AdamW(params, weight_decay=0.0, state_round=to_quarter, param_round=to_quarter)
    opt.step({"w": rng.normal(size=(2, 2))}, 0.01)
    assert np.all(params["w"] * 4 == np.round(params["w"] * 4))
    assert np.all(opt.state["w"]["m"] * 4 == np.round(opt.state["w"]["m"] * 4))


def test_state_dict_round_trip_and_mismatch():
    rng = np.random.default_rng(3)
    params = _params(rng)
    opt = AdamW(params)
    opt.step({k: np.ones_like(v) for k, v in params.items()}, 0.1)
    other = AdamW({k: v.copy() for k, v in params.items()})
    other.load_state_dict(opt.state_dict())
    assert other.t == 1 and np.array_equal(other.state["w"]["v"], opt.state["w"]["v"])
    with pytest.raises(ValueError, match="optimizer state does not match"):
        other.load_state_dict({"t": np.asarray(1)})
    with pytest.raises(ValueError, match="lr must be"):
        opt.step({k: np.ones_like(v) for k, v in params.items()}, -0.1)
    with pytest.raises(ValueError, match="gradients missing"):
        opt.step({"w": np.ones((4, 3))}, 0.1)


def test_schedules():
    kw = dict(lr=1.0, warmup=10, total=110)
    assert learning_rate(0, schedule="constant", **kw) == pytest.approx(0.1)
    assert learning_rate(9, schedule="constant", **kw) == 1.0
    assert learning_rate(50, schedule="constant", **kw) == 1.0
    assert learning_rate(109, schedule="cosine", **kw) == pytest.approx(0.0, abs=1e-12)
    assert learning_rate(59, schedule="cosine", **kw) == pytest.approx(0.5)
    assert learning_rate(109, schedule="cosine", min_lr=0.1, **kw) == pytest.approx(0.1)
    # inverse square root: lr * sqrt(warmup / s), continuous at the end of warmup
    assert learning_rate(39, schedule="inverse_sqrt", **kw) == pytest.approx(math.sqrt(10 / 40))
    assert learning_rate(9, schedule="inverse_sqrt", **kw) == 1.0
    assert learning_rate(3, schedule="inverse_sqrt", lr=1.0, warmup=0, total=10) == pytest.approx(
        0.5
    )


@pytest.mark.parametrize("args,message", [
    (("linear", 1.0, 0, 10), "schedule must be one of"),
    (("cosine", 0.0, 0, 10), "lr must be a finite number > 0"),
    (("cosine", 1.0, -1, 10), "warmup must be an integer >= 0"),
    (("cosine", 1.0, 0, 0), "steps must be >= 1"),
])
def test_bad_schedules(args, message):
    with pytest.raises(ValueError, match=message):
        check_schedule(*args)


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clipping_matches_torch(max_norm):
    rng = np.random.default_rng(4)
    grads = {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=5)}
    tensors = [torch.tensor(g.copy(), requires_grad=True) for g in grads.values()]
    for t, g in zip(tensors, grads.values()):
        t.grad = torch.tensor(g.copy())
    total = float(np.sqrt(sum(np.sum(g * g) for g in grads.values())))
    torch_total = torch.nn.utils.clip_grad_norm_(tensors, max_norm)
    assert float(torch_total) == pytest.approx(total, rel=1e-14)
    coef = clip_grad_norm(grads, max_norm, total)
    assert (coef < 1.0) == (max_norm < total)
    for t, g in zip(tensors, grads.values()):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-14)


def _float32_params(rng):
    return {"w": rng.normal(size=(16, 8)).astype(np.float32),
            "e": rng.normal(size=(5, 8)).astype(np.float32),
            "g": (1 + 0.1 * rng.normal(size=8)).astype(np.float32),
            "s": np.asarray(0.3, np.float32)}


@pytest.mark.parametrize("flat", [False, True])
def test_fused_adamw_is_bit_identical_to_numpy(flat):
    """The fused kernel (one call over flat buffers, or one per parameter) gives the NumPy
    update's parameters and moments bit for bit over several steps, learning rates and decay."""
    from normlab.nn import Module

    rng = np.random.default_rng(5)
    ref = _float32_params(rng)
    ours = {k: v.copy() for k, v in ref.items()}
    if flat:  # the parameters as views into one buffer, as Module.flatten lays them out
        m = Module()
        for k, v in ours.items():
            m.add_param(k, v)
        m.flatten()
        ours = m.parameters()
    kw = dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt_ref, opt = AdamW(ref, fused=False, **kw), AdamW(ours, **kw)
    grads_buf = Module()
    for k, v in ref.items():
        grads_buf.add_param(k, v.copy())
    if flat:
        grads_buf.flatten()
    for t, lr in enumerate((1e-2, 3e-3, 2e-2, 7e-4)):
        grads = grads_buf.gradients()
        for g in grads.values():
            g[...] = rng.normal(size=g.shape) * 10.0 ** -t
        sq_ref = opt_ref.step({k: g.copy() for k, g in grads.items()}, lr)
        sq = opt.step(grads, lr)
        assert opt._fused(grads)
        for k in ref:
            np.testing.assert_array_equal(ours[k], ref[k])
            np.testing.assert_array_equal(opt.state[k]["m"], opt_ref.state[k]["m"])
            np.testing.assert_array_equal(opt.state[k]["v"], opt_ref.state[k]["v"])
            assert sq[k] == pytest.approx(sq_ref[k], rel=1e-5)


def test_fused_adamw_applies_only_where_it_is_exact():
    rng = np.random.default_rng(6)
    params = _float32_params(rng)
    grads = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in params.items()}
    assert AdamW(params)._fused(grads)
    assert not AdamW(params, fused=False)._fused(grads)
    assert not AdamW(params, state_round=lambda a: a)._fused(grads)
    assert not AdamW(params)._fused({k: g.astype(np.float64) for k, g in grads.items()})
    with pytest.raises(TypeError, match="fused"):
        AdamW(params, fused="yes")


def test_adamw_update_kernel_refuses_bad_buffers():
    from normlab.kernels.optim import adamw_update

    a = np.zeros(4, np.float32)
    kw = dict(lr=1e-3, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.0, t=1)
    with pytest.raises(TypeError, match="g"):
        adamw_update(a, a.astype(np.float64), a.copy(), a.copy(), [0, 4], [False], **kw)
    with pytest.raises(ValueError, match="m"):
        adamw_update(a, a.copy(), np.zeros(3, np.float32), a.copy(), [0, 4], [False], **kw)
    with pytest.raises(ValueError, match="starts"):
        adamw_update(a, a.copy(), a.copy(), a.copy(), [0, 3], [False], **kw)
