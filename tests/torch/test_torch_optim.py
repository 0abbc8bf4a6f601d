"""PolicyOptimizer: torch's own arithmetic when nothing rounds, normlab's trainer semantics
(the same policy, the same loss-scaler decisions) on the twin model, stochastic rounding seeded
and unbiased."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from twin import TwinGPT

from normlab.models import GPT, GPTConfig
from normlab.nn.numerics import numerics_scope
from normlab.precision import LossScaling, Precision, WeightUpdater, get_policy
from normlab.torch import PolicyOptimizer, emulate
from normlab.train.optim import SGD
from normlab.train.precision import TrainingPrecision

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layers=2, d_model=64, n_heads=4)
# fp16 with a scaler that starts far too high and grows every second step: it skips, backs
# off, recovers and grows within a few steps
FP16_SCALED = replace(get_policy("amp_fp16"), name="fp16_scaled",
                      loss_scaling=LossScaling(init_scale=2.0**40, backoff_factor=2.0**-8,
                                               growth_interval=2))
SR_BF16 = replace(get_policy("pure_bf16"), name="pure_bf16_sr",
                  params=Precision("bfloat16", rounding="stochastic"),
                  optimizer=Precision("bfloat16", rounding="stochastic"))


def _policy(name):
    return {"fp16_scaled": FP16_SCALED, "pure_bf16_sr": SR_BF16}.get(name) or get_policy(name)


def _grads(params, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g) for p in params]


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=False),
    lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.01,
                                foreach=False),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01,
                               foreach=False),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, foreach=False),
    lambda ps: torch.optim.RMSprop(ps, lr=1e-2, foreach=False),
], ids=["adamw", "adam", "sgd", "nesterov", "rmsprop"])
def test_fp32_is_torch_bit_for_bit(make):
    """A policy that rounds nothing: the same bits as torch's own step."""
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(5, 7)), torch.nn.Parameter(torch.randn(3))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    ref, ours = make(a), PolicyOptimizer(make(b), "fp32")
    for k in range(4):
        for p, q, g in zip(a, b, _grads(a, k)):
            p.grad, q.grad = g.clone(), g.clone()
        ref.step()
        assert ours.step() is False
    for p, q in zip(a, b):
        assert torch.equal(p, q)


def _normlab_run(policy, steps, lr, seed):
    """normlab's trainer step by hand (normlab.train.trainer.Trainer.train_step): forward,
    backward of S * loss, end_step, unscale, skip on non-finite, SGD with the policy's
    state_round / param_round, scaler update. Records each step's scaled gradients."""
    rng = np.random.default_rng(seed)
    model = GPT(CFG, rng=rng)
    data = [(rng.integers(0, CFG.vocab_size, (2, CFG.seq_len)),
             rng.integers(0, CFG.vocab_size, (2, CFG.seq_len))) for _ in range(steps)]
    init = {k: v.copy() for k, v in model.parameters().items()}
    prec = TrainingPrecision.from_policy(policy, rng=np.random.default_rng(1))
    params, grads = model.parameters(), model.gradients()
    for p in params.values():
        if prec.param_round is not None:
            p[...] = prec.param_round(p)
    opt = SGD(params, momentum=0.9, weight_decay=0.0, state_round=prec.state_round,
              param_round=prec.param_round)
    run: dict = {"init": init, "data": data, "loss": [], "decisions": [], "scaled": [],
                 "weights": []}
    with numerics_scope(model, prec.numerics), np.errstate(all="ignore"):
        for x, y in data:
            model.zero_grad()
            run["loss"].append(float(model.forward(x, y).loss))
            scale = 1.0 if prec.scaler is None else float(prec.scaler.scale)
            model.backward(scale)
            prec.numerics.end_step()
            run["scaled"].append({k: g.copy() for k, g in grads.items()})
            inv = np.float32(1.0 / scale)
            for g in grads.values():
                g *= inv
            found = not np.isfinite(sum(float(np.vdot(g, g)) for g in grads.values()))
            if not found:
                opt.step(grads, lr)
            if prec.scaler is not None:
                prec.scaler.update(found)
            run["decisions"].append((scale, found))
            run["weights"].append({k: v.copy() for k, v in params.items()})
    return run


