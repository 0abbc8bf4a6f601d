# %% [markdown]
# # 2.4 §3 LayerNorm mechanics, and why not BatchNorm
#
# *Chapter 2.4, section 3 (and the interview question "Why doesn't batch normalization work well
# for Transformers, mechanistically?").*
#
# BatchNorm takes each feature's statistics over the batch, which for sequences means over every
# (example, position) pair: padding enters those statistics, a token's output depends on the
# other sequences in the batch and on *later* tokens of its own, and at inference, one token at a
# time, there is no batch at all, so running averages stand in and the function changes.
# LayerNorm takes its statistics over one token's own features and has none of these problems.

# %%
import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import (
    batch_norm_backward,
    batch_norm_forward,
    layer_norm_backward,
    layer_norm_forward,
)
from normlab.lab.experiments import batchnorm_vs_layernorm
from normlab.lab.framework import configure, evaluate
from normlab.models import GPT, GPTConfig

EXACT = 1e-12  # "no effect" in float64

# %% [markdown]
# ## Padding, by hand
#
# Two sequences of one feature, lengths 3 and 1, padded with zeros to length 3. BatchNorm's mean
# for the feature should be the mean of the 4 real tokens; over the padded (B, T) array it is
# the mean of 6 numbers, two of them padding.

# %%
x = np.array([[[1.0], [2.0], [3.0]],
              [[6.0], [0.0], [0.0]]])  # (B, T, C) = (2, 3, 1); sequence 2 has one real token
mask = np.array([[True, True, True], [True, False, False]])  # (B, T) real positions
g, b = np.ones(1), np.zeros(1)
_, padded, _, _ = batch_norm_forward(x, g, b, None, None, training=True)
_, masked, _, _ = batch_norm_forward(x, g, b, None, None, training=True, mask=mask)
print(f"mean over the padded array: {padded.mean[0]:.4f} (= 12/6);"
      f" over the real tokens: {masked.mean[0]:.4f} (= 12/4)")
assert padded.mean[0] == 2.0 and masked.mean[0] == 3.0
# LayerNorm normalizes each token over its own features: padding is never read
tokens = np.array([[[1.0, 4.0, -2.0], [2.0, 0.5, 1.0]],
                   [[6.0, 6.5, 5.0], [0.0, 0.0, 0.0]]])  # (B, T, C); the last token is padding
ln_batch, _ = layer_norm_forward(tokens, None, None)
ln_alone, _ = layer_norm_forward(tokens[0, :1], None, None)
assert np.array_equal(ln_batch[0, 0], ln_alone[0])

# %% [markdown]
# ## The lab's measurement
#
# The lab's `batchnorm-vs-layernorm` experiment measures each effect on random token features
# (32 channels, batches of 16 sequences of lengths 8 to 32), here at a notebook size:

# %%
cfg = configure(batchnorm_vs_layernorm, "quick",
                overrides=dict(mc_batches=400, warmup_batches=100, mismatch_batches=60,
                               companions=20))
result = evaluate(batchnorm_vs_layernorm, cfg)
for check in result.checks:
    print(f"[{check.status}] "
          f"{check.claim}\n       {check.measured}")
assert all(c.passed for c in result.checks if c.passed is not None), "a counted check failed"

pad = result.data["padding"]["rows"]
te = result.data["train_eval"]["rows"]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.3))
axes[0].plot([r["pad_fraction"] for r in pad], [r["bn"] for r in pad], "o-", label="BatchNorm")
axes[0].plot(
    [r["pad_fraction"] for r in pad], [r["bn_masked"] for r in pad], "s-", label="BatchNorm, masked"
)
axes[0].plot([r["pad_fraction"] for r in pad], [r["ln"] for r in pad], "^-", label="LayerNorm")
axes[0].set(
    xlabel="fraction of positions that are padding",
    ylabel="max |change| of real tokens' outputs",
    title="padding",
)
axes[0].legend(fontsize=8)
m = np.array([r["batch"] for r in te]); gap = np.array([r["mismatch"] for r in te])
axes[1].loglog(m, gap, "o-", label="BatchNorm: mean |y_train - y_eval|")
axes[1].loglog(m, gap[-1] * np.sqrt(m[-1] / m), ":", label="~ 1/sqrt(m)")
axes[1].set(xlabel="batch size m", title="train/eval mismatch (LayerNorm: 0)")
axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()

assert all(r["bn"] > 0.1 for r in pad[1:]) and np.all(np.diff([r["bn"] for r in pad]) > 0)
assert max(r["bn_masked"] for r in pad) < EXACT and max(r["ln"] for r in pad) < EXACT
assert np.all(np.diff(gap) < 0) and result.data["train_eval"]["ln_gap"] == 0.0
# the mismatch is the sampling error of a batch's mean and standard deviation: ~ m^(-1/2)
slope = np.polyfit(np.log(m), np.log(gap), 1)[0]
print(f"log-log slope of the mismatch vs m: {slope:.2f} (sampling error: -0.5)")
assert -0.65 < slope < -0.4

# %% [markdown]
# ## Decoding one token at a time
#
# A decoder-only model with LayerNorm computes, for position t, exactly what the full-sequence
# forward computed: causal attention never looks ahead and LayerNorm never looks sideways. Feed
# normlab's GPT the prefix `idx[:, :t+1]` for every t and compare with one forward of the
# whole sequence:

# %%
model = GPT(GPTConfig(vocab_size=32, seq_len=16, n_layers=2, d_model=32, n_heads=4,
                      placement="pre", norm="layernorm", dtype="float64"),
            rng=np.random.default_rng(0)).set_impl("reference")
idx = np.random.default_rng(1).integers(0, 32, size=(1, 16))
full = model.logits(idx)  # (1, T, V)
step = np.stack([model.logits(idx[:, : t + 1])[0, -1] for t in range(16)])  # (T, V)
err = np.abs(step - full[0]).max() / np.abs(full).max()
print(f"token-at-a-time vs full forward: max relative difference {err:.1e}")
assert err < 1e-13

# %% [markdown]
# BatchNorm in training mode, with statistics over (B, T), breaks causality itself: a token's
# output depends on tokens *after* it. The gradient shows it: ask for the output at position 0
# only and see where its input gradient lands.

# %%
xs = np.random.default_rng(2).normal(size=(4, 8, 16))  # (B, T, C)
dy = np.zeros_like(xs)
dy[:, 0] = np.random.default_rng(3).normal(size=(4, 16))  # only position 0's output matters
C = xs.shape[-1]
_, bn_cache, _, _ = batch_norm_forward(xs, np.ones(C), np.zeros(C), None, None, training=True)
dx_bn = batch_norm_backward(dy, bn_cache)[0]
dx_ln = layer_norm_backward(dy, layer_norm_forward(xs, np.ones(C), np.zeros(C))[1])[0]
future_bn = np.abs(dx_bn[:, 1:]).max()
future_ln = np.abs(dx_ln[:, 1:]).max()
print(f"d out[t=0] / d x[t>0]: BatchNorm {future_bn:.3f}, LayerNorm {future_ln:g}")
assert future_bn > 1e-3 and future_ln == 0.0
try:  # and one token in training mode has no statistics at all
    batch_norm_forward(xs[:1, :1], np.ones(C), np.zeros(C), None, None, training=True)
except ValueError as err:
    print("BatchNorm, one token:", err)
else:
    raise AssertionError("BatchNorm normalized a single token with batch statistics")
