# %% [markdown]
# # 16.5 Exercises 16.1–16.4, worked
#
# *Chapter 16, section 16.5.* Each solution is written out and then checked by a computation the
# notebook asserts, so the solution cannot quietly drift from what the code does.

# %%
import numpy as np

from normlab.functional import (
    batch_norm_forward,
    dropout_backward,
    dropout_forward,
    layer_norm_backward,
    layer_norm_forward,
    linear_backward,
    linear_forward,
    rms_norm_forward,
)
from normlab.models import Residual
from normlab.nn import MLP
from normlab.precision import StaticLossScaler, quantize, round_to_bfloat16
from normlab.testing import gradcheck, numerical_grad

rng = np.random.default_rng(0)
EPS64 = np.finfo(np.float64).eps

# %% [markdown]
# ## Exercise 16.1 ★ Train vs inference statistics
#
# *Explain why BatchNorm needs running statistics for inference, and why LayerNorm does not.
# Which axes are reduced by each method for an array of shape B × d?*
#
# **Solution.** BatchNorm's statistics are per feature, over the batch: for `(B, d)` it reduces
# axis 0 (B) and gets d means and d variances. At inference there may be one example (B = 1, a
# variance of zero) or a batch whose make-up should not change any one prediction, so the layer
# substitutes averages collected in training. LayerNorm's statistics are per example, over the
# features: it reduces axis 1 (d) and gets B means and variances, each computed from the example
# itself, so training and inference compute exactly the same function.

# %%
B, d = 5, 6
x = rng.normal(1.0, 3.0, size=(B, d))
ones, zeros = np.ones(d), np.zeros(d)
bn, bn_cache, _, _ = batch_norm_forward(x, ones, zeros, None, None, training=True)
ln, ln_cache = layer_norm_forward(x, ones, zeros)
print("BatchNorm statistics:", bn_cache.mean.shape, "(one per feature: axis 0 reduced)")
print("LayerNorm statistics:", ln_cache.mean.shape, "(one per example: axis 1 reduced)")
assert bn_cache.mean.shape == (d,) and np.allclose(bn_cache.mean, x.mean(axis=0))
assert ln_cache.mean.shape == (B, 1) and np.allclose(ln_cache.mean[:, 0], x.mean(axis=1))

try:  # one example in training: BatchNorm has nothing to estimate a variance from
    batch_norm_forward(x[:1], ones, zeros, None, None, training=True)
except ValueError as err:
    print("BatchNorm, B = 1:", err)
else:
    raise AssertionError("BatchNorm accepted a batch of one in training")
alone, _ = layer_norm_forward(x[:1], ones, zeros)
assert np.array_equal(alone[0], ln[0])  # LayerNorm: the same answer alone or in a batch

# %% [markdown]
# ## Exercise 16.2 ★★ LayerNorm backward
#
# *Derive the LayerNorm input gradient in (16.3) from the centered input and row variance. Why do
# two row means appear in the formula?*
#
# **Solution.** For one row, let $c = x - \mu$, $v = \frac1d\sum_j c_j^2$, $s = \sqrt{v +
# \epsilon}$, $\hat x = c/s$, and $\bar{\hat x} = \bar y \odot \gamma$ the gradient arriving at
# $\hat x$. Differentiate: $\partial c_i/\partial x_j = \delta_{ij} - \frac1d$;
# $\partial v/\partial x_j = \frac2d c_j$ (the $-\frac1d$ terms cancel because $\sum_i c_i = 0$);
# $\partial s/\partial x_j = \frac{c_j}{d\,s}$. So
#
# $$\frac{\partial \hat x_i}{\partial x_j} = \frac1s\Big(\delta_{ij} - \frac1d\Big) -
#   \frac{c_i c_j}{d\, s^3}
#   = \frac1s\Big(\delta_{ij} - \frac1d - \frac{\hat x_i \hat x_j}{d}\Big),$$
#
# and $\bar x_j = \sum_i \bar{\hat x}_i\,\partial \hat x_i/\partial x_j = \frac1s\big(\bar{\hat
# x}_j - \operatorname{mean}(\bar{\hat x}) - \hat x_j \operatorname{mean}(\bar{\hat x}\odot\hat
# x)\big)$, equation (16.3). **Two row means** because x enters $\hat x$ through two row
# statistics: the mean $\mu$ gives $-\operatorname{mean}(\bar{\hat x})$ (the gradient can have
# no component along the constant vector), and the standard deviation $s$ gives $-\hat x\,
# \operatorname{mean}(\bar{\hat x}\odot\hat x)$ (no component along $\hat x$ itself).
#
# Check each step: the Jacobian from the formula against finite differences of normlab's
# forward, then the vector-Jacobian product against `layer_norm_backward`.