def _sgd(policy, params, lr):
    return PolicyOptimizer(torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=False), policy,
                           rng=np.random.default_rng(1))


def _torch_run(policy, run, lr):
    twin = TwinGPT(CFG, run["init"])
    stream = [f"layers.{i}" for i in range(len(twin.layers))]
    opt = _sgd(policy, list(twin.named.values()), lr)
    losses, decisions = [], []
    with emulate(twin, policy, stream=stream, embed="embed",
                 rng=np.random.default_rng(1)) as em:
        for x, y in run["data"]:
            opt.zero_grad()
            loss = twin(torch.from_numpy(x), torch.from_numpy(y))
            losses.append(float(loss.detach()))
            scale = opt.loss_scale
            opt.scale(loss).backward()
            em.end_step()
            decisions.append((scale, opt.step()))
    return losses, decisions, {k: t.detach().numpy().copy() for k, t in twin.named.items()}


NAMES = ["fp32", "amp_bf16", "pure_bf16", "fp8_hybrid", "fp16_scaled"]


@pytest.mark.parametrize("name", NAMES)
def test_steps_as_normlab(name):
    """normlab's trainer and PolicyOptimizer given the same scaled gradients at every step: the
    same loss-scaler decisions; the weights within float32 rounding, and where the weights are
    stored in bfloat16 (no master copy) equal but for a few within float32 rounding of a
    rounding boundary, one bfloat16 step apart."""
    policy, lr = _policy(name), 0.05
    run = _normlab_run(policy, 6, lr, seed=0)
    if name == "fp16_scaled":  # skipped, backed off, recovered and grown
        assert [d[1] for d in run["decisions"]] == [True] * 3 + [False] * 3
        assert len({d[0] for d in run["decisions"]}) == 5
    params = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in run["init"].items()}
    opt = _sgd(policy, list(params.values()), lr)
    stored = policy.master is None and policy.params.rounds
    for step, scaled in enumerate(run["scaled"]):
        for k, p in params.items():
            p.grad = torch.from_numpy(scaled[k].copy())
        scale = opt.loss_scale
        assert (scale, opt.step()) == run["decisions"][step]
        for k, p in params.items():
            a, b = run["weights"][step][k], p.detach().numpy()
            d = np.abs(b - a)
            if stored:
                # neighbours in bfloat16 (at most 2^-7 of the larger magnitude apart), or a
                # cancellation w - lr buf = 0 in numpy that torch's fused p + (-lr) buf leaves
                # at float32 rounding
                tiny = np.spacing(np.float32(np.abs(a).max()))
                assert (d <= 2.0**-7 * np.maximum(np.abs(a), np.abs(b)) + tiny).all(), k
                assert np.count_nonzero(d) <= max(2, a.size // 200), (k, np.count_nonzero(d))
            else:
                # one float32 rounding of the update per step (torch's p - lr buf is one
                # rounding, numpy's two), relative to the tensor's largest weight
                top = np.spacing(np.float32(np.abs(a).max()))
                assert d.max() <= 2 * (step + 1) * top, (k, d.max() / top)


@pytest.mark.parametrize("name", NAMES)
def test_trains_as_normlab(name):
    """normlab's trainer and PolicyOptimizer + emulate on the twin model: the same loss-scaler
    decisions at every step; the losses and weights apart by what the twins' float32 sums
    leave (a value on the other side of a rounding boundary of the policy's format moves on
    through the following steps)."""
    policy, lr = _policy(name), 0.05
    run = _normlab_run(policy, 6, lr, seed=0)
    losses, decisions, weights = _torch_run(policy, run, lr)
    assert decisions == run["decisions"]
    np.testing.assert_allclose(losses[0], run["loss"][0], rtol=1e-6)
    np.testing.assert_allclose(losses, run["loss"], rtol=1e-3)
    for k, a in run["weights"][-1].items():
        assert np.abs(weights[k] - a).max() <= 1e-2 * np.abs(a).max(), k


def test_stochastic_rounding_is_normlabs_and_unbiased():
    """No master copy, stochastic rounding: each step's weights are normlab.precision's
    WeightUpdater('stochastic') with the same generator, bit for bit; the mean of many weights
    follows the exact sum (updates of a tenth of an ulp), where nearest rounding loses them."""
    n, d, steps = 20000, 2.0**-8 / 10, 30  # a tenth of bfloat16's ulp at 1 (2^-7 above 1)
    w0 = np.full(n, 1.0 + 2.0**-7, np.float32)
    ref = WeightUpdater(w0, "bfloat16", "stochastic", rng=np.random.default_rng(5))
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    opt = PolicyOptimizer(torch.optim.SGD([p], lr=1.0, foreach=False), SR_BF16,
                          rng=np.random.default_rng(5))
    # w0 is a bfloat16 value, so its rounding at construction changes nothing; both start the
    # steps from the same generator state (PolicyOptimizer's construction drew from its own)
    ref.rng = np.random.default_rng(5)
    opt.rng = np.random.default_rng(5)
    g = torch.full((n,), -d, dtype=torch.float32)
    for _ in range(steps):
        p.grad = g.clone()
        opt.step()
        ref.step(np.float32(d))
        assert np.array_equal(p.detach().numpy(), ref.weight)
    exact = float(w0[0]) + steps * d
    mean = float(p.detach().double().mean())
    ulp = 2.0**-7
    # the mean of n independent roundings: standard error below ulp / (2 sqrt(n)) per step
    assert abs(mean - exact) < 4 * ulp * np.sqrt(steps) / np.sqrt(n), (mean, exact)
    q = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    near = PolicyOptimizer(torch.optim.SGD([q], lr=1.0, foreach=False), "pure_bf16")
    for _ in range(steps):
        q.grad = g.clone()
        near.step()
    assert torch.equal(q.detach(), torch.from_numpy(w0))  # every update lost


def test_moments_rounded_before_the_update_reads_them():
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    opt = PolicyOptimizer(torch.optim.Adam([p], lr=0.1, foreach=False), "pure_bf16")
    p.grad = torch.tensor([0.1, 0.2, 0.3])
    opt.step()
    s = opt.optimizer.state[p]
    bf = lambda t: t.to(torch.bfloat16).float()  # noqa: E731
    for k in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(s[k], bf(s[k]))
    m, v = bf(0.1 * torch.tensor([0.1, 0.2, 0.3])), bf(0.001 * torch.tensor([0.1, 0.2, 0.3])**2)
    want = bf(torch.tensor([1.0, -2.0, 3.0]) - (0.1 / 0.1) * (m / ((v.sqrt() / 0.001**0.5) + 1e-8)))
    assert torch.equal(p.detach(), want)


def test_state_dict_round_trip_and_errors():
    p = torch.nn.Parameter(torch.ones(3))
    opt = PolicyOptimizer(torch.optim.SGD([p], lr=0.1), FP16_SCALED)
    p.grad = torch.full((3,), float("inf"))
    assert opt.step() is True and opt.loss_scale == 2.0**32 and opt.skipped == 1
    state = opt.state_dict()
    other = PolicyOptimizer(torch.optim.SGD([p], lr=0.1), FP16_SCALED)
    other.load_state_dict(state)
    assert other.loss_scale == 2.0**32 and other.skipped == 1
    with pytest.raises(ValueError, match="loss-scaler state"):
        PolicyOptimizer(torch.optim.SGD([p], lr=0.1), "fp32").load_state_dict(state)
    with pytest.raises(TypeError, match="optimizer must be"):
        PolicyOptimizer(object(), "fp32")
    with pytest.raises(TypeError, match="policy must be"):
        PolicyOptimizer(torch.optim.SGD([p], lr=0.1), 3)
    with pytest.raises(TypeError, match="rng="):
        PolicyOptimizer(torch.optim.SGD([p], lr=0.1), SR_BF16)
    with pytest.raises(ValueError, match="amsgrad"):
        PolicyOptimizer(torch.optim.Adam([p], amsgrad=True), "fp32")
    with pytest.raises(TypeError, match="loss must be"):
        opt.scale(1.0)
