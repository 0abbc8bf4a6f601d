"""Linear, Embedding, CausalSelfAttention and MLP modules: wiring over the functional ops,
accumulating gradient buffers, the precision hooks, bad arguments."""

import numpy as np
import pytest

from normlab.functional import attention_forward, linear_forward
from normlab.nn import MLP, CausalSelfAttention, Embedding, Identity, Linear, Numerics
from normlab.nn.attention import recording_heads
from normlab.testing import gradcheck


def _rng(seed=0):
    return np.random.default_rng(seed)


def module_gradcheck(module, x, rng, names):
    """Finite differences through a module's forward/backward for its input and parameters."""
    params = module.parameters()

    def forward(x, *ps):
        for name, p in zip(names, ps):
            params[name][...] = p
        module.zero_grad()
        return module(x), None

    def backward(dout, _):
        dx = module.backward(dout)
        grads = module.gradients()
        return (dx, *(grads[n].copy() for n in names))

    return gradcheck(forward, backward, {"x": x, **{n: params[n].copy() for n in names}}, rng=rng)


def test_linear_module_matches_the_op_and_accumulates():
    rng = _rng()
    lin = Linear(5, 3, bias=True, rng=rng, dtype=np.float64)
    lin.params["bias"][...] = rng.normal(size=3)
    x = rng.normal(size=(2, 4, 5))
    np.testing.assert_array_equal(
        lin(x), linear_forward(x, lin.params["weight"], lin.params["bias"])[0]
    )
    dout = rng.normal(size=(2, 4, 3))
    lin.backward(dout)
    once = lin.grads["weight"].copy()
    lin(x)
    lin.backward(dout)  # a second backward adds (tied or repeated use)
    np.testing.assert_allclose(lin.grads["weight"], 2 * once, rtol=1e-15)
    assert module_gradcheck(lin, x[:1], rng, ["weight", "bias"]).passed


def test_linear_init_and_bad_arguments():
    lin = Linear(256, 512, rng=_rng(1), std=0.02)
    assert lin.params["weight"].shape == (512, 256) and "bias" not in lin.params
    assert lin.params["weight"].dtype == np.float32
    assert abs(lin.params["weight"].std() - 0.02) < 0.001
    with pytest.raises(ValueError, match="in_features must be an integer >= 1"):
        Linear(0, 3, rng=_rng())
    with pytest.raises(TypeError, match="rng"):
        Linear(2, 3, rng=0)
    with pytest.raises(ValueError, match="std"):
        Linear(2, 3, rng=_rng(), std=-1.0)


def test_embedding_module():
    rng = _rng(2)
    emb = Embedding(6, 4, rng=rng, dtype=np.float64)
    ids = np.array([[1, 2, 2], [5, 1, 0]])
    out = emb(ids)
    np.testing.assert_array_equal(out, emb.params["weight"][ids])
    assert emb.backward(np.ones_like(out)) is None
    np.testing.assert_array_equal(emb.grads["weight"][:, 0], [1, 2, 2, 0, 0, 1])
    with pytest.raises(ValueError, match="num_embeddings"):
        Embedding(0, 4, rng=rng)


@pytest.mark.parametrize("qk_norm", ["none", "rmsnorm", "layernorm"])
def test_attention_module_gradcheck(qk_norm):
    rng = _rng(3)
    attn = CausalSelfAttention(8, 2, rng=rng, qk_norm=qk_norm, softcap=3.0, dtype=np.float64)
    for p in attn.parameters().values():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.4, size=p.shape)
    names = list(attn.parameters())
    assert module_gradcheck(attn, rng.normal(size=(2, 3, 8)), rng, names).passed
    assert np.isfinite(attn.max_logit)


def test_attention_module_matches_the_op_on_split_heads():
    rng = _rng(4)
    attn = CausalSelfAttention(12, 3, rng=rng, dtype=np.float64)
    x = rng.normal(size=(2, 5, 12))
    qkv = x @ attn.qkv.params["weight"].T  # (B, T, 3C)
    q, k, v = (qkv[..., i * 12:(i + 1) * 12].reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)
               for i in range(3))
    y = attention_forward(q, k, v)[0].transpose(0, 2, 1, 3).reshape(2, 5, 12)
    np.testing.assert_allclose(attn(x), y @ attn.proj.params["weight"].T, rtol=1e-13)


def test_recording_heads_gives_the_ops_per_head_statistics_and_then_stops():
    rng = _rng(5)
    attn = CausalSelfAttention(12, 3, rng=rng, dtype=np.float64, softcap=4.0)
    x = rng.normal(size=(2, 5, 12))
    y = attn(x)
    assert attn.heads is None and not attn.record_heads
    with recording_heads(attn) as recording:
        assert recording == [attn]
        np.testing.assert_array_equal(attn(x), y)  # recording changes nothing computed
    assert not attn.record_heads  # as before the block
    heads = attn.heads
    assert heads is not None and heads.max_logit.shape == heads.entropy.shape == (3,)
    assert float(heads.max_logit.max()) == attn.max_logit
    assert np.all((heads.entropy > 0) & (heads.entropy <= np.log(5)))
    attn(x)
    assert attn.heads is None
    with pytest.raises(KeyError), recording_heads(attn):
        raise KeyError("the block raises")
    assert not attn.record_heads


def test_attention_module_bad_arguments():
    with pytest.raises(ValueError, match=r"n_heads \(3\) must divide the width C \(8\)"):
        CausalSelfAttention(8, 3, rng=_rng())
    with pytest.raises(ValueError, match="qk_norm must be one of"):
        CausalSelfAttention(8, 2, rng=_rng(), qk_norm="l2")


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "swiglu"])
def test_mlp_gradcheck(activation):
    rng = _rng(5)
    mlp = MLP(6, 10, activation, rng=rng, bias=True, dtype=np.float64)
    for p in mlp.parameters().values():
        p[...] = rng.normal(0.0, 0.5, size=p.shape)
    x = rng.normal(size=(2, 3, 6))
    assert module_gradcheck(mlp, x, rng, list(mlp.parameters())).passed
    assert mlp.fc.params["weight"].shape == ((20 if activation == "swiglu" else 10), 6)
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP(6, 10, "tanh", rng=rng)


class _Recorder(Numerics):
    """Rounds nothing, counts every hook call."""

    def __init__(self):
        self.calls = []

    def _count(self, name, key, a):
        self.calls.append((name, key))
        return a

    def weight(self, w, key="weight"):
        return self._count("weight", key, w)

    def input(self, x, key="input"):
        return self._count("input", key, x)

    def output(self, y, key="output"):
        return self._count("output", key, y)

    def grad(self, g, key="grad"):
        return self._count("grad", key, g)


def test_linear_calls_the_precision_hooks_at_the_documented_points():
    rng = _rng(6)
    lin = Linear(4, 3, rng=rng)
    lin.numerics = rec = _Recorder()
    rec.calls = []
    y = lin(rng.normal(size=(2, 4)).astype(np.float32))
    lin.backward(np.ones_like(y))
    assert sorted(rec.calls) == sorted([("input", "input"), ("weight", "weight"),
                                        ("output", "output"), ("grad", "dout"),
                                        ("output", "dweight"), ("output", "dx")])


def test_identity_is_free():
    x = np.ones(3)
    ident = Identity()
    assert ident(x) is x and ident.backward(x) is x and ident.parameters() == {}
