"""The recipes (nvfp4, mxfp8_2d, fp8_blockwise) in ``normlab.torch.emulate``: each GEMM of a
linear layer on its own operands, against NumPy's ``Precision.apply`` of the same operands (the
same random draws), a GPT-2 built from its config training under them, and the bf16 layers."""

import numpy as np
import pytest
import torch

from normlab.precision import PrecisionPolicy, get_policy
from normlab.torch import emulate
from normlab.torch.recipes import keep_last, keep_overrides

transformers = pytest.importorskip("transformers")


def _linear_grads(policy, x, w, dy, seed):
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
    xt = torch.from_numpy(x).requires_grad_(True)
    with emulate(lin, policy, rng=np.random.default_rng(seed)):
        y = lin(xt)
        y.backward(torch.from_numpy(dy))
    return y.detach(), xt.grad, lin.weight.grad


def _expected(policy, x, w, dy, seed):
    """The recipe's three GEMMs from NumPy's rounding of each operand (draws in the order the
    backward makes them: dgrad's dY, then wgrad's dY), the products by torch in float32."""
    rng = np.random.default_rng(seed)
    wp = policy.params.apply(w)
    xq = policy.operand("fprop.input").apply(x, axis=-1)
    wq = policy.operand("fprop.weight").apply(wp, axis=-1)
    y = torch.from_numpy(xq) @ torch.from_numpy(wq).T
    gd = policy.operand("dgrad.grad_output").apply(dy, rng=rng, axis=-1)
    wd = policy.operand("dgrad.weight").apply(wp.T.copy(), axis=-1).T
    dx = torch.from_numpy(gd) @ torch.from_numpy(np.ascontiguousarray(wd))
    g2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
    gw = policy.operand("wgrad.grad_output").apply(g2.T.copy(), rng=rng, axis=-1)
    xw = policy.operand("wgrad.input").apply(x2.T.copy(), axis=-1)
    dw = torch.from_numpy(gw) @ torch.from_numpy(xw).T
    return y, dx, dw


def _data(seed=0, shape=(2, 16, 32), out=16):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape).astype(np.float32)
    x[0, 3, 5] = 40.0  # an outlier: the rotation spreads it over its 16 tokens
    w = (r.standard_normal((out, shape[-1])) * 0.1).astype(np.float32)
    dy = r.standard_normal((*shape[:-1], out)).astype(np.float32)
    return x, w, dy


@pytest.mark.parametrize("name", ["nvfp4", "mxfp8_2d", "fp8_blockwise"])
def test_recipe_linear_is_numpys_rounding_of_each_gemm_operand(name):
    pol = get_policy(name).replace(activations="float32")  # the GEMMs' own results
    x, w, dy = _data()
    y, dx, dw = _linear_grads(pol, x, w, dy, 7)
    ey, edx, edw = _expected(pol, x, w, dy, 7)
    assert torch.equal(y, ey) and torch.equal(dx, edx) and torch.equal(dw, edw)


def test_nvfp4_wgrad_operands_are_the_hadamard_rotated_ones():
    pol = get_policy("nvfp4").replace(activations="float32")
    ops = dict(pol.operands)
    assert ops["wgrad.input"].scaling.kind == ops["wgrad.grad_output"].scaling.kind == "hadamard"
    plain = pol.replace(operands={**ops, "wgrad.input": ops["fprop.input"],
                                  "wgrad.grad_output": ops["dgrad.grad_output"]})
    x, w, dy = _data()
    _, _, dw = _linear_grads(pol, x, w, dy, 3)
    _, _, dw_plain = _linear_grads(plain, x, w, dy, 3)
    _, _, edw = _expected(pol, x, w, dy, 3)
    _, _, edw_plain = _expected(plain, x, w, dy, 3)
    assert torch.equal(dw, edw) and torch.equal(dw_plain, edw_plain)
    assert not torch.equal(dw, dw_plain)


def test_nvfp4_keeps_grid_values_and_changes_the_rest():
    """x and W on the NVFP4 grid with decode scale 1 (every 1x16 block and 16x16 tile holds a
    6, the tensor's amax 6: S_enc 448, block scale 448, decode 448 * 6 / 2688 = 1): the forward
    is float32's, bit for bit; off the grid it is not."""
    r = np.random.default_rng(1)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)
    x = (grid[r.integers(0, 8, (4, 16, 32))] * r.choice([-1, 1], (4, 16, 32))).astype(np.float32)
    w = (grid[r.integers(0, 8, (16, 32))] * r.choice([-1, 1], (16, 32))).astype(np.float32)
    x[..., 0::16], w[:, 0::16], w[0::16, :] = 6.0, 6.0, 6.0
    pol = get_policy("nvfp4").replace(activations="float32")
    y, _, _ = _linear_grads(pol, x, w, np.ones((4, 16, 16), np.float32), 0)
    assert torch.equal(y, torch.from_numpy(x) @ torch.from_numpy(w).T)
    x2 = x * np.float32(1.1)
    y2, _, _ = _linear_grads(pol, x2, w, np.ones((4, 16, 16), np.float32), 0)
    assert not torch.equal(y2, torch.from_numpy(x2) @ torch.from_numpy(w).T)


