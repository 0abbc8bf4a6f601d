# %% [markdown]
# # 2.4 §6 Interview angle: the five questions, answered with numbers
#
# *Chapter 2.4, section 6.* Each of the section's questions, the strong answer in two or three
# sentences, and a computation with normlab that backs it. The longer treatments are in the
# notebooks for sections 3, 4 and 5.

# %%
import numpy as np

from normlab.functional import (
    batch_norm_forward,
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_forward,
)
from normlab.lab.experiments import gradients_at_init
from normlab.lab.framework import configure, evaluate
from normlab.models import Residual
from normlab.nn import MLP

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. "Why doesn't batch normalization work well for Transformers, mechanistically?"
#
# BatchNorm's statistics are per feature over the batch, here every (sequence, position) pair:
# padding enters them, and at generation time there is one token and no batch, so running
# averages stand in and the function changes (train/inference mismatch, a second, independent
# problem). LayerNorm's statistics are one token's own features.

# %%
C = 8
seqs = rng.normal(1.0, 2.0, size=(2, 6, C))  # (B, T, C)
mask = np.ones((2, 6), bool); mask[1, 2:] = False  # sequence 2 has 2 real tokens
padded = np.where(mask[..., None], seqs, 0.0)  # zero padding
g, b = np.ones(C), np.zeros(C)
bn_pad = batch_norm_forward(padded, g, b, None, None, training=True)[0]
bn_real = batch_norm_forward(padded, g, b, None, None, training=True, mask=mask)[0]
ln_pad, ln_alone = layer_norm_forward(padded, g, b)[0], layer_norm_forward(seqs[0], g, b)[0]
print(
    f"BatchNorm, a real token's output with vs without padding in the statistics: "
    f"{np.abs(bn_pad - bn_real)[mask].max():.2f};  "
    f"LayerNorm: {np.abs(ln_pad[0] - ln_alone).max():g}"
)
assert np.abs(bn_pad - bn_real)[mask].max() > 0.1 and np.array_equal(ln_pad[0], ln_alone)

# %% [markdown]
# ## 2. "Explain, with the actual equations, the difference between Pre-LN and Post-LN, and why one trains more stably at depth."
#
# Post-LN: $x_{l+1} = \operatorname{LN}(x_l + F(x_l))$. Pre-LN: $x_{l+1} = x_l +
# F(\operatorname{LN}(x_l))$. In Pre-LN the running sum of the $x_l$ never passes through a norm,
# so the gradient has an identity path; in Post-LN every add is followed by a LayerNorm on that
# path. Xiong et al.'s measurement is that Post-LN's gradients near the **output** do not shrink
# with depth while Pre-LN's shrink as $1/\sqrt L$, which is why Post-LN needs warmup at large
# learning rates. (The chapter's version says the early layers' gradients are the problem; see
# `2.4.4-pre-ln-vs-post-ln.ipynb` for the paper's and normlab's numbers.)

# %%
cfg = configure(gradients_at_init, "quick",
                overrides=dict(d_model=64, vocab=64, batch=8, batches=1, depths=(4, 16),
                               profile_depth=16, seeds=2))
result = evaluate(gradients_at_init, cfg)
last = result.data["last"]
ratio = np.array(last["post"]) / np.array(last["pre"])
print("last block's ||E dL/dW2||, L = 4 and 16: post", np.round(last["post"], 3), " pre",
      np.round(last["pre"], 3), " post/pre", np.round(ratio, 2))
assert (
    ratio[1] > ratio[0] > 1
)  # Post-LN's gradient near the output, relative to Pre-LN's, grows with L
assert last["pre"][1] < 0.75 * last["pre"][0]  # Pre-LN: ~ 1/sqrt(L), i.e. x 0.5 from 4 to 16

# %% [markdown]
# ## 3. "What specifically does RMSNorm remove from LayerNorm, and why is that safe to remove?"
#
# The mean subtraction (and usually β): RMSNorm divides by $\sqrt{\operatorname{mean}(x^2)}$.
# Zhang & Sennrich argue and show that the re-scaling, which both keep, carries the stabilizing
# effect. One row reduction fewer per call, in every norm of every layer for every token. The two
# coincide on centered rows:

