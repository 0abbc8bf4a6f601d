# %% [markdown]
# # 2.4 §5 QK-norm and logit soft-capping
#
# *Chapter 2.4, section 5, second part.*
#
# A different failure: the attention logits $q\cdot k/\sqrt{D}$ themselves grow until the softmax
# is one-hot, even while the residual stream is well behaved (Dehghani et al. 2023 saw it
# diverge their ViT at 8B parameters on the way to ViT-22B; Wortsman et al. 2023 reproduce it in
# small models at high learning rates).
# QK-norm normalizes q and k before the product, which bounds it; soft-capping passes the logits
# through $c\tanh(s/c)$, which bounds them smoothly.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one BLAS thread is fastest

import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import attention_forward
from normlab.models import GPTConfig
from normlab.train import TrainConfig, Trainer

# %% [markdown]
# ## Attention logits at a high learning rate
#
# Three 2-layer normlab GPTs trained at a peak learning rate of 0.3 (Wortsman et al.'s grid goes
# that high), the same data and seed: no fix, QK-norm (LayerNorm on q and k per head, as
# Wortsman et al.'s qk-layernorm), and a soft-cap of 50 on the attention logits (Gemma 2's).
# Each step records the largest raw attention logit of every block (before any cap).

# %%
STEPS = 60


def run(**model_options):
    model = GPTConfig(vocab_size=16, seq_len=16, n_layers=2, d_model=32, n_heads=2, **model_options)
    config = TrainConfig(model=model, data="markov", lr=0.3, min_lr=1e-5, warmup=STEPS // 20,
                         schedule="cosine", steps=STEPS, batch_size=16, weight_decay=0.1,
                         eval_interval=STEPS, seed=0)
    trainer = Trainer(config)
    trainer.model.set_impl("reference")
    trainer.run()
    return trainer.result()


arms = {"no fix": {}, "QK-norm": {"qk_norm": "layernorm"}, "soft-cap 50": {"attn_softcap": 50.0}}
results = {name: run(**opts) for name, opts in arms.items()}
max_logit = {name: np.array([h["max_attn_logit"][0] for h in r.history])
             for name, r in results.items()}  # block 0, per step

plt.figure(figsize=(6, 3.5))
for name, series in max_logit.items():
    plt.semilogy(series, label=name)
plt.axhline(50, c="grey", ls=":", lw=0.8, label="cap = 50")
plt.xlabel("step"); plt.ylabel("largest raw attention logit, block 0"); plt.legend(fontsize=8)
plt.title("lr = 0.3", fontsize=10); plt.show()
for name, series in max_logit.items():
    print(f"{name:12s} largest raw logit: step 0 {series[0]:8.2f}, final {series[-1]:8.1f}, "
          f"max {series.max():8.1f}")

head_dim = 16
assert max_logit["no fix"].max() > 100  # grows by orders of magnitude
# QK-norm's bound: |LN(q).LN(k)| / sqrt(D) <= sqrt(D) times the product of the gains'
# largest entries
assert max_logit["QK-norm"].max() < 0.1 * max_logit["no fix"].max()

# %% [markdown]
# With the soft-cap the *raw* logits still grow (the plot shows them before the cap): the cap
# bounds what the softmax sees, not what the projections produce. QK-norm removes the growth at
# its source.
#
# ## QK-norm's bound, exactly
#
# After LayerNorm (gain 1, no bias) a vector of width D has norm √D, so by Cauchy–Schwarz the
# logit $\hat q\cdot\hat k/\sqrt D$ is at most √D in magnitude, however large q and k were.
# normlab's `attention_forward` reports the largest raw logit of a call:

