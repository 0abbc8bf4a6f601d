# %% [markdown]
# # 2.4 §7 Self-check questions and the self-check quiz, computed
#
# *Chapter 2.4, section 7 and the self-check quiz.* The seven self-check questions with short
# answers (and a computation where one settles it), then the quiz: its four concept questions and
# its four calculations (2.5, 1.25, 3.54, 20), each computed with normlab and asserted.

# %%
import numpy as np

from normlab.functional import batch_norm_forward, layer_norm_forward, rms_norm_forward
from normlab.models import Residual
from normlab.nn import Module

rng = np.random.default_rng(0)

# %% [markdown]
# ## The self-check questions
#
# **1. What two problems does normalization address in a very deep residual network?** The
# statistics of each layer's input drift as every layer below it learns, and the residual stream
# $x_L = x_0 + \sum F_l$ has no ceiling, so activations (and gradients) reach extreme
# scales. Without a norm, a branch that reads the stream scales with it, so the growth compounds
# with depth
# (geometric, not linear: `2.4.2-why-normalize.ipynb` measures ×10⁴ over 12 blocks).
#
# **2. Why is BatchNorm's statistic a poor fit for variable-length sequences and one-token
# inference?** Its per-feature statistics mix real tokens with padding and with other sequences
# (and, over time, with later tokens); with one token there is no batch at all, so inference uses
# running averages that differ from what training computed (`2.4.3-layernorm-vs-batchnorm.ipynb`).
#
# **3. LayerNorm's formula, and over which dimension?** $\mu = \frac1d\sum_k x_k$, $\sigma^2 =
# \frac1d\sum_k(x_k-\mu)^2$, $\operatorname{LN}(x) = \gamma\odot(x-\mu)/\sqrt{\sigma^2+\epsilon} +
# \beta$, over one token's d features: nothing from other tokens or examples enters.

# %%
x = rng.normal(size=(3, 5, 8))  # (B, T, C)
y, cache = layer_norm_forward(x, None, None)
assert cache.mean.shape == (3, 5, 1)  # one statistic per token
assert np.array_equal(
    layer_norm_forward(x[1:2, 3:4], None, None)[0][0, 0], y[1, 3]
)  # alone = in batch

# %% [markdown]
# **4. Post-LN and Pre-LN side by side, and which path differs?** Post-LN $x_{l+1} =
# \operatorname{LN}(x_l + F(x_l))$; Pre-LN $x_{l+1} = x_l + F(\operatorname{LN}(x_l))$. The
# residual path itself: in Post-LN it passes through a LayerNorm after every add, in Pre-LN only
# the sublayer's input is normalized.
#
# **5. Why does a norm-free residual path help gradients?** Because $\partial x_{l+1}/\partial x_l
# = I + J_F$ for Pre-LN: the identity term carries the top gradient to every layer unchanged,
# which is what residual connections were for. Post-LN multiplies it by a LayerNorm Jacobian in
# every block, a projection that removes two directions and rescales by $1/\sigma$
# (`16.4-teach-it.ipynb` computes both Jacobians).
#
# **6. What does RMSNorm remove and why is that safe?** The mean subtraction (and β); the
# re-scaling, which it keeps, is what stabilizes training (Zhang & Sennrich), and it saves a row
# reduction per call (`2.4.5-rmsnorm.ipynb` times it).
#
# **7. Chapters 2.1–2.4, each problem and its cause.** Recurrence processes tokens one after
# another (a sequential bottleneck), so attention replaced it; attention is permutation
# invariant, so positional information had to be added back; the choice of architectural shape
# and objective settled on decoder-only next-token prediction, whose stack of residual blocks
# must be made deep; and deep residual stacks are not trainable without normalization, this
# chapter. (This one spans chapters normlab does not cover; it has nothing to compute.)
#
# ## The quiz: concept questions
#
# **Why is BatchNorm a poor fit for Transformers processing variable-length sequences?** Batch
# statistics mix real and padding positions, and differ between training (batch) and inference
# (running averages). The first, computed:

# %%
seq = rng.normal(1.0, 1.0, size=(2, 4, 3))  # (B, T, C)
mask = np.array([[True] * 4, [True, False, False, False]])
padded = np.where(mask[..., None], seq, 0.0)
g, b = np.ones(3), np.zeros(3)
moved = np.abs(
    batch_norm_forward(padded, g, b, None, None, training=True)[0]
    - batch_norm_forward(padded, g, b, None, None, training=True, mask=mask)[0]
)[mask].max()
print(f"BatchNorm: padding moves real tokens' outputs by up to {moved:.2f}")
assert moved > 0.1

