# %% [markdown]
# # 16.4 Teach it: the four board steps
#
# *Chapter 16, section 16.4.*
#
# "Normalization controls activation scale, residuals preserve a direct gradient path, and mixed
# precision keeps arithmetic fast without trusting low precision with state." The section's four
# board steps, each small enough to do by hand and then with normlab, followed by its three
# misconceptions and its check for understanding, answered with a computation.

# %%
import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import (
    dropout_forward,
    layer_norm_forward,
    rms_norm_forward,
)
from normlab.models import Residual
from normlab.nn import BatchNorm, Identity, Linear
from normlab.precision import quantize

EPS = 1e-5  # LayerNorm's eps

# %% [markdown]
# ## Board step 1: LayerNorm's mean and variance, per row
#
# Two rows on the board. Row 1 is (1, 2, 3, 4): mean 10/4 = 2.5, variance
# (2.25 + 0.25 + 0.25 + 2.25)/4 = 1.25. Row 2 is row 1 times 2 plus 10: mean 15, variance 5 — and
# the *same* normalized row, because LayerNorm removes both the shift and the scale.

# %%
x = np.array([[1.0, 2.0, 3.0, 4.0],
              [12.0, 14.0, 16.0, 18.0]])  # (B, d) = (2, 4)
mean = x.mean(axis=1)
var = ((x - mean[:, None]) ** 2).mean(axis=1)
y, cache = layer_norm_forward(x, None, None, eps=EPS)
print("means", mean, " variances", var)
print("normalized rows:\n", np.round(y, 4))
assert np.array_equal(mean, [2.5, 15.0]) and np.array_equal(var, [1.25, 5.0])
assert np.allclose(cache.mean[:, 0], mean, rtol=0) and np.allclose(
    1 / cache.rstd[:, 0] ** 2 - EPS, var
)
by_hand = (x[0] - 2.5) / np.sqrt(1.25 + EPS)  # -1.3416, -0.4472, 0.4472, 1.3416
assert np.allclose(y[0], by_hand, rtol=1e-15) and np.allclose(y[1], y[0], atol=1e-5)

# %% [markdown]
# ## Board step 2: RMSNorm's denominator
#
# RMSNorm divides by the root mean square instead of the standard deviation and subtracts
# nothing: RMS(1, 2, 3, 4) = √(30/4) ≈ 2.739, against the standard deviation √1.25 ≈ 1.118. The
# two agree exactly when the row already has mean zero, since then mean(x²) is the variance.

# %%
rms = np.sqrt((x[0] ** 2).mean())
r, _ = rms_norm_forward(x[:1], np.ones(4), eps=EPS)
print(f"RMS = {rms:.4f}, std = {np.sqrt(1.25):.4f};  RMSNorm row: {np.round(r[0], 4)}")
assert np.isclose(rms, np.sqrt(7.5)) and np.allclose(r[0], x[0] / np.sqrt(7.5 + EPS), rtol=1e-15)
centered = x[:1] - 2.5
assert np.allclose(rms_norm_forward(centered, np.ones(4), eps=EPS)[0],
                   layer_norm_forward(centered, None, None, eps=EPS)[0], rtol=1e-14)

# %% [markdown]
# ## Board step 3: draw the residual identity gradient
#
# Three scalar blocks, $x_{l+1} = x_l + w_l x_l$ with $w = (0.5, -0.3, 0.2)$. The derivative of
# the output with respect to the input is $\prod_l (1 + w_l) = 1.5 \cdot 0.7 \cdot 1.2 = 1.26$;
# expanded, it is $1 + \sum_l w_l + \ldots$: the **1** is the path that skips every block. A
# plain stack $x_{l+1} = w_l x_l$ has only $\prod_l w_l = -0.03$.

# %%
w = [0.5, -0.3, 0.2]
rng = np.random.default_rng(0)


