"""rules="autocast": torch.autocast's op lists (CPU, bfloat16, torch 2.13) as run, the forward of
a CPU autocast bf16 run reproduced bit for bit where autocast's rules decide the values, and the
documented differences between normlab's rules and autocast's, each checked."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from normlab.torch import emulate
from normlab.torch.autocast import FLOAT32, FLOAT32_FUNCS, LOWER

transformers = pytest.importorskip("transformers")
bf = torch.bfloat16
g = torch.Generator().manual_seed(0)
M, B3, V = torch.randn(6, 8, generator=g), torch.randn(2, 6, 8, generator=g), torch.randn(8)
IMG, SEQ, VOL = torch.randn(1, 4, 6, 6), torch.randn(1, 4, 7), torch.randn(1, 4, 4, 4, 4)
W2, W1, W3 = torch.randn(3, 4, 3, 3), torch.randn(3, 4, 3), torch.randn(3, 4, 2, 2, 2)
#: one call of each op on autocast's lower list, float32 inputs
LOWER_CALLS = {
    "linear": lambda: F.linear(M, M[:4]), "matmul": lambda: M @ M.T, "mm": lambda: M.mm(M.T),
    "bmm": lambda: torch.bmm(B3, B3.transpose(1, 2)),
    "baddbmm": lambda: torch.baddbmm(torch.zeros(2, 6, 6), B3, B3.transpose(1, 2)),
    "addmm": lambda: torch.addmm(torch.zeros(6), M, M.T),
    "addbmm": lambda: torch.addbmm(torch.zeros(6, 6), B3, B3.transpose(1, 2)),
    "einsum": lambda: torch.einsum("ij,kj->ik", M, M),
    "tensordot": lambda: torch.tensordot(M, M.T, 1),
    "inner": lambda: torch.inner(M, M), "vecdot": lambda: torch.linalg.vecdot(M, M),
    "conv1d": lambda: F.conv1d(SEQ, W1), "conv2d": lambda: F.conv2d(IMG, W2),
    "conv3d": lambda: F.conv3d(VOL, W3),
    "conv_transpose1d": lambda: F.conv_transpose1d(SEQ, W1.transpose(0, 1).contiguous()),
    "conv_transpose2d": lambda: F.conv_transpose2d(IMG, W2.transpose(0, 1).contiguous()),
    "conv_transpose3d": lambda: F.conv_transpose3d(VOL, W3.transpose(0, 1).contiguous()),
    "prelu": lambda: F.prelu(M, torch.tensor([0.25])),
    "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(B3, B3, B3),
}
#: products autocast leaves in float32 (not on its list), float32 inputs
NOT_LOWER = {"mv": lambda: torch.mv(M, V), "dot": lambda: torch.dot(V, V),
             "addmv": lambda: torch.addmv(torch.zeros(6), M, V),
             "grouped_mm": lambda: torch._grouped_mm(
                 torch.randn(8, 4), torch.randn(2, 4, 4),
                 offs=torch.tensor([3, 8], dtype=torch.int32)),
             "embedding": lambda: F.embedding(torch.tensor([0, 1]), M)}


def test_the_lower_list_is_autocasts():
    assert sorted(LOWER) == sorted(LOWER_CALLS)
    for name, call in LOWER_CALLS.items():
        with torch.autocast("cpu", dtype=bf):
            assert call().dtype == bf, name
    for name, call in NOT_LOWER.items():
        with torch.autocast("cpu", dtype=bf):
            assert call().dtype == torch.float32, name


def test_the_float32_list_is_autocasts():
    x = M.to(bf)
    args = {"cross_entropy": (x, torch.tensor([0, 1, 2, 3, 4, 5])),
            "nll_loss": (x.log_softmax(-1), torch.tensor([0, 1, 2, 3, 4, 5])),
            "binary_cross_entropy": (x.sigmoid(), x.sigmoid()),
            "multilabel_margin_loss": (x, torch.zeros(6, 8, dtype=torch.long)),
            "multi_margin_loss": (x, torch.zeros(6, dtype=torch.long)),
            "margin_ranking_loss": (x, x, x), "quantile": (x.flatten(), 0.5)}
    seen = set()
    for func, name in FLOAT32_FUNCS.items():
        with torch.autocast("cpu", dtype=bf):
            out = func(*args.get(name, (x, x) if name not in ("prod", "trace") else (x,)))
        assert out.dtype == torch.float32, name
        seen.add(name)
    assert seen == set(FLOAT32)
    with torch.autocast("cpu", dtype=bf):  # not on a list: the input's type
        assert torch.exp(x).dtype == bf and F.softmax(x, -1).dtype == bf
        assert (x + M).dtype == torch.float32  # promotion to the widest


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(32)
        self.fc1, self.fc2, self.head = (torch.nn.Linear(32, 64), torch.nn.Linear(64, 32),
                                         torch.nn.Linear(32, 10))

    def forward(self, x):
        x = x + self.fc2(F.gelu(self.fc1(self.ln(x))))
        return self.head(x)


def _models():
    torch.manual_seed(0)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 96, (2, 16)))
    x, img = torch.randn(4, 8, 32), torch.randn(2, 3, 16, 16)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(8, 4))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=96, n_layer=2, n_embd=64, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0, attn_implementation="eager"))
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager"))
    return {"mlp": (MLP(), lambda m: m(x)), "cnn": (cnn, lambda m: m(img)),
            "gpt2-eager": (gpt2, lambda m: m(input_ids=ids).logits),
            "llama-eager": (llama, lambda m: m(input_ids=ids).logits)}


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt2-eager", "llama-eager"])
def test_the_forward_is_autocasts_bit_for_bit(name):
    model, run = _models()[name]
    model.eval()
    with torch.no_grad():
        plain = run(model)
        with torch.autocast("cpu", dtype=bf):
            want = run(model)
        with emulate(model, "amp_bf16", rules="autocast"):
            got = run(model)
    assert want.dtype == bf and got.dtype == torch.float32
    assert torch.equal(got, want.float())
    assert not torch.equal(got, plain)


def test_the_mlp_backward_too():
    model, run = _models()["mlp"]
    y = torch.randint(0, 10, (32,), generator=g)
    grads = []
    for ctx in (lambda: torch.autocast("cpu", dtype=bf),
                lambda: emulate(model, "amp_bf16", rules="autocast")):
        model.zero_grad()
        with ctx():
            loss = F.cross_entropy(run(model).reshape(-1, 10), y)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_sdpa_is_autocasts_bit_for_bit():
    """``scaled_dot_product_attention`` runs in CPU's bfloat16 kernel on the rounded inputs, as
    autocast runs it (that kernel rounds inside: a float32 attention on the same inputs is
    another result)."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=96, n_layer=2, n_embd=64, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0, attn_implementation="sdpa")).eval()
    ids = torch.arange(16)[None]
    with torch.no_grad():
        with torch.autocast("cpu", dtype=bf):
            want = model(input_ids=ids).logits.float()
        with emulate(model, "amp_bf16", rules="autocast"):
            got = model(input_ids=ids).logits
    assert torch.equal(got, want)


