# %% [markdown]
# # 2.4 §4 Pre-LN vs Post-LN: gradients at initialization
#
# *Chapter 2.4, section 4 (and the interview question "Explain, with the actual equations, the
# difference between Pre-LN and Post-LN"). Warmup, the section's other half, is in
# `2.4.4-warmup.ipynb`.*
#
# Post-LN, $x_{l+1} = \operatorname{LN}(x_l + F(x_l))$, puts a normalization on the residual
# path after every add; Pre-LN, $x_{l+1} = x_l + F(\operatorname{LN}(x_l))$, normalizes only
# the copy the sublayer reads, so the sum of the $x_l$ runs from the first block to the last
# untouched. Xiong et al. (2020) measure what this does to the gradients at initialization.

# %%
import matplotlib.pyplot as plt
import numpy as np

from normlab.lab.experiments import gradients_at_init
from normlab.lab.framework import configure, evaluate
from normlab.lab.stats import slope_interval
from normlab.models import Residual
from normlab.nn import MLP

# %% [markdown]
# ## The two update rules, in normlab's block
#
# `normlab.models.Residual` implements each placement as one line; check that its output is the
# chapter's equation, computed from the same sublayer F and norm N by hand:

# %%
C = 16
rng = np.random.default_rng(0)
x = rng.normal(size=(4, C))
for placement, by_hand in (("post", lambda F, N, x: N(x + F(x))),
                           ("pre", lambda F, N, x: x + F(N(x)))):
    F = MLP(C, 4 * C, "gelu", rng=np.random.default_rng(1), std=0.3, dtype=np.float64)
    block = Residual(F, placement, "layernorm", C, n_layers=1, eps=1e-5, bias=False, p_drop=0.0,
                     rng=rng, dtype=np.float64).set_impl("reference")
    out = block(x)
    expected = by_hand(block.branch, block.norm, x)
    print(f"{placement:4s}: block output == the equation: {np.array_equal(out, expected)};"
          f"  RMS of the output {np.sqrt(np.mean(out**2)):.3f}")
    assert np.array_equal(out, expected)

# %% [markdown]
# Post-LN's output is a LayerNorm output (RMS 1 per token, with γ = 1, β = 0); Pre-LN's is
# the input plus an update, so the stream keeps its own scale.
#
# ## Gradients at initialization
#
# The lab's `gradients-at-init` experiment builds Xiong et al.'s simplified model from normlab's
# GPT (one head with $W^Q = W^K = 0$, so attention is uniform; a ReLU FFN; Xavier weights;
# Gaussian inputs) and measures their statistic, the Frobenius norm of the expected gradient of
# each block's FFN output weight $W^{2,l}$. Theorem 1: the last layer's gradient is
# $O(d\sqrt{\ln d})$ for Post-LN, *independent of depth*, and $O(d\sqrt{\ln d / L})$ for Pre-LN.
# Here at d = 128, depths 6, 12, 24, 4 seeds; the lab's quick size, read from its config:

# %%
quick = configure(gradients_at_init, "quick")
print(f"the lab's quick size: depths {quick.depths}, {quick.seeds} seeds")
cfg = configure(gradients_at_init, "quick",
                overrides=dict(batch=8, depths=(6, 12, 24), profile_depth=12, seeds=4))
result = evaluate(gradients_at_init, cfg)
data = result.data  # JSON-able: lists, read back as arrays below
last = {p: np.asarray(data["last"][p]) for p in ("post", "pre")}
profile = {p: np.asarray(data["profile"][p]) for p in ("post", "pre")}
for check in result.checks:
    print(f"[{check.status}] "
          f"{check.claim}\n       {check.measured}")

Ls = np.array(data["depths"])
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for p in ("post", "pre"):
    slope = slope_interval(Ls, data["last_per_seed"][p])  # one log-log slope per seed
    axes[0].loglog(Ls, last[p], "o-", label=f"{p}-LN (slope {slope.text(2)})")
axes[0].loglog(Ls, last["pre"][0] * np.sqrt(Ls[0] / Ls), ":", c="grey", label="1/sqrt(L)")
axes[0].set(xlabel="depth L", ylabel="||E dL/dW2|| of the last block",
            title="last layer vs depth (Fig. 3c, d)")
axes[0].set_xticks(Ls, [str(L) for L in Ls], minor=False)
axes[0].set_xticks([], minor=True)
axes[0].legend(fontsize=8)
layers = np.arange(1, cfg.profile_depth + 1)
for p in ("post", "pre"):
    axes[1].plot(layers, profile[p] / profile[p][0], "o-", label=f"{p}-LN")
axes[1].axhline(1, c="grey", lw=0.5)
axes[1].set(xlabel="layer l (1 = nearest the input)", ylabel="relative to layer 1",
            title=f"per layer, L = {cfg.profile_depth} (Fig. 3a, b)")
axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()

slopes = {p: slope_interval(Ls, data["last_per_seed"][p]) for p in ("post", "pre")}
assert -0.7 <= slopes["pre"].mean <= -0.3  # Pre-LN: ~ 1/sqrt(L) (theory -1/2)
# Post-LN: flat in L within its seed spread (the interval is mean +- 2 s.e.)
assert abs(slopes["post"].mean) < 0.15 + 1.5 * (slopes["post"].hi - slopes["post"].lo) / 2
ratio = last["post"] / last["pre"]
assert np.all(ratio > 1) and np.all(np.diff(ratio) > 0)  # the gap widens with depth, ~ sqrt(L)
prof = profile
assert prof["post"][-1] > prof["post"][0]  # Post-LN: largest near the output
assert prof["pre"][-1] < 0.5 * prof["pre"][0]  # Pre-LN: largest near the input

# %% [markdown]
# ## Where the chapter and its source differ
#
# * **Which end gets the large gradients.** The chapter says that with Post-LN "the expected
#   magnitude of gradients at the layers nearest the input grows or is otherwise poorly
#   controlled". Xiong et al. say the opposite end: Post-LN's gradients are large for the
#   parameters *near the output* (Theorem 1 is about the last layer, whose gradient does not
#   shrink with depth; their Fig. 3(a) grows with the layer index), and that is why a large
#   learning rate at the start is unsafe and warmup helps. normlab measures the paper's picture:
#   Post-LN's last-layer gradient is flat in L (slope above) and its per-layer profile rises
#   towards the output (top/bottom printed above, > 1).
# * **Pre-LN's per-layer profile.** Xiong et al.'s Fig. 3(b) shows Pre-LN's gradient "almost the
#   same" at every layer. normlab measures it *decreasing* with the layer index (largest near the
#   input), as the simplified-model simulation in the project's notes and later papers
#   (NormFormer, DeepNet, Mix-LN) also find; the lab reports this row as a documented difference.
# * **The trade-off.** The chapter's "some cost in final representational strength" for Pre-LN is
#   a literature claim (e.g. Liu et al. 2020 find well-trained Post-LN models ahead); the lab's
#   `norm-placement-depth` experiment trains every placement at depths 2–24 and shows where Post-LN
#   stops training at all.