def _gpt2(n_layer=2):
    cfg = transformers.GPT2Config(n_layer=n_layer, n_embd=64, n_head=2, vocab_size=128,
                                  n_positions=32, bos_token_id=0, eos_token_id=0,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.parametrize("name", ["nvfp4", "mxfp8_2d", "fp8_blockwise"])
def test_gpt2_from_its_config_trains_under_the_recipe(name):
    model = _gpt2()
    idx = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(idx).logits
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    with emulate(model, name, rng=np.random.default_rng(0)):
        with torch.no_grad():
            first = model(idx).logits
        for _ in range(4):
            loss = model(idx, labels=idx).loss
            loss.backward()
            losses.append(loss.item())
            opt.step()
            opt.zero_grad()
    assert not torch.equal(first, ref)  # the formats round the forward
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 0.05


def test_keep_last_runs_those_layers_in_bf16():
    """With every layer and the head kept, the model runs as the kept policy everywhere."""
    model = _gpt2()
    idx = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    pol = keep_last("nvfp4", 2)
    assert pol.keep_layers == ("*.h.-2", "*.h.-1", "lm_head")
    assert [p for p, _ in keep_overrides(pol)] == list(pol.keep_layers)
    with torch.no_grad():
        with emulate(model, pol, rng=np.random.default_rng(0)):
            kept = model(idx).logits
        with emulate(model, get_policy("nvfp4").kept(), rng=np.random.default_rng(0)):
            plain = model(idx).logits
        with emulate(model, keep_last("nvfp4", 1), rng=np.random.default_rng(0)):
            one = model(idx).logits
    assert torch.equal(kept, plain) and not torch.equal(one, plain)


def test_an_override_of_compute_replaces_the_gemm_operands():
    from normlab.torch.overrides import region_policy

    base = get_policy("nvfp4")
    assert region_policy({"compute": "bfloat16"}, base, "o").operands == ()
    assert region_policy({"activations": "float32"}, base, "o").operands == base.operands


def test_keep_last_refuses_bad_input():
    with pytest.raises(ValueError, match="last"):
        keep_last("nvfp4", -1)
    with pytest.raises(TypeError, match="policy"):
        keep_last(3, 1)
    with pytest.raises(TypeError, match="PrecisionPolicy"):
        keep_overrides("nvfp4")
    assert isinstance(keep_last(get_policy("mxfp8_2d"), 0, head=None), PrecisionPolicy)


@pytest.mark.parametrize("name", ["nvfp4", "mxfp8_2d", "fp8_blockwise"])
def test_coverage_has_a_row_per_gemm_naming_each_operand(name):
    """A recipe linear's coverage: one row per GEMM, each operand with the policy's precision
    for it; the backward's rows only where a gradient is recorded."""
    from normlab.precision import nvfp4_recipe
    policies = [get_policy(name)] + ([nvfp4_recipe(rht=False, sr=False)] if name == "nvfp4"
                                     else [])
    for policy in policies:
        lin = torch.nn.Linear(32, 16, bias=False)
        x = torch.randn(4, 32, requires_grad=True)
        with emulate(lin, policy, rng=np.random.default_rng(0)) as em:
            lin(x).sum().backward()
        rows = {r["op"]: r["rounded"] for r in em.coverage}
        assert list(rows) == ["linear fprop", "linear dgrad", "linear wgrad"]
        for gemm, tensors in (("fprop", ("x", "W")), ("dgrad", ("dY", "W")),
                              ("wgrad", ("dY", "x"))):
            for tensor in tensors:
                op = {"x": "input", "W": "weight", "dY": "grad_output"}[tensor]
                assert f"{tensor}: " in rows[f"linear {gemm}"]
                assert f"{gemm}.{op} = {policy.operand(f'{gemm}.{op}')}" in rows[f"linear {gemm}"]
        assert ("Hadamard" in rows["linear wgrad"]) == (policy.name == "nvfp4")
        with emulate(lin, policy, rng=np.random.default_rng(0)) as em, torch.no_grad():
            lin(x)
        assert [r["op"] for r in em.coverage] == ["linear fprop"]