@pytest.mark.parametrize("policy, low", [("amp_bf16", bf), ("amp_fp16", torch.float16)])
def test_the_forward_is_autocasts_for_every_input(policy, low):
    """Bit for bit on every input, not only the tested one: the products run in torch's kernel
    for the dtype (a float32 product rounded once differs from it on about one input in four
    of these, by one unit in the last place: ``test_a_product_differs_...``)."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager")).eval()
    gen = torch.Generator().manual_seed(0)
    for _ in range(12):
        ids = torch.randint(0, 128, (2, 16), generator=gen)
        with torch.no_grad():
            with torch.autocast("cpu", dtype=low):
                want = model(input_ids=ids).logits
            with emulate(model, policy, rules="autocast"):
                got = model(input_ids=ids).logits
        assert torch.equal(got, want.float())


def _grid(t):
    return bool(torch.equal(t, t.to(bf).float()))


def test_the_differences_table():
    """Each row of docs/torch.md's table of differences, on GPT-2 (eager attention): the
    residual stream, the embedding, the attention's products, the biases."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=96, n_layer=1, n_embd=64, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0, attn_implementation="eager")).eval()
    ids = torch.arange(16)[None]
    seen = {}
    for rules in ("normlab", "autocast"):
        got = {}
        with torch.no_grad(), emulate(model, "amp_bf16", rules=rules) as em:
            hooks = [model.transformer.h[0].register_forward_hook(  # after emulate's own
                         lambda m, a, o, got=got: got.__setitem__(
                             "stream", o[0] if isinstance(o, tuple) else o)),
                     model.transformer.wte.register_forward_hook(
                         lambda m, a, o, got=got: got.__setitem__("embedding", o))]
            model(input_ids=ids)
            for h in hooks:
                h.remove()
        rows = {(r["op"], r["status"]) for r in em.coverage}
        seen[rules] = {"stream": _grid(got["stream"]), "embedding": _grid(got["embedding"]),
                       "activation products": ("matmul", "rounded") in rows,
                       "bias": "bias" in " ".join(r["left"] for r in em.coverage)}
    assert seen["normlab"] == {"stream": True, "embedding": True, "activation products": False,
                               "bias": True}  # rounded, rounded, float32, the bias left
    assert seen["autocast"] == {"stream": False, "embedding": False,
                                "activation products": True, "bias": False}


