"""The NumPy model's linear layer on a recipe's six GEMM operands (``Numerics.operand``): dx from
``dgrad.weight`` and dW from x and dY quantized along the token axis (with the RHT where the
recipe says), checked bit for bit against ``normlab.torch.emulate``'s ``RecipeLinear`` where the
rounding is deterministic, statistically where it is stochastic, and the elements against an
NVFP4 grid built from ml_dtypes; every policy without operands as before, bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from normlab.functional import linear_backward, linear_forward
from normlab.nn import Linear
from normlab.nn.numerics import PolicyNumerics
from normlab.precision import RECIPES, PrecisionPolicy, nvfp4_recipe
from normlab.precision.hadamard import rht

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normlab.torch")

DETERMINISTIC = [dict(sr=False), dict(sr=False, rht=False), dict(sr=False, two_d=False),
                 dict(sr=False, rht=False, two_d=False)]


def _data(tokens: tuple[int, int] = (2, 24), c_in: int = 64, c_out: int = 48, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = (0.05 * rng.standard_normal((c_out, c_in))).astype(np.float32)
    x = rng.standard_normal((*tokens, c_in)).astype(np.float32)
    x[0, 3, 5] = 40.0  # an outlier in one token: the RHT spreads it over its 16 tokens
    dy = (1e-3 * rng.standard_normal((*tokens, c_out))).astype(np.float32)
    return x, w, dy


def _numpy(pol, x, w, dy, seed=1):
    lin = Linear(w.shape[1], w.shape[0], rng=np.random.default_rng(0))
    lin.params["weight"][...] = w
    lin.numerics = PolicyNumerics(pol, rng=np.random.default_rng(seed)).bind("lin")
    y = lin.forward(x)
    dx = lin.backward(dy)
    return y, dx, lin.grads["weight"].copy()


def _torch(pol, x, w, dy, seed=1):
    m = torch.nn.Sequential(torch.nn.Linear(w.shape[1], w.shape[0], bias=False))
    with torch.no_grad():
        m[0].weight.copy_(torch.from_numpy(w))
    xt = torch.from_numpy(x).requires_grad_(True)
    with nt.emulate(m, pol, rng=np.random.default_rng(seed)):
        y = m(xt)
        y.backward(torch.from_numpy(dy))
    return y.detach().numpy(), xt.grad.numpy(), m[0].weight.grad.numpy()


@pytest.mark.parametrize("parts", DETERMINISTIC)
@pytest.mark.parametrize("tokens", [(2, 24), (5, 8)])  # 48 tokens; 40 (padded to 48)
def test_linear_matches_torch_recipe_bit_for_bit(parts, tokens):
    x, w, dy = _data(tokens)
    pol = nvfp4_recipe(**parts)
    for name, a, b in zip(("y", "dx", "dW"), _numpy(pol, x, w, dy), _torch(pol, x, w, dy)):
        assert a.dtype == b.dtype and np.array_equal(a, b), (pol.name, name)


def test_wgrad_differs_from_the_forward_operands():
    """The weight gradient is not dY^T x from the forward's rounded x (the old approximation):
    the wgrad operands are rounded along the tokens, and rotated."""
    x, w, dy = _data()
    pol = nvfp4_recipe(sr=False)
    n = PolicyNumerics(pol).bind("lin")
    xq, wq = n.input(x), n.weight(w)
    _, cache = linear_forward(xq, wq)
    _, old_dw, _ = linear_backward(n.grad(dy, "dout"), cache)
    new_dw = _numpy(pol, x, w, dy)[2]
    assert not np.array_equal(n.output(old_dw, "dweight"), new_dw)
    exact = dy.reshape(-1, 48).T.astype(np.float64) @ x.reshape(-1, 64)
    err = [np.linalg.norm(d - exact) / np.linalg.norm(exact) for d in (old_dw, new_dw)]
    assert all(e < 0.5 for e in err)  # both are estimates of dW


@pytest.mark.parametrize("name", ["fp32", "amp_bf16", "fp8_hybrid", "mxfp8"])
def test_policies_without_operands_do_not_split(name):
    """Every preset: no split, and the layer's gradients are those of the forward's rounded
    operands and the dgrad-rounded dY, as before."""
    x, w, dy = _data()
    n = PolicyNumerics(name).bind("lin")
    assert not n.splits()
    marker = np.zeros(3)
    assert n.operand("wgrad.input", x, "weight", marker) is marker
    n2 = PolicyNumerics(name).bind("lin")
    _, cache = linear_forward(n2.input(x), n2.weight(w))
    dx, dw, _ = linear_backward(n2.grad(dy, "dout"), cache)
    _, dx_, dw_ = _numpy(name, x, w, dy)
    assert np.array_equal(n2.output(dx, "dx"), dx_) and np.array_equal(n2.output(dw, "dweight"),
                                                                         dw_)


def test_kept_layers_do_not_split():
    pol = nvfp4_recipe(keep_layers=["blocks.1", "head"])
    n = PolicyNumerics(pol, rng=np.random.default_rng(0))
    assert n.bind("blocks.0.mlp.fc").splits() and not n.bind("blocks.1.mlp.fc").splits()
    assert not n.bind("").splits("head") and n.bind("").splits("weight")


def test_operand_refuses_unknown_names():
    n = PolicyNumerics(RECIPES["nvfp4"], rng=np.random.default_rng(0)).bind("lin")
    with pytest.raises(ValueError, match=r"wgrad\.input"):
        n.operand("fprop.input", np.zeros((16, 16), np.float32), "weight",
                  np.zeros((16, 16), np.float32))


def test_stochastic_wgrad_operand_is_unbiased():
    """wgrad.grad_output (the RHT along the tokens, stochastic rounding, the inverse RHT as the
    dequantized value): rotated back (normlab.precision.hadamard's rht), its mean over seeds is
    the rotated dY, within the standard errors (mean squared z about 1, none past 6), at every
    element but those within 7% of their block's largest, which saturate where the E4M3 block
    scale (3 mantissa bits) rounded down (TE's NVFP4, a bias of the format); round to nearest
    is off by far more."""
    _, _, dy = _data((1, 32), c_out=16)
    g = dy.reshape(32, 16)
    target = rht(g.astype(np.float64), axis=0)  # tokens rotated in groups of 16
    blocks = np.abs(target).reshape(2, 16, 16)
    inner = (blocks < 0.93 * blocks.max(1, keepdims=True)).reshape(32, 16)
    K = 400
    draws = np.stack([rht(PolicyNumerics(RECIPES["nvfp4"], rng=np.random.default_rng(s)).bind(
        "l").operand("wgrad.grad_output", g, "weight", g).astype(np.float64), axis=0)
        for s in range(K)])
    mean, se = draws.mean(0), draws.std(0, ddof=1) / np.sqrt(K)
    # an element next to a grid point rounds away from it rarely: 400 draws may all agree, and
    # its sample error says 0; the median's floors them
    se = np.maximum(se, np.median(se[inner]))
    z = np.abs(mean - target)[inner] / se[inner]
    assert inner.sum() > 400 and np.mean(z**2) < 1.5 and z.max() < 6
    q = rht(PolicyNumerics(nvfp4_recipe(sr=False)).bind("l").operand(
        "wgrad.grad_output", g, "weight", g).astype(np.float64), axis=0)
    zq = np.abs(q - target)[inner] / se[inner]
    assert np.mean(zq**2) > 20  # nearest even's error is the same in every draw


def test_stochastic_dw_agrees_with_torch_in_distribution():
    """The full recipe (SR on dY in dgrad and wgrad): the mean dW and dx over seeds of the NumPy
    layer and of torch's emulation agree within 5 standard errors of their difference."""
    x, w, dy = _data((1, 32), c_in=32, c_out=16)
    pol, K = RECIPES["nvfp4"], 150
    a = [_numpy(pol, x, w, dy, seed=s)[1:] for s in range(K)]
    b = [_torch(pol, x, w, dy, seed=10_000 + s)[1:] for s in range(K)]
    for i, name in enumerate(("dx", "dW")):
        A = np.stack([r[i] for r in a]).astype(np.float64)
        B = np.stack([r[i] for r in b]).astype(np.float64)
        se = np.sqrt(A.var(0, ddof=1) / K + B.var(0, ddof=1) / K)
        ok = se > 0
        assert (np.abs(A.mean(0) - B.mean(0))[ok] / se[ok]).max() < 6.0, name
        assert A.std(0).max() > 0  # stochastic indeed


def _e2m1_grid_reference(x: np.ndarray) -> np.ndarray:
    """TE's NVFP4 of the rows of x in 1x16 blocks, round to nearest even, written from its
    definition with ml_dtypes' float8_e4m3fn and float4_e2m1fn casts."""
    f32 = np.float32
    amax = f32(np.abs(x).max())
    s_enc = f32(f32(448 * 6) / amax)
    xb = x.reshape(x.shape[0], -1, 16)
    a_b = np.abs(xb).max(-1, keepdims=True)
    s_dec = (a_b / f32(6) * s_enc).astype(f32).astype(ml_dtypes.float8_e4m3fn).astype(f32)
    enc = np.where(s_dec == 0, f32(0), s_enc / np.where(s_dec == 0, f32(1), s_dec)).astype(f32)
    e = (xb * enc).astype(f32).astype(ml_dtypes.float4_e2m1fn).astype(f32)
    return (e * (s_dec / s_enc).astype(f32)).astype(f32).reshape(x.shape)


def test_wgrad_input_elements_on_the_nvfp4_grid():
    """wgrad.input without the RHT: x (tokens, C) quantized along the tokens is, transposed,
    the NVFP4 of x^T's rows (a reference from ml_dtypes' casts), within one float32 ulp of the
    decode (the reference decodes in another order)."""
    x, _, _ = _data((2, 24), c_in=32)
    x2 = x.reshape(-1, 32)
    q = PolicyNumerics(nvfp4_recipe(rht=False, sr=False)).bind("l").operand(
        "wgrad.input", x2, "weight", x2)
    ref = _e2m1_grid_reference(np.ascontiguousarray(x2.T)).T
    np.testing.assert_allclose(q, ref, rtol=2**-22, atol=0)


def test_nvfp4_recipe_parts():
    assert nvfp4_recipe() == RECIPES["nvfp4"] and nvfp4_recipe().name == "nvfp4"
    p = nvfp4_recipe(rht=False, two_d=False, sr=False, keep_layers=["blocks.3", "head"])
    assert p.name == "nvfp4-rht-2d-sr+keep2" and p.keep_layers == ("blocks.3", "head")
    assert p.operand("wgrad.input").scaling.kind == "nvfp4"  # no Hadamard around it
    assert not p.operand("fprop.weight").scaling.two_d
    assert {p.operand(o).rounding for o in ("dgrad.grad_output", "wgrad.grad_output")} == {
        "nearest_even"} and p.gradients.rounding == "nearest_even"
    assert PrecisionPolicy.from_json(p.to_json()) == p
    assert nvfp4_recipe(name="mine").name == "mine"
    with pytest.raises(TypeError, match="rht"):
        nvfp4_recipe(rht="yes")
    with pytest.raises(TypeError, match="keep_layers"):
        nvfp4_recipe(keep_layers="head")


def test_nvfp4_recipe_in_torch_emulate_and_a_training_run():
    from normlab.train import TrainConfig

    m = torch.nn.Sequential(torch.nn.Linear(32, 16, bias=False))
    with nt.emulate(m, nvfp4_recipe(rht=False), rng=np.random.default_rng(0)):
        m(torch.ones(16, 32)).sum().backward()
    assert torch.isfinite(m[0].weight.grad).all()
    cfg = TrainConfig(precision=nvfp4_recipe(two_d=False).to_json(indent=None))
    assert PrecisionPolicy.from_json(cfg.precision).name == "nvfp4-2d"


def test_an_ensemble_member_on_operands_is_its_single_run():
    """Members of one ensemble with the whole recipe, bf16 and the recipe without its parts
    (stacked: each member's operands from its own slices) train as their single runs, bit for
    bit."""
    from normlab.train import TrainConfig, train
    from normlab.train.ensemble import train_ensemble

    base = TrainConfig(steps=3, eval_interval=3, eval_batches=1, batch_size=4)
    base = base.with_overrides({"model.n_layers": 2, "model.d_model": 32, "model.n_heads": 2,
                                "model.seq_len": 16, "model.vocab_size": 16})
    pols = [nvfp4_recipe(keep_layers=["blocks.1"]).to_json(indent=None), "amp_bf16",
            nvfp4_recipe(rht=False, two_d=False, sr=False).to_json(indent=None)]
    cfgs = [base.with_overrides({"precision": p, "seed": s}) for s, p in enumerate(pols)]
    for c, e in zip(cfgs, train_ensemble(cfgs)):
        r = train(c)
        assert [h["loss"] for h in r.history] == [h["loss"] for h in e.history]
        assert r.final_val_loss == e.final_val_loss
