# %% [markdown]
# # 16.2 Residual paths and where to normalize
#
# *Chapter 16, section 16.2 (equation 16.4, Listing 16.3).*
#
# A residual block adds a learned update to its input, $x_{l+1} = x_l + F_l(x_l)$, so its
# backward has an identity term: $\bar x_l = \bar x_{l+1} + J_{F_l}^\top \bar x_{l+1}$. The
# gradient from the top reaches every layer, however badly conditioned the branches are.
# Post-norm puts a normalization Jacobian on that path; pre-norm leaves it clean. Dropout, the
# section's other topic, is a regularizer that must keep the expectation and vanish at
# inference.
#
# Everything below is normlab's own `Residual` (the block of `normlab.models`, every placement)
# around normlab's `MLP`, in float64.

# %%
import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import batch_norm_forward, dropout_forward
from normlab.models import Residual
from normlab.nn import MLP

C, L = 64, 24  # width, depth
EPS64 = np.finfo(np.float64).eps


def branch(rng, std=None):
    """An MLP branch C -> 4C -> C (ReLU), Xavier-like weights; std=0 gives F(x) = 0."""
    mlp = MLP(C, 4 * C, "relu", rng=rng, std=C**-0.5, proj_std=(4 * C) ** -0.5, dtype=np.float64)
    if std == 0:
        for p in mlp.parameters().values():  # the arrays themselves, by dotted name
            p[...] = 0.0
    return mlp.set_impl("reference")