def test_a_model_on_another_device_is_refused_by_name():
    """The lists are CPU autocast's: a model on another device (meta here, as CUDA) is refused
    before any work, not emulated by CPU's rules; rules='normlab' takes it."""
    m = torch.nn.Linear(4, 4, device="meta")
    with pytest.raises(ValueError, match=r"rules='autocast' follows CPU autocast's op lists .* "
                                         r"parameters on 'meta'"):
        emulate(m, "amp_bf16", rules="autocast")
    assert not m._forward_hooks and not m._forward_pre_hooks
    assert emulate(m, "amp_bf16").rules == "normlab"




@pytest.mark.parametrize("low", [bf, torch.float16])
def test_a_product_differs_from_autocasts_only_by_its_sum_order(low):
    """Why the autocast rules run a product in torch's kernel for the dtype (documented): CPU's
    low-precision linear accumulates in float32 and rounds once, in its kernel's order, and a
    float32 product in sgemm's: each result is the exact sum (float64) within float32's
    rounding of a sum of K terms, ``K 2^-24 sum |x w|``, rounded once to the format. They
    differ where that reaches a rounding boundary of the format: rarely, more often for
    float16 (three more bits)."""
    torch.manual_seed(0)
    x, w = torch.randn(4, 32, 768).to(low), torch.randn(96, 768).to(low)
    kernel, once = F.linear(x, w).double(), F.linear(x.float(), w.float()).to(low).double()
    exact = x.double() @ w.double().T
    bound = 768 * 2.0**-24 * (x.double().abs() @ w.double().abs().T)
    for y in (kernel, once):
        big = y.abs().to(low)
        step = (torch.nextafter(big, torch.full_like(big, float("inf"))) - big).double()
        assert bool(((y - exact).abs() <= bound + step / 2).all())
    assert 0 < int((kernel != once).sum()) < 64  # a few of 12288


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt2-eager", "llama-eager"])
def test_float16_is_autocasts_bit_for_bit(name):
    """Under amp_fp16 the forward is CPU float16 autocast's bit for bit on every model (their
    products' float32 sums straddle float16's boundaries more often than bfloat16's: the
    products run in torch's float16 kernel, as autocast's)."""
    equal = True
    model, run = _models()[name]
    model.eval()
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.float16):
            want = run(model)
        with emulate(model, "amp_fp16", rules="autocast"):
            got = run(model)
    assert want.dtype == torch.float16 and torch.equal(got, want.float()) == equal