# %% [markdown]
# **What does LayerNorm normalize over, in contrast to BatchNorm?** One token's d features
# (BatchNorm: one feature over the batch), so no batch bookkeeping and the same function in
# training and inference.
#
# **What is the key structural difference between Pre-LN and Post-LN?** Where the norm sits
# relative to the residual add: Post-LN normalizes the sum, Pre-LN the sublayer's input, which
# keeps the running sum free of normalization.
#
# **What does RMSNorm remove from LayerNorm's computation?** The mean subtraction (and
# typically β): it divides by RMS(x) only.

# %%
row = rng.normal(2.0, 1.0, size=(1, 6))
w = np.ones(6)
assert np.allclose(
    rms_norm_forward(row, w, eps=1e-12)[0], row / np.sqrt(np.mean(row**2)), rtol=1e-12
)
assert not np.allclose(
    rms_norm_forward(row, w, eps=1e-12)[0], layer_norm_forward(row, w, None, eps=1e-12)[0]
)

# %% [markdown]
# ## The quiz: calculations
#
# **The LayerNorm mean of x = (1, 2, 3, 4).** (1+2+3+4)/4 = 10/4 = **2.5**. normlab's forward
# keeps the row mean in its cache:

# %%
x4 = np.array([[1.0, 2.0, 3.0, 4.0]])
_, cache = layer_norm_forward(x4, None, None, eps=1e-5)
mean = float(cache.mean[0, 0])
print("mean =", mean)
assert mean == 2.5

# %% [markdown]
# **The LayerNorm variance of the same vector.** [(1−2.5)² + (2−2.5)² + (3−2.5)² + (4−2.5)²]/4 =
# (2.25 + 0.25 + 0.25 + 2.25)/4 = 5/4 = **1.25** (biased: divide by d, as LayerNorm does). The
# cache holds 1/√(σ² + ε):

# %%
variance = float(1.0 / cache.rstd[0, 0] ** 2 - 1e-5)
print(f"variance = {variance:.12f}")
assert abs(variance - 1.25) < 1e-12
assert float(np.var(x4)) == 1.25 and float(np.var(x4, ddof=1)) != 1.25  # biased, not unbiased

# %% [markdown]
# **RMS(x) for x = (3, 4), to 2 decimals.** √((9 + 16)/2) = √12.5 ≈ **3.54**:

# %%
_, rcache = rms_norm_forward(np.array([[3.0, 4.0]]), np.ones(2), eps=1e-12)
rms = float(1.0 / rcache.rstd[0, 0])
print(f"RMS = {rms:.6f} -> {rms:.2f}")
assert abs(rms - np.sqrt(12.5)) < 1e-10 and f"{rms:.2f}" == "3.54"

# %% [markdown]
# **10 residual blocks, each adding a contribution of magnitude 2 to a running sum starting at
# 0.** 10 × 2 = **20**, through ten of normlab's residual blocks with no norm and a branch that
# adds the same vector of norm 2 each time. (The quiz's 20 assumes the contributions point the
# same way; in orthogonal directions they add in quadrature, 2√10 ≈ 6.32: see
# `2.4.2-why-normalize.ipynb`.)

# %%
class AddsTwo(Module):
    """F(x) = (2, 0, 0, ...): a contribution of magnitude 2, whatever the input."""

    def forward(self, x):
        out = np.zeros_like(x)
        out[..., 0] = 2.0
        return out


stream = np.zeros((1, 4))
for _ in range(10):
    stream = Residual(AddsTwo(), "none", "none", 4, n_layers=10, eps=1e-5, bias=False, p_drop=0.0,
                      rng=rng, dtype=np.float64)(stream)
magnitude = float(np.linalg.norm(stream))
print("magnitude after 10 blocks =", magnitude)
assert magnitude == 20.0

# %% [markdown]
# | quiz calculation | answer | normlab |
# |---|---|---|
# | LayerNorm mean of (1, 2, 3, 4) | 2.5 | `layer_norm_forward(...)[1].mean` |
# | LayerNorm variance of (1, 2, 3, 4) | 1.25 | `1 / rstd**2 - eps` |
# | RMS of (3, 4) | 3.54 | `1 / rms_norm_forward(...)[1].rstd` |
# | 10 blocks adding 2 | 20 | ten `Residual(..., "none", ...)` blocks |