# %%
rng = np.random.default_rng(0)
B, H, T, D = 2, 2, 8, 16
q = 1e3 * rng.normal(size=(B, H, T, D))  # huge queries and keys
k = 1e3 * rng.normal(size=(B, H, T, D))
v = rng.normal(size=(B, H, T, D))
ones = np.ones(D)
_, plain = attention_forward(q, k, v)
_, normed = attention_forward(q, k, v, ones, ones, qk_norm="layernorm")
_, aligned = attention_forward(
    q, q, v, ones, ones, qk_norm="layernorm"
)  # k = q: the bound is reached
print(f"largest logit: plain {plain.max_logit:.3g}; QK-norm {normed.max_logit:.3f}; "
      f"QK-norm with k = q {aligned.max_logit:.6f} (sqrt(D) = {np.sqrt(D):.6f})")
assert plain.max_logit > 1e5
assert normed.max_logit <= np.sqrt(D) and abs(aligned.max_logit - np.sqrt(D)) < 1e-4

# %% [markdown]
# ## Soft-capping: $s \mapsto c\tanh(s/c)$
#
# Nearly the identity for $|s| \ll c$ (relative error about $s^2/3c^2$), never past ±c,
# monotone (so the largest logit stays the largest). Gemma 2 uses c = 50 on attention logits and
# c = 30 on the final output logits. With c = 30 the logits 10, 20, 30, 40, 50 become:

# %%
cap = 30.0
s = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
capped = cap * np.tanh(s / cap)
print(np.round(capped, 2))
assert np.array_equal(np.round(capped, 2), [9.65, 17.48, 22.85, 26.10, 27.93])
grid = np.linspace(-200, 200, 4001)
y = cap * np.tanh(grid / cap)
assert np.all(np.abs(y) < cap) and np.all(np.diff(y) > 0)
small = np.linspace(-3, 3, 61)[np.linspace(-3, 3, 61) != 0]
rel = np.abs(cap * np.tanh(small / cap) - small) / np.abs(small)
assert np.allclose(rel, small**2 / (3 * cap**2), rtol=0.01)

# %% [markdown]
# What a cap of 50 on attention logits implies: over n keys, the largest attention weight is at
# most $1/(1 + (n-1)e^{-100})$, so the softmax can still be effectively one-hot: the cap keeps
# *extreme* values (and their overflow) away from the softmax, it does not force attention to
# spread. normlab's attention with `softcap=50` on the huge q, k above:

# %%
out, capped_cache = attention_forward(q, k, v, softcap=50.0, causal=False)
logits_seen = 50.0 * capped_cache.tanh  # (B, H, T, T) what the softmax received
print(f"raw max logit {capped_cache.max_logit:.3g}; after the cap: max {logits_seen.max():.4f}")
assert logits_seen.max() <= 50.0 and capped_cache.max_logit > 1e5
n = T
print(
    f"over n = {n} keys the largest weight can be 1 - (n-1) e^-100 = "
    f"1 - {(n - 1) * np.exp(-100):.1e}"
)

# %% [markdown]
# ## Where the chapter differs from its sources
#
# The chapter says QK-norm is "used in models like Gemma 2". Gemma 2 uses **soft-capping**
# (attention logits capped at 50, final logits at 30; Gemma Team 2024, arXiv:2408.00118) and no
# QK-norm. QK-norm arrived in **Gemma 3**, which normalizes q and k per head with RMSNorm in
# place of attention soft-capping. The transformers implementations (v5.17) show the same split:
# `Gemma2Attention` has `attn_logit_softcapping` (its config defaults: 50 for attention, 30 for
# the final logits) and no `q_norm`; `Gemma3Attention` has `q_norm` and `k_norm`, and
# `Gemma3Config` defaults both soft-caps to None. The chapter's source list pairs Henry et al.
# (2020, QK-norm with L2 normalization and a learned scale) with the Gemma 2 report; ViT-22B
# (Dehghani et al. 2023) is the large model
# that used LayerNorm on q and k. normlab offers `qk_norm="rmsnorm"` (Gemma 3, Qwen3) and
# `"layernorm"` (ViT-22B, Wortsman et al.) and `attn_softcap` / `final_softcap` (Gemma 2); the
# lab's `attention-logit-growth` experiment sweeps the learning rate for all three arms.