def stack(kind, seed, std=None):
    """L blocks: 'plain' is x = F(x) (no skip); otherwise Residual with that placement."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(L):
        F = branch(rng, std)
        blocks.append(F if kind == "plain" else
                      Residual(F, kind, "layernorm", C, n_layers=L, eps=1e-5, bias=False,
                               p_drop=0.0, rng=rng, dtype=np.float64).set_impl("reference"))
    return blocks


def gradient_profile(kind, seed=0, std=None):
    """||dL/dx_l|| for l = 0..L (x_0 the input, x_L the output) for a random upstream gradient."""
    blocks = stack(kind, seed, std)
    rng = np.random.default_rng(seed + 1000)
    x = rng.normal(size=(8, C))  # (B, C)
    for blk in blocks:
        x = blk(x)
    g = rng.normal(size=x.shape)  # dL/dx_L
    norms = [np.linalg.norm(g)]
    for blk in reversed(blocks):
        g = blk.backward(g)
        norms.append(np.linalg.norm(g))
    return np.array(norms[::-1]), g

# %% [markdown]
# ## The identity path, exactly
#
# Make every branch output zero (all its weights 0). A plain stack then passes no gradient at all;
# a residual stack passes the top gradient to the input *unchanged*, bit for bit: that is the
# $\bar x_l = \bar x_{l+1} + \cdots$ of the chapter with the "$\cdots$" equal to zero.

# %%
rng = np.random.default_rng(0)
x = rng.normal(size=(8, C))
g_top = rng.normal(size=(8, C))
plain, residual = stack("plain", 0, std=0), stack("none", 0, std=0)
for blk in plain + residual:
    blk(x)  # forward to fill the caches (each block sees x: the branches are dead anyway)
g_plain, g_res = g_top, g_top
for blk in reversed(plain):
    g_plain = blk.backward(g_plain)
for blk in reversed(residual):
    g_res = blk.backward(g_res)
print(f"plain stack: |dL/dx_0| = {np.linalg.norm(g_plain):.1f};  residual stack: "
      f"dL/dx_0 == dL/dx_L exactly: {np.array_equal(g_res, g_top)}")
assert np.linalg.norm(g_plain) == 0.0 and np.array_equal(g_res, g_top)

# %% [markdown]
# ## Drawn: the gradient through 24 layers
#
# With live branches the picture is the chapter's argument. Without skips the gradient shrinks
# geometrically on the way down (each ReLU layer passes about half of its square); with skips it
# does not. Pre-norm keeps the identity path, so the gradient reaching the bottom is the top
# gradient *plus* every branch's contribution; post-norm sends it through a LayerNorm Jacobian in
# every block, which holds it near the top's size. A residual stack with no norm at all grows the
# stream and its gradient geometrically: the reason the norm is there (section 2 of chapter 2.4).

# %%
SEEDS = range(4)
kinds = {"plain (no skip)": "plain", "residual, no norm": "none", "pre-norm": "pre",
         "post-norm": "post"}
profiles = {}
for label, kind in kinds.items():
    runs = [gradient_profile(kind, s)[0] for s in SEEDS]
    profiles[label] = np.mean([r / r[-1] for r in runs], axis=0)

plt.figure(figsize=(6, 3.6))
for label, prof in profiles.items():
    plt.semilogy(range(L + 1), prof, marker=".", label=label)
plt.xlabel("layer l (0 = input)"); plt.ylabel("||dL/dx_l|| / ||dL/dx_L||")
plt.title(f"gradient reaching each layer, {L} blocks, mean of {len(SEEDS)} seeds")
plt.legend(fontsize=8); plt.grid(alpha=0.3)
plt.show()

bottom = {label: prof[0] for label, prof in profiles.items()}
for label, b in bottom.items():
    print(f"{label:18s} bottom / top = {b:.3g}")
assert bottom["plain (no skip)"] < 1e-2  # vanishes: about 2^-(L/2) through the ReLUs
assert bottom["pre-norm"] > 1.0  # identity + branches: never below the top here
assert 0.5 < bottom["post-norm"] < 2.0  # held near the top's size by the norms on the path
assert bottom["residual, no norm"] > 10 * bottom["pre-norm"]  # grows with the stream

# %% [markdown]
# The pre-norm backward is one line, `dx = dy + N.backward(F.backward(dy))` (read it in
# `normlab/models/block.py`): the first term is the identity path. Check it on one block:

# %%
blk = stack("pre", 7)[0]
xin = np.random.default_rng(7).normal(size=(8, C))
dy = np.random.default_rng(8).normal(size=(8, C))
blk(xin)
dx = blk.backward(dy)
through_branch = blk.norm.backward(blk.branch.backward(dy))  # the branch's part, recomputed
err = np.abs(dx - (dy + through_branch)).max()
print(f"pre-norm block: dx - (dy + branch part) = {err:.1e}")
assert err < 16 * EPS64 * np.abs(dx).max()

# %% [markdown]
# Where the chapter compares pre- and post-norm "gradient flow" it cites Xiong et al. (2020),
# whose measurement is the *parameter* gradient of each layer at initialization; the notebook
# for chapter 2.4 section 4 computes that, with the difference between the chapter and the paper
# spelled out.
#
# ## Listing 16.3: BatchNorm and inverted dropout
#
# The chapter's BatchNorm updates `running_mean` *in place* with the textbook momentum 0.9 (the
# weight of the old value) and a *biased* running variance. normlab's `batch_norm_forward`
# returns new running statistics instead of overwriting its inputs, takes PyTorch's momentum
# (0.1, the weight of the new batch) and keeps the running variance unbiased.

# %%
def listing_batch_norm_forward(x, gamma, beta, running_mean, running_var, training,
                               momentum=0.9, eps=1e-5):
    if training:
        mean = x.mean(axis=0)
        var = x.var(axis=0)
        running_mean *= momentum
        running_mean += (1 - momentum) * mean
        running_var *= momentum
        running_var += (1 - momentum) * var
    else:
        mean = running_mean
        var = running_var
    normalized = (x - mean) / np.sqrt(var + eps)
    return normalized * gamma + beta


def listing_inverted_dropout(x, drop_probability, rng):
    if not 0 <= drop_probability < 1:
        raise ValueError("drop_probability must be in [0, 1)")
    keep = rng.random(x.shape) >= drop_probability
    return x * keep / (1 - drop_probability), keep


rng = np.random.default_rng(3)
xb = rng.normal(1.0, 2.0, size=(16, 5))  # (N, C)
gamma, beta = rng.normal(size=5), rng.normal(size=5)
rm, rv = np.zeros(5), np.ones(5)
y_listing = listing_batch_norm_forward(xb, gamma, beta, rm, rv, training=True)
y_normlab, _, new_mean, new_var = batch_norm_forward(xb, gamma, beta, np.zeros(5), np.ones(5),
                                                     training=True, momentum=0.1)
n = xb.shape[0]
print("outputs agree:", np.allclose(y_listing, y_normlab, rtol=1e-12, atol=1e-12))
print("running mean agrees:", np.allclose(rm, new_mean, rtol=1e-12))
print("running variance: normlab - listing = 0.1 * var * (n/(n-1) - 1):",
      np.allclose(new_var - rv, 0.1 * xb.var(axis=0) / (n - 1), rtol=1e-10))
assert np.allclose(y_listing, y_normlab, rtol=1e-12, atol=1e-12)
assert np.allclose(rm, new_mean, rtol=1e-12)
assert np.allclose(new_var - rv, 0.1 * xb.var(axis=0) / (n - 1), rtol=1e-10)

# %% [markdown]
# The same generator draws the same mask in both dropouts (both keep where `u >= p`):

# %%
xd = np.random.default_rng(4).normal(size=(4, 6))
y_l, keep = listing_inverted_dropout(xd, 0.25, np.random.default_rng(5))
y_n, cache = dropout_forward(xd, 0.25, training=True, rng=np.random.default_rng(5))
print("same mask:", np.array_equal(keep, cache.keep),
      " same output:", np.allclose(y_l, y_n, rtol=2 * EPS64, atol=0))
assert np.array_equal(keep, cache.keep) and np.allclose(y_l, y_n, rtol=2 * EPS64)

# %% [markdown]
# Inverted dropout keeps the expectation, $\mathbb E[\operatorname{dropout}(x)] = x$, and adds
# variance $x^2 p/(1-p)$ per value; at inference it is the identity. Measured over many draws,
# with a tolerance of 4 standard errors:

# %%
x1 = np.full(200_000, 1.5)
for p in (0.1, 0.5):
    y, _ = dropout_forward(x1, p, training=True, rng=np.random.default_rng(6))
    se = np.sqrt(x1[0] ** 2 * p / (1 - p) / x1.size)
    print(f"p = {p}: mean {y.mean():.4f} (x = 1.5, s.e. {se:.4f}); variance {y.var():.4f} "
          f"(x^2 p/(1-p) = {1.5**2 * p / (1 - p):.4f})")
    assert abs(y.mean() - 1.5) < 4 * se
    # the sample variance's relative s.e. is sqrt((kurtosis - 1) / n); a kept/dropped value is a
    # scaled Bernoulli(1 - p), kurtosis 3 + (1 - 6 p (1 - p)) / (p (1 - p)); that vanishes at
    # p = 1/2, where the error is second order: 1 / sqrt(n) bounds it
    kurt = 3 + (1 - 6 * p * (1 - p)) / (p * (1 - p))
    rel_se = max(np.sqrt((kurt - 1) / x1.size), 1 / np.sqrt(x1.size))
    assert abs(y.var() / (1.5**2 * p / (1 - p)) - 1) < 4 * rel_se
y_eval, _ = dropout_forward(x1, 0.5, training=False)
assert np.array_equal(y_eval, x1)  # inference: the identity, no randomness

# %% [markdown]
# Bad input is refused before any work, naming the argument (the listing raises too):

# %%
for bad in (1.0, -0.1):
    try:
        dropout_forward(xd, bad, training=True, rng=np.random.default_rng(0))
    except ValueError as err:
        print("ValueError:", err)
    else:
        raise AssertionError("p_drop outside [0, 1) was accepted")