def scalar_block(wl, skip):
    lin = Linear(1, 1, rng=rng, dtype=np.float64).set_impl("reference")
    lin.params["weight"][...] = wl
    return Residual(lin, "none", "none", 1, n_layers=3, eps=EPS, bias=False, p_drop=0.0,
                    rng=rng, dtype=np.float64) if skip else lin


def d_out_d_in(skip):
    blocks = [scalar_block(wl, skip) for wl in w]
    h = np.ones((1, 1))
    for blk in blocks:
        h = blk(h)
    g = np.ones((1, 1))
    for blk in reversed(blocks):
        g = blk.backward(g)
    return float(g[0, 0])


with_skip, without = d_out_d_in(True), d_out_d_in(False)
print(f"residual: dx3/dx0 = {with_skip:.4f};  plain: {without:.4f}")
assert np.isclose(with_skip, 1.26, rtol=1e-15) and np.isclose(without, -0.03, rtol=1e-14)

fig, ax = plt.subplots(figsize=(8, 2.4))
for l in range(4):
    ax.add_patch(plt.Circle((3 * l, 0), 0.35, fc="white", ec="k"))
    ax.text(3 * l, 0, f"$x_{l}$", ha="center", va="center")
for l in range(3):
    ax.annotate("", xy=(3 * l + 2.6, 0.05), xytext=(3 * l + 0.4, 0.05),
                arrowprops=dict(arrowstyle="->", color="tab:blue", lw=2))
    ax.text(3 * l + 1.5, 0.2, "identity: 1", ha="center", color="tab:blue", fontsize=8)
    ax.annotate(
        "",
        xy=(3 * l + 2.6, -0.15),
        xytext=(3 * l + 0.4, -0.15),
        arrowprops=dict(arrowstyle="->", color="tab:orange", connectionstyle="arc3,rad=0.5"),
    )
    ax.text(
        3 * l + 1.5,
        -0.95,
        f"$F_{l}$: $w_{l}$ = {w[l]}",
        ha="center",
        color="tab:orange",
        fontsize=8,
    )
ax.text(4.5, 0.75, "forward along both paths; the gradient flows back along both, and the blue "
        "path alone carries 1", ha="center", fontsize=9)
ax.set_xlim(-0.8, 9.8); ax.set_ylim(-1.2, 1.0); ax.set_aspect("equal"); ax.axis("off")
plt.show()

# %% [markdown]
# ## Board step 4: loss scaling and unscaling
#
# $g_\text{true} = (S g)/S$. With $g = 10^{-8}$ and $S = 2^{16}$: $S g = 6.5536\cdot10^{-4}$,
# which float16 stores (its smallest normal is 6.1e-5, so it keeps 11 significant bits), and
# dividing by S in float32 returns $g$ to within float16's relative precision, 2^-11. Without S,
# $g$ is below float16's smallest subnormal 2^-24 ≈ 5.96e-8 and rounds to 0.

# %%
g, S = np.float32(1e-8), np.float32(2.0**16)
scaled = quantize(g * S, "float16")
unscaled = scaled / S
print(f"S g = {float(g * S):.6g} -> float16 {float(scaled):.6g} -> / S = {float(unscaled):.6g};"
      f"  unscaled: float16(g) = {float(quantize(g, 'float16')):g}")
assert float(quantize(g, "float16")) == 0.0
assert abs(float(unscaled) / 1e-8 - 1) <= 2.0**-11

# %% [markdown]
# ## The three misconceptions, computed
#
# **"BatchNorm's training statistics are inference statistics."** They are not: in training a
# BatchNorm layer uses the batch's own mean and variance, at inference the running averages.
# The same input gives different outputs:

# %%
bn = BatchNorm(3, dtype=np.float64)
data = np.random.default_rng(1)
for _ in range(50):
    bn(data.normal(0.0, 1.0, size=(64, 3)))  # training: updates the running statistics
probe = data.normal(3.0, 2.0, size=(4, 3))  # a batch unlike the training data
gap = np.abs(bn.train()(probe) - bn.eval()(probe)).max()
print(f"same input, train vs eval output: max difference {gap:.2f}")
assert gap > 1.0

