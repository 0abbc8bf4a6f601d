"""Each product with a weight that no family of test_torch_coverage.py reaches, under
``emulate(model, "amp_bf16")``, against torch's own op on the rounded operands: convolutions in
1-3D, transposed and grouped, ``einsum`` and ``bmm`` with a stacked weight. The forward is
``bf16(op(bf16(x), bf16(W), b))`` (the bias added unrounded); the backward rounds dY and the
operands' gradients: ``dx, dW = bf16(op's backward at bf16(x), bf16(W) of bf16(dY))``, bit for
bit. And the ops that compute with a weight and have no rounding: a ``NotEmulatedWarning``
naming the op and the weight, a ``NotEmulatedError`` under ``strict=True``."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from normlab.torch import NotEmulatedError, NotEmulatedWarning, emulate


def bf(t):
    return t.bfloat16().float()


class Stacked(torch.nn.Module):
    """A product with a stacked weight (looped experts): ``einsum`` or ``bmm``."""

    def __init__(self, how):
        super().__init__()
        self.how = how
        self.w = torch.nn.Parameter(torch.randn(4, 8, 5))

    def forward(self, x):
        return torch.einsum("eti,eio->eto", x, self.w) if self.how == "einsum" else \
            torch.bmm(x, self.w)


def _conv(cls, fn, x_shape, **kw):
    def make():
        m = cls(**kw)
        return m, torch.randn(*x_shape), lambda x, w, b: fn(
            x, w, b, **{k: getattr(m, k) for k in ("stride", "padding", "dilation", "groups")},
            **({"output_padding": m.output_padding} if "transpose" in fn.__name__ else {}))
    return make


def _stacked(how):
    def make():
        return Stacked(how), torch.randn(4, 3, 8), lambda x, w, b: torch.bmm(x, w)
    return make


CASES = {  # op the coverage names -> a maker of (module, input, oracle(x, W, bias))
    "conv1d": _conv(lambda **kw: torch.nn.Conv1d(3, 4, 3, **kw), F.conv1d, (2, 3, 9)),
    "conv2d": _conv(lambda **kw: torch.nn.Conv2d(4, 8, 3, groups=2, padding=1), F.conv2d,
                    (2, 4, 6, 6)),
    "conv3d": _conv(lambda **kw: torch.nn.Conv3d(3, 4, 3, **kw), F.conv3d, (2, 3, 5, 5, 5)),
    "conv_transpose1d": _conv(lambda **kw: torch.nn.ConvTranspose1d(3, 4, 3), F.conv_transpose1d,
                              (2, 3, 9)),
    "conv_transpose2d": _conv(lambda **kw: torch.nn.ConvTranspose2d(3, 4, 3, stride=2),
                              F.conv_transpose2d, (2, 3, 6, 6)),
    "conv_transpose3d": _conv(lambda **kw: torch.nn.ConvTranspose3d(3, 4, 3), F.conv_transpose3d,
                              (2, 3, 4, 4, 4)),
    "einsum": _stacked("einsum"),
    "bmm": _stacked("bmm"),
}


@pytest.mark.parametrize("op", list(CASES))
def test_the_product_is_torchs_on_the_rounded_operands(op):
    torch.manual_seed(0)
    m, x, oracle = CASES[op]()
    w = next(p for p in m.parameters() if p.dim() >= 3)
    bias = getattr(m, "bias", None)
    x.requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotEmulatedWarning)
        with emulate(m, "amp_bf16") as em:
            y = m(x)
            y.pow(2).sum().backward()
    assert [(r["op"], r["status"]) for r in em.coverage] == [(op, "rounded")]
    xr, wr = bf(x).requires_grad_(True), bf(w).requires_grad_(True)
    want = oracle(xr, wr, None if bias is None else bias.detach())
    assert torch.equal(y, bf(want)) and not torch.equal(y, oracle(x, w, bias))
    gx, gw = torch.autograd.grad(want, (xr, wr), bf(2 * y.detach()))
    assert torch.equal(x.grad, bf(gx)) and torch.equal(w.grad, bf(gw))


NOT_EMULATED = {  # op -> (module, inputs, the weight named)
    "bilinear": (lambda: torch.nn.Bilinear(3, 3, 2), lambda: (torch.randn(2, 3), torch.randn(2, 3)),
                 "weight"),
    "embedding_bag": (lambda: torch.nn.EmbeddingBag(10, 4),
                      lambda: (torch.tensor([[1, 2], [3, 4]]),), "weight"),
    "gru": (lambda: torch.nn.GRU(4, 4), lambda: (torch.randn(3, 1, 4),), "weight_ih_l0"),
}


@pytest.mark.parametrize("op", list(NOT_EMULATED))
def test_an_op_without_rounding_is_named(op):
    make, inputs, weight = NOT_EMULATED[op]
    m = make()
    with pytest.warns(NotEmulatedWarning, match=rf"{op} in \(model\) computes with the weight "
                                                rf"{weight} and has no rounding"):
        with emulate(m, "amp_bf16") as em:
            m(*inputs())
    assert (op, "not emulated") in [(r["op"], r["status"]) for r in em.coverage]
    with pytest.raises(NotEmulatedError, match=rf"{op} in \(model\)"):
        with emulate(m, "amp_bf16", strict=True):
            m(*inputs())