# %%
x = rng.normal(0.5, 1.0, size=(4, 16))
xc = x - x.mean(axis=1, keepdims=True)
w = rng.normal(size=16)
diff = np.abs(
    rms_norm_forward(xc, w, eps=1e-6)[0] - layer_norm_forward(xc, w, None, eps=1e-6)[0]
).max()
print(f"centered rows: |RMSNorm - LayerNorm| = {diff:.1e}")
assert diff < 1e-13

# %% [markdown]
# ## 4. "If Pre-LN is more stable, why wasn't it just used from the start? What's the trade-off?"
#
# The original Transformer used Post-LN, and a Post-LN model that does train can end up stronger.
# One mechanism behind Pre-LN's cost is measurable at initialization: its stream grows with depth
# while each block adds an update of roughly fixed size, so the *relative* change each block
# makes to the stream shrinks (about as $1/\sqrt l$) and deep blocks matter less; Post-LN
# renormalizes after every add and keeps each block's relative contribution constant.

# %%
C, L = 64, 24


def relative_updates(placement, seed=0):
    """||x_{l+1} - x_l|| / ||x_l|| for every block of an L-block stack (Post-LN: before the
    norm)."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(16, C))
    out = []
    for _ in range(L):
        F = MLP(C, 4 * C, "relu", rng=r, std=C**-0.5, proj_std=(4 * C) ** -0.5, dtype=np.float64)
        blk = Residual(F, placement, "layernorm", C, n_layers=L, eps=1e-5, bias=False, p_drop=0.0,
                       rng=r, dtype=np.float64).set_impl("reference")
        y = blk(x)
        branch = blk.branch(blk.norm(x) if placement == "pre" else x)
        out.append(np.linalg.norm(branch) / np.linalg.norm(x))
        x = y
    return np.array(out)


pre = np.mean([relative_updates("pre", s) for s in range(3)], axis=0)
post = np.mean([relative_updates("post", s) for s in range(3)], axis=0)
print("relative update ||F|| / ||x_l|| at l = 1, 6, 12, 24:  pre", np.round(pre[[0, 5, 11, 23]], 3),
      "  post", np.round(post[[0, 5, 11, 23]], 3))
assert pre[-1] < 0.4 * pre[0]  # shrinks with depth (1/sqrt(24) ~ 0.2)
assert 0.7 < post[-1] / post[0] < 1.4  # constant

# %% [markdown]
# ## 5. "Does internal covariate shift still apply cleanly to Transformers?"
#
# The intuition (each layer's input statistics move as the layers below learn) carries over; the
# mechanism BatchNorm was built around (batch statistics of convolutional feature maps) does not,
# which is why LayerNorm redesigned it per token. And why normalization helps is not settled:
# Santurkar et al. (2018) found BatchNorm networks train well even with covariate shift injected
# on purpose and credit a smoother loss landscape. One effect that is certain is scale
# invariance: with a norm after a linear map, scaling the weights by $a$ leaves the output alone
# and scales their gradient by $1/a$, an automatic step-size adaptation (Ba et al. §5.2).

# %%
W = rng.normal(size=(16, 8))
xin = rng.normal(size=(32, 8))
dy = rng.normal(size=(32, 16))


def grad_w(Wm):
    y, cache = layer_norm_forward(xin @ Wm.T, None, None, eps=1e-30)
    return layer_norm_backward(dy, cache)[0].T @ xin, y


g1, y1 = grad_w(W)
for a in (0.1, 10.0):
    ga, ya = grad_w(a * W)
    err = np.abs(a * ga - g1).max() / np.abs(g1).max()
    print(
        f"W -> {a:g} W: output change {np.abs(ya - y1).max():.1e}, "
        f"|a dL/d(aW) - dL/dW| / |dL/dW| = {err:.1e}"
    )
    assert np.abs(ya - y1).max() < 1e-12 and err < 1e-12
