# %% [markdown]
# # 16.1 BatchNorm, LayerNorm and RMSNorm
#
# *Chapter 16, "Normalization, Residuals & Precision", section 16.1 (Listings 16.1 and 16.2).*
#
# The three norms differ only in the axis they take their statistics over and in what they
# subtract. BatchNorm asks "for this feature, what did the batch look like?" and needs running
# statistics for inference; LayerNorm and RMSNorm ask "for this example, how large is its
# feature vector?", and get the same answer whatever else is in the batch.
#
# This notebook puts the chapter's listings next to `normlab.functional`, checks both backward
# passes against finite differences, and computes the two "easy to miss" facts of the section:
# parameter gradients reduce over every axis but the last, and LayerNorm's input gradient sums to
# zero on every row.

# %%
import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import (
    batch_norm_forward,
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from normlab.nn import BatchNorm
from normlab.testing import gradcheck

rng = np.random.default_rng(0)
EPS64 = np.finfo(np.float64).eps  # tolerances below are multiples of float64's epsilon

# %% [markdown]
# ## The axis is the whole difference
#
# For an array of shape `(B, d)`, BatchNorm reduces over axis 0 (the batch: one mean per
# feature), LayerNorm and RMSNorm over axis 1 (the features: one statistic per example). The
# picture shows which entries share a statistic.

# %%
B, d = 6, 8
x = rng.normal(2.0, 3.0, size=(B, d))  # (B, d) shifted and scaled on purpose
ones, zeros = np.ones(d), np.zeros(d)

bn, _, _, _ = batch_norm_forward(x, ones, zeros, None, None, training=True)  # stats over axis 0
ln, _ = layer_norm_forward(x, ones, zeros)  # stats over axis -1

fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
for ax, title, box in ((axes[0], "BatchNorm: one mean per feature (column)", "col"),
                       (axes[1], "LayerNorm / RMSNorm: one per example (row)", "row")):
    ax.imshow(x, cmap="Greys", aspect="auto")
    j = 2
    rect = (plt.Rectangle((j - 0.5, -0.5), 1, B, fill=False, lw=3, ec="tab:red") if box == "col"
            else plt.Rectangle((-0.5, j - 0.5), d, 1, fill=False, lw=3, ec="tab:blue"))
    ax.add_patch(rect)
    ax.set(title=title, xlabel="feature j (d)", ylabel="example i (B)")
    ax.title.set_fontsize(9)
plt.tight_layout()
plt.show()

print("BatchNorm output: column means", np.round(bn.mean(axis=0), 12)[:3], "... column variances",
      np.round(bn.var(axis=0), 6)[:3])
print("LayerNorm output: row means   ", np.round(ln.mean(axis=1), 12)[:3], "... row variances   ",
      np.round(ln.var(axis=1), 6)[:3])

# What each one makes zero-mean / unit-variance (the variance is var / (var + eps), not exactly 1):
assert np.allclose(bn.mean(axis=0), 0, atol=100 * EPS64)
assert np.allclose(ln.mean(axis=1), 0, atol=100 * EPS64)
assert np.allclose(bn.var(axis=0), x.var(axis=0) / (x.var(axis=0) + 1e-5), rtol=1e-12)
assert np.allclose(ln.var(axis=1), x.var(axis=1) / (x.var(axis=1) + 1e-5), rtol=1e-12)
# ... and what it does not: BatchNorm's rows and LayerNorm's columns keep their spread.
assert np.abs(bn.mean(axis=1)).max() > 0.1 and np.abs(ln.mean(axis=0)).max() > 0.1

# %% [markdown]
# LayerNorm's answer for one example does not depend on the others; BatchNorm's does. Replace
# every other example in the batch and look at example 0:

# %%
other = x.copy()
other[1:] = rng.normal(-5.0, 0.5, size=(B - 1, d))  # same example 0, a different batch
bn_other, _, _, _ = batch_norm_forward(other, ones, zeros, None, None, training=True)
ln_other, _ = layer_norm_forward(other, ones, zeros)
print("example 0 moves by", f"{np.abs(bn_other[0] - bn[0]).max():.3f} under BatchNorm,",
      f"{np.abs(ln_other[0] - ln[0]).max():.1e} under LayerNorm")
assert np.abs(bn_other[0] - bn[0]).max() > 0.5
assert np.array_equal(ln_other[0], ln[0])  # bit for bit: the row alone decides

# %% [markdown]
# ## Listing 16.1: LayerNorm forward and backward
#
# The chapter's code, verbatim (renamed `listing_*` so that it can sit beside normlab's):

# %%
def listing_layer_norm_forward(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = np.mean(centered * centered, axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt(variance + eps)
    normalized = centered * inv_std
    out = normalized * gamma + beta
    cache = (normalized, inv_std, gamma)
    return out, cache


def listing_layer_norm_backward(dout, cache):
    normalized, inv_std, gamma = cache
    axes = tuple(range(dout.ndim - 1))
    grad_gamma = np.sum(dout * normalized, axis=axes)
    grad_beta = np.sum(dout, axis=axes)
    grad_norm = dout * gamma
    width = dout.shape[-1]
    sum_grad = np.sum(grad_norm, axis=-1, keepdims=True)
    sum_grad_norm = np.sum(grad_norm * normalized, axis=-1, keepdims=True)
    dx = inv_std * (grad_norm - sum_grad / width
                    - normalized * sum_grad_norm / width)
    return dx, grad_gamma, grad_beta

# %% [markdown]
# normlab's `layer_norm_forward` / `layer_norm_backward` compute the same thing with a different
# cache (it saves the input and the row statistics and recomputes x̂ in the backward). On a
# `(B, T, C)` batch in float64 the two agree to rounding:

# %%
x3 = rng.normal(0.5, 2.0, size=(2, 5, 16))  # (B, T, C)
gamma, beta = rng.normal(size=16), rng.normal(size=16)
dy = rng.normal(size=x3.shape)  # (B, T, C) an upstream gradient

out_l, cache_l = listing_layer_norm_forward(x3, gamma, beta)
out_n, cache_n = layer_norm_forward(x3, gamma, beta, eps=1e-5)
grads_l = listing_layer_norm_backward(dy, cache_l)
grads_n = layer_norm_backward(dy, cache_n)

for name, a, b in zip(("out", "dx", "dgamma", "dbeta"), (out_l, *grads_l), (out_n, *grads_n)):
    err = np.abs(a - b).max() / np.abs(b).max()
    print(f"{name:7s} listing vs normlab: max relative difference {err:.1e}")
    assert err < 64 * EPS64, name

# %% [markdown]
# ## Listing 16.2: RMSNorm forward and backward

# %%
def listing_rms_norm_forward(x, weight, eps=1e-8):
    mean_square = np.mean(x * x, axis=-1, keepdims=True)
    inv_rms = 1.0 / np.sqrt(mean_square + eps)
    normalized = x * inv_rms
    out = normalized * weight
    cache = (x, normalized, inv_rms, weight)
    return out, cache


def listing_rms_norm_backward(dout, cache):
    x, normalized, inv_rms, weight = cache
    axes = tuple(range(dout.ndim - 1))
    grad_weight = np.sum(dout * normalized, axis=axes)
    grad_norm = dout * weight
    width = dout.shape[-1]
    dot = np.sum(grad_norm * x, axis=-1, keepdims=True)
    dx = grad_norm * inv_rms - x * (inv_rms ** 3) * dot / width
    return dx, grad_weight


weight = rng.normal(size=16)
out_l, cache_l = listing_rms_norm_forward(x3, weight)
out_n, cache_n = rms_norm_forward(x3, weight)  # normlab's default eps is the listing's 1e-8
for name, a, b in zip(("out", "dx", "dweight"),
                      (out_l, *listing_rms_norm_backward(dy, cache_l)),
                      (out_n, *rms_norm_backward(dy, cache_n))):
    err = np.abs(a - b).max() / np.abs(b).max()
    print(f"{name:7s} listing vs normlab: max relative difference {err:.1e}")
    assert err < 64 * EPS64, name

# %% [markdown]
# The listing writes the RMSNorm backward as `g/rms − x (g·x) / (d rms³)`; normlab writes the
# same expression as `rstd (g − x̂ mean(g x̂))`, LayerNorm's formula without the `mean(g)` term.
# That is the sentence "RMSNorm subtracts only the component introduced by the RMS denominator".
#
# ## The backward and its two row means (equation 16.3)
#
# $\bar{x} = \frac{1}{s}\left(\bar{\hat x} - \operatorname{mean}(\bar{\hat x}) - \hat x\,
# \operatorname{mean}(\bar{\hat x}\odot\hat x)\right)$. Each mean removes one direction from the
# gradient: the first makes every row of $\bar x$ sum to zero (LayerNorm cannot see a constant
# added to a row), the second makes each row orthogonal to $\hat x$ (LayerNorm cannot see the row
# being scaled up). RMSNorm keeps only the second.

# %%
# eps, negligible here: with eps the second direction is removed up to eps / (var + eps)
TINY = 1e-30
dx_ln = layer_norm_backward(dy, layer_norm_forward(x3, gamma, beta, eps=TINY)[1])[0]  # (B, T, C)
dx_rms = rms_norm_backward(dy, rms_norm_forward(x3, weight, eps=TINY)[1])[0]
xhat = (x3 - x3.mean(-1, keepdims=True)) / x3.std(-1, keepdims=True)  # (B, T, C)


def cosine(a, b):
    """Largest |cos| over rows between a and b."""
    return np.max(
        np.abs(np.sum(a * b, -1)) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    )


ones_row = np.ones_like(x3)
print(f"LayerNorm: cos(dx, 1)    = {cosine(dx_ln, ones_row):.1e}   (zero: the mean(g) term)")
print(f"LayerNorm: cos(dx, x̂)    = {cosine(dx_ln, xhat):.1e}   (zero: the x̂ mean(g x̂) term)")
print(f"RMSNorm:   cos(dx, x)    = {cosine(dx_rms, x3):.1e}   (zero: the x̂ mean(g x̂) term)")
print(f"RMSNorm:   cos(dx, 1)    = {cosine(dx_rms, ones_row):.2f}      (not zero: no mean(g) term)")
assert cosine(dx_ln, ones_row) < 64 * EPS64 and cosine(dx_ln, xhat) < 64 * EPS64
assert cosine(dx_rms, x3) < 64 * EPS64
assert cosine(dx_rms, ones_row) > 0.01

# %% [markdown]
# The same facts as a computation on the forward: adding a constant to a row changes nothing
# for LayerNorm, scaling a row changes nothing for either (up to eps).

# %%
shift = layer_norm_forward(x3 + 7.0, gamma, beta)[0] - layer_norm_forward(x3, gamma, beta)[0]
scale = (
    rms_norm_forward(3.0 * x3, weight, eps=1e-30)[0] - rms_norm_forward(x3, weight, eps=1e-30)[0]
)
print(f"LayerNorm(x + 7) - LayerNorm(x): {np.abs(shift).max():.1e};"
      f"  RMSNorm(3x) - RMSNorm(x): {np.abs(scale).max():.1e}")
assert np.abs(shift).max() < 1e-12 and np.abs(scale).max() < 1e-12

# %% [markdown]
# ## A gradient check ("The tests gradient-check both backward passes")
#
# `normlab.testing.gradcheck` compares a backward with central finite differences in float64,
# for a random upstream gradient and random parameters (ones and zeros would hide a wrong
# backward). The chapter's listings pass too.

# %%
inputs = {"x": rng.normal(size=(3, 7)), "gamma": rng.normal(size=7), "beta": rng.normal(size=7)}
reports = {
    "normlab LayerNorm": gradcheck(layer_norm_forward, layer_norm_backward, inputs),
    "Listing 16.1": gradcheck(listing_layer_norm_forward, listing_layer_norm_backward, inputs),
    "normlab RMSNorm": gradcheck(rms_norm_forward, rms_norm_backward,
                                 {"x": inputs["x"], "weight": inputs["gamma"]}),
    "Listing 16.2": gradcheck(listing_rms_norm_forward, listing_rms_norm_backward,
                              {"x": inputs["x"], "weight": inputs["gamma"]}),
}
for name, report in reports.items():
    print(f"{name:18s} worst relative error {report.max_rel:.1e}  passed: {report.passed}")
    assert report.passed and report.max_rel < 1e-7, name

# %% [markdown]
# A wrong backward fails the same check. Drop the second row mean from the listing (a classic
# bug) and the error is of order one:

# %%
def buggy_backward(dout, cache):
    _normalized, inv_std, gamma = cache
    grad_norm = dout * gamma
    dx = inv_std * (grad_norm - grad_norm.mean(axis=-1, keepdims=True))  # no x̂ mean(g x̂) term
    return dx, *listing_layer_norm_backward(dout, cache)[1:]


buggy = gradcheck(listing_layer_norm_forward, buggy_backward, inputs, wrt=["x"])
print(f"without the second mean: relative error {buggy.max_rel:.2f}, passed: {buggy.passed}")
assert not buggy.passed and buggy.max_rel > 0.05

# %% [markdown]
# ## Parameter gradients reduce over every axis but the last
#
# The same γ and β serve every example and every position, so their gradients sum over `B` and
# `T`: for a `(B, T, C)` input, `dgamma` has shape `(C,)` and equals the sum over all `B·T` rows.

# %%
_, dgamma, dbeta = layer_norm_backward(dy, layer_norm_forward(x3, gamma, beta)[1])
xhat_eps = layer_norm_forward(x3, None, None)[0]  # (B, T, C) x̂ with the same eps
rows = dy.reshape(-1, 16) * xhat_eps.reshape(-1, 16)  # (B*T, C)
print("x", x3.shape, "-> dgamma", dgamma.shape, "dbeta", dbeta.shape)
assert dgamma.shape == dbeta.shape == (16,)
assert np.allclose(dgamma, rows.sum(axis=0), rtol=1e-9)
assert np.allclose(dbeta, dy.reshape(-1, 16).sum(axis=0), rtol=1e-12)

# %% [markdown]
# ## BatchNorm's running statistics
#
# BatchNorm normalizes with the batch's statistics in training and keeps running averages for
# inference. The chapter (Listing 16.3) writes the update as `running = 0.9 running + 0.1 batch`;
# PyTorch and normlab call the same update `momentum = 0.1` (the weight of the *new* batch), and
# keep the running variance *unbiased* (`n / (n − 1)` times the batch variance), where the
# listing's `x.var(axis=0)` is biased. Both conventions converge to the data's statistics:

# %%
true_mean, true_std = np.linspace(-2, 2, 4), np.linspace(0.5, 3, 4)
layer = BatchNorm(4, momentum=0.1, dtype=np.float64)
data = np.random.default_rng(1)
trace, chapter_mean, chapter_var = [], np.zeros(4), np.ones(4)
for _step in range(200):
    batch = data.normal(true_mean, true_std, size=(32, 4))  # (N, C)
    layer(batch)
    chapter_mean = 0.9 * chapter_mean + 0.1 * batch.mean(axis=0)  # Listing 16.3, momentum 0.9
    chapter_var = 0.9 * chapter_var + 0.1 * batch.var(axis=0)
    trace.append(layer.running_mean.copy())

assert np.allclose(layer.running_mean, chapter_mean, rtol=1e-12)  # the same mean update
# the variances differ by exactly the unbiasing factor n / (n - 1) = 32 / 31
# (after the initial 1 decays)
ratio = (layer.running_var - 0.9**200) / (chapter_var - 0.9**200)
print(f"running var normlab / chapter = {ratio.mean():.6f} (32/31 = {32 / 31:.6f})")
assert np.allclose(ratio, 32 / 31, rtol=1e-9)

plt.figure(figsize=(5, 3))
plt.plot(np.array(trace))
plt.hlines(true_mean, 0, 200, colors="grey", linestyles=":")
plt.xlabel("training step")
plt.ylabel("running mean")
plt.title("running means reach the data's means")
plt.show()
# The running mean is an exponential average of batch means: its standard deviation around the
# true mean is sqrt(m / (2 - m)) * std / sqrt(N) with m = 0.1, N = 32; allow 4 of them per channel.
sd = np.sqrt(0.1 / 1.9) * true_std / np.sqrt(32)
err = np.abs(layer.running_mean - true_mean)
print("after 200 steps, |running mean - true mean| / its s.d. =", np.round(err / sd, 2))
assert np.all(err < 4 * sd)

# %% [markdown]
# In eval mode the layer uses the running statistics, so one example's output no longer depends
# on its batch, and equals what the training statistics would give only on average:

# %%
probe = data.normal(true_mean, true_std, size=(8, 4))
train_out = layer.train()(probe)
eval_out = layer.eval()(probe)
alone = layer.eval()(probe[:1])
print(f"train vs eval outputs differ by up to {np.abs(train_out - eval_out).max():.2f}")
assert np.array_equal(alone[0], eval_out[0])  # eval: the batch no longer matters
assert (
    np.abs(train_out - eval_out).max() > 0.05
)  # train: 8 examples' statistics, not the running ones