# %%
row = rng.normal(0.3, 1.7, size=(1, d))
gamma, beta = rng.normal(size=d), rng.normal(size=d)
eps = 1e-5
c = row[0] - row[0].mean()
s = np.sqrt(np.mean(c**2) + eps)
xhat = c / s
J = (np.eye(d) - 1.0 / d - np.outer(xhat, xhat) / d) / s  # J[i, j] = d xhat_i / d x_j

J_fd = np.stack([numerical_grad(lambda: layer_norm_forward(row, None, None, eps=eps)[0][0], row,
                                np.eye(d)[i]) [0] for i in range(d)])  # row i: d xhat_i / d x
err_J = np.abs(J - J_fd).max() / np.abs(J).max()
print(f"derived Jacobian vs finite differences: relative error {err_J:.1e}")
assert err_J < 1e-8  # central differences, h = 1e-6: error ~ h^2 plus rounding / h

ybar = rng.normal(size=d)
xhat_bar = ybar * gamma
dx_formula = (xhat_bar - xhat_bar.mean() - xhat * np.mean(xhat_bar * xhat)) / s
dx_chain = J.T @ xhat_bar
dx_normlab = layer_norm_backward(ybar[None], layer_norm_forward(row, gamma, beta, eps=eps)[1])[0][0]
print("(16.3) vs J^T g:", np.abs(dx_formula - dx_chain).max(), " vs normlab:",
      np.abs(dx_formula - dx_normlab).max())
assert np.allclose(dx_formula, dx_chain, rtol=0, atol=32 * EPS64 * np.abs(dx_chain).max())
assert np.allclose(dx_formula, dx_normlab, rtol=0, atol=32 * EPS64 * np.abs(dx_chain).max())

# The two means are the two directions the gradient cannot have:
assert abs(dx_formula.sum()) < 32 * EPS64 * np.abs(dx_formula).sum()  # along 1
assert (
    abs(dx_formula @ xhat) / (np.abs(dx_formula) @ np.abs(xhat)) < 32 * EPS64 + eps
)  # along x̂ (up to eps)

# %% [markdown]
# ## Exercise 16.3 ★★ RMSNorm and residuals
#
# *Show that RMSNorm without ε is invariant to multiplying one row by a positive constant. Then
# explain how the residual equation creates an identity gradient path.*
#
# **Solution.** For $a > 0$: $\operatorname{RMS}(a x) = \sqrt{\frac1d\sum_j a^2 x_j^2} = a\,
# \operatorname{RMS}(x)$, so $\frac{a x}{\operatorname{RMS}(a x)} = \frac{x}{\operatorname{RMS}(x)}$
# and the output $\gamma\odot x/\operatorname{RMS}(x)$ is unchanged; only that row's statistic
# changes, so the other rows are untouched too. (A negative $a$ flips the sign; with ε the
# invariance is approximate, off by about $\epsilon / (2\,\operatorname{mean}(x^2))$ in relative
# terms, and breaks down once $a^2\operatorname{mean}(x^2)$ is comparable to ε.)
#
# For the residual: differentiating $x_{l+1} = x_l + F_l(x_l)$ gives $\partial x_{l+1}/\partial
# x_l = I + J_{F_l}$, so $\bar x_l = \bar x_{l+1} + J_{F_l}^\top \bar x_{l+1}$. Through L blocks
# the product $\prod_l (I + J_{F_l})$ contains the term $I$: the top gradient reaches every layer
# unchanged, whatever the branches do, plus their contributions.