# %% [markdown]
# **"Dropout needs scaling at inference."** Not inverted dropout: it divides the kept values by
# 1 − p during training, so the expectation is already right and inference is the identity.
# Forgetting the division (plain dropout) shrinks the training-time expectation to (1 − p) x:

# %%
x1 = np.full(100_000, 2.0)
p = 0.3
inverted, cache = dropout_forward(x1, p, training=True, rng=np.random.default_rng(2))
plain = x1 * cache.keep  # the mask without the 1 / (1 - p)
se = 2.0 * np.sqrt(p / (1 - p) / x1.size)
print(
    f"inverted: mean {inverted.mean():.4f} (x = 2);  plain: mean {plain.mean():.4f} "
    f"(= (1 - p) x = {(1 - p) * 2:.1f});  inference: {dropout_forward(x1, p, training=False)[0][0]}"
)
assert abs(inverted.mean() - 2.0) < 4 * se
assert abs(plain.mean() - (1 - p) * 2.0) < 4 * se * (1 - p)
assert np.array_equal(dropout_forward(x1, p, training=False)[0], x1)

# %% [markdown]
# **"bfloat16 is as good as float32: it has float32's range."** It has float32's *range* but
# not its *precision*: 1/3 in bfloat16 is off by about 1e-3 (2^-9 relative), in float32 by 1e-8.

# %%
for fmt in ("float32", "bfloat16", "float16"):
    err = abs(float(quantize(np.float64(1 / 3), fmt)) - 1 / 3) * 3
    print(f"{fmt:9s} relative error of 1/3: {err:.2e}")
assert abs(float(quantize(np.float64(1 / 3), "bfloat16")) * 3 - 1) > 1e-3
assert abs(float(quantize(np.float64(1 / 3), "float32")) * 3 - 1) < 1e-7

# %% [markdown]
# ## Check for understanding: why does pre-norm leave a cleaner gradient path than post-norm?
#
# Take one block whose branch contributes nothing yet (F = 0, as near initialization) and
# compute its input-output Jacobian. Pre-norm, $x + F(N(x))$: the identity, exactly. Post-norm,
# $N(x + F(x))$: LayerNorm's Jacobian, $\frac{1}{s}(I - \frac1d \mathbf 1\mathbf 1^\top -
# \frac1d \hat x\hat x^\top)$, which scales by 1/s and *deletes* two directions (the constant
# vector and $\hat x$) from every gradient that passes. Stack L post-norm blocks and the
# gradient goes through L such projections.

# %%
d = 8
xv = np.random.default_rng(3).normal(0.5, 2.0, size=(1, d))


def block_jacobian(placement):
    blk = Residual(Identity(), placement, "layernorm", d, n_layers=1, eps=EPS, bias=False,
                   p_drop=0.0, rng=np.random.default_rng(0), dtype=np.float64)
    blk.branch = _Zero()
    blk.set_impl("reference")
    blk(xv)
    return np.stack([blk.backward(e[None])[0] for e in np.eye(d)])  # rows: J^T e_i


class _Zero(Identity):
    """F(x) = 0: a branch that has learned nothing yet."""

    def forward(self, x):
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)


J_pre, J_post = block_jacobian("pre"), block_jacobian("post")
sv = np.linalg.svd(J_post, compute_uv=False)
s = np.sqrt(xv.var() + EPS)
print("pre-norm Jacobian is the identity:", np.array_equal(J_pre, np.eye(d)))
print("post-norm Jacobian singular values:", np.round(sv, 4), f"(1/s = {1 / s:.4f})")
assert np.array_equal(J_pre, np.eye(d))
assert np.allclose(sv[:-2], 1 / s, rtol=1e-12)
# the constant direction is deleted exactly; x̂'s up to eps: (1/s) eps / (var + eps)
assert sv[-1] < 1e-14 / s and np.isclose(sv[-2], EPS / (xv.var() + EPS) / s, rtol=1e-6)