# %%
X = rng.normal(size=(4, d))
w = rng.normal(size=d)
TINY = 1e-300  # "without eps": normlab requires eps > 0, so take one far below mean(x^2)
base, _ = rms_norm_forward(X, w, eps=TINY)
for a in (1e-3, 0.5, 7.0, 1e6):
    Xa = X.copy()
    Xa[2] *= a  # one row times a positive constant
    out, _ = rms_norm_forward(Xa, w, eps=TINY)
    print(f"a = {a:g}: max change {np.abs(out - base).max():.1e}")
    assert np.allclose(out, base, rtol=4 * EPS64, atol=4 * EPS64 * np.abs(base).max())
Xneg = X.copy(); Xneg[2] *= -1.0
assert np.allclose(rms_norm_forward(Xneg, w, eps=TINY)[0][2], -base[2])  # negative: sign flips

# with the usual eps the invariance fails for a small enough row
small = X.copy(); small[2] *= 1e-5
with_eps = rms_norm_forward(small, w, eps=1e-8)[0][2]
ms = np.mean(small[2] ** 2)
print(f"eps = 1e-8, row scaled by 1e-5 (mean square {ms:.1e}): output shrinks by "
      f"{1 - np.abs(with_eps).sum() / np.abs(base[2]).sum():.2f} (1 - sqrt(ms / (ms + eps)) = "
      f"{1 - np.sqrt(ms / (ms + 1e-8)):.2f})")
assert np.isclose(
    np.abs(with_eps).sum() / np.abs(base[2]).sum(), np.sqrt(ms / (ms + 1e-8)), rtol=1e-9
)

# %% [markdown]
# The identity path, checked on a residual block with an MLP branch: its Jacobian, by finite
# differences, is $I + J_F$ with $J_F$ the branch's own Jacobian.

# %%
C = 5
mlp = MLP(C, 12, "gelu", rng=rng, std=0.5, dtype=np.float64).set_impl("reference")
blk = Residual(mlp, "none", "none", C, n_layers=1, eps=1e-5, bias=False, p_drop=0.0, rng=rng,
               dtype=np.float64).set_impl("reference")
x0 = rng.normal(size=(1, C))
J_blk = np.stack([numerical_grad(lambda: blk(x0)[0], x0, np.eye(C)[i])[0] for i in range(C)])
J_F = np.stack([numerical_grad(lambda: mlp(x0)[0], x0, np.eye(C)[i])[0] for i in range(C)])
print(
    f"|J_block - (I + J_F)| = {np.abs(J_blk - (np.eye(C) + J_F)).max():.1e}; "
    f"|J_F| = {np.abs(J_F).max():.2f}"
)
assert np.allclose(J_blk, np.eye(C) + J_F, atol=1e-8)
assert np.abs(J_F).max() > 0.1  # the branch is not trivial

# %% [markdown]
# ## Exercise 16.4 ★★★ Dropout and mixed precision
#
# *Implement inverted dropout and a tiny mixed-precision demo: show that fp16 overflows on large
# values where rounded bfloat16 remains finite, and show how loss scaling recovers a tiny fp16
# gradient.*
#
# **Solution.** Inverted dropout, written out (keep with probability 1 − p, scale the kept values
# by 1/(1 − p), the same mask in the backward), and checked against `normlab.functional.dropout_*`,
# against finite differences with the mask held fixed, and for its expectation.

# %%
def inverted_dropout(x, p, rng):
    if not 0 <= p < 1:
        raise ValueError(f"p must be in [0, 1); got {p}")
    keep = rng.random(x.shape) >= p
    return x * keep / (1 - p), keep


def inverted_dropout_backward(dout, keep, p):
    return dout * keep / (1 - p)


xd = rng.normal(size=(3, 8))
y, keep = inverted_dropout(xd, 0.4, np.random.default_rng(9))
y_n, cache = dropout_forward(xd, 0.4, training=True, rng=np.random.default_rng(9))
assert np.array_equal(keep, cache.keep) and np.allclose(y, y_n, rtol=2 * EPS64, atol=0)
dout = rng.normal(size=xd.shape)
assert np.allclose(
    inverted_dropout_backward(dout, keep, 0.4), dropout_backward(dout, cache), rtol=2 * EPS64
)
report = gradcheck(
    lambda v: (v * keep / 0.6, None),
    lambda g, _: inverted_dropout_backward(g, keep, 0.4),
    {"x": xd},
)
print(report)
assert report.passed

big = np.full(400_000, 3.0)
mean = inverted_dropout(big, 0.4, np.random.default_rng(10))[0].mean()
se = 3.0 * np.sqrt(0.4 / 0.6 / big.size)
print(f"E[dropout(3)] = {mean:.4f} +- {se:.4f}")
assert abs(mean - 3.0) < 4 * se

# %% [markdown]
# The mixed-precision demo on a real backward: a linear layer `y = x W^T` whose loss gradient
# is tiny (a loss multiplied by 1e-6, as happens for small losses and late in training). The
# float16 backward rounds the incoming gradient to float16: unscaled, most of it becomes zero and
# the weight gradient is wrong; scaled by S = 2^16 and unscaled after, it matches the float32
# gradient to float16's precision. Large activations, meanwhile, overflow float16 but not
# bfloat16.

# %%
xs = rng.normal(size=(32, 16)).astype(np.float32)  # (N, C_in)
W = rng.normal(0, 0.25, size=(8, 16)).astype(np.float32)  # (C_out, C_in)
y32, lin_cache = linear_forward(xs, W)
dy32 = np.float32(1e-6) * rng.normal(size=y32.shape).astype(np.float32) / y32.size  # (N, C_out)
_, dW_ref, _ = linear_backward(dy32, lin_cache)


def fp16_weight_grad(scale):
    """dW from a float16 upstream gradient of (scale * loss), unscaled by the loss scaler."""
    dy16 = quantize(dy32 * np.float32(scale), "float16")  # the gradient as float16 stores it
    _, dW, _ = linear_backward(dy16, lin_cache)
    (dW,), found_inf = StaticLossScaler(scale).unscale([dW])
    return dW, float(np.mean(dy16 == 0)), found_inf


for S in (1.0, 2.0**16):
    dW, zeros_frac, found_inf = fp16_weight_grad(S)
    rel = np.abs(dW - dW_ref).max() / np.abs(dW_ref).max()
    print(f"S = {S:>7g}: {zeros_frac:.0%} of the upstream gradient is 0 in float16; "
          f"dW relative error {rel:.1e}")
    if S == 1.0:
        assert zeros_frac > 0.5 and rel > 0.5  # underflow: the gradient is mostly lost
    else:
        assert zeros_frac == 0 and not found_inf and rel < 8 * 2.0**-11  # fp16 precision

acts = np.array([7e4, 3e5, 1e20], np.float32)
with np.errstate(over="ignore"):
    print("activations", acts, "-> float16", quantize(acts, "float16"), "-> bfloat16",
          round_to_bfloat16(acts))
    assert np.all(np.isinf(quantize(acts, "float16")))
assert np.all(np.isfinite(round_to_bfloat16(acts)))
assert np.all(np.abs(round_to_bfloat16(acts) / acts - 1) <= 2.0**-8)  # unit roundoff, 8 bits
