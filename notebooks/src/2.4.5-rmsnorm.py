# %% [markdown]
# # 2.4 §5 RMSNorm: normalization with the mean-centering removed
#
# *Chapter 2.4, section 5, first part (and the interview question "What specifically does RMSNorm
# remove from LayerNorm, and why is that safe to remove?").*
#
# LayerNorm does two things: it re-centers (subtracts the row mean) and re-scales (divides by the
# row's spread). Zhang & Sennrich (2019) argue the re-scaling is what stabilizes training and
# drop the re-centering: $\operatorname{RMSNorm}(x) = \gamma\odot x/\operatorname{RMS}(x)$,
# $\operatorname{RMS}(x) = \sqrt{\frac1d\sum_k x_k^2}$, no β. One reduction fewer per call.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # timings below: one thread, stated

import platform
import time

import matplotlib.pyplot as plt
import numpy as np

from normlab.functional import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)

rng = np.random.default_rng(0)
EPS64 = np.finfo(np.float64).eps

# %% [markdown]
# ## What is removed, and what stays
#
# For a row with mean zero, mean(x²) *is* the variance, so RMSNorm and LayerNorm (without β)
# compute the same thing. For any other row they differ by exactly the re-centering:

# %%
d = 64
w = rng.normal(size=d)
x = rng.normal(0.7, 1.3, size=(256, d))  # (N, d) rows with a nonzero mean
xc = x - x.mean(axis=1, keepdims=True)  # the same rows, centered
same = np.abs(
    rms_norm_forward(xc, w, eps=1e-5)[0] - layer_norm_forward(xc, w, None, eps=1e-5)[0]
).max()
differ = np.abs(
    rms_norm_forward(x, w, eps=1e-5)[0] - layer_norm_forward(x, w, None, eps=1e-5)[0]
).max()
print(f"zero-mean rows: max |RMSNorm - LayerNorm| = {same:.1e};  raw rows: {differ:.2f}")
assert same < 64 * EPS64 * np.abs(w).max() and differ > 0.1

# %% [markdown]
# The invariances follow (Zhang & Sennrich, Table 1): both are invariant to re-scaling one
# example; only LayerNorm is invariant to re-centering it (adding the same constant to every
# feature). The gradient shows the same thing: LayerNorm's input gradient has no component along
# the constant vector (its rows sum to zero); RMSNorm's has.

# %%
NO_EPS = 1e-30  # eps far below mean(x^2): the invariances are exact only without eps
scale_ln = np.abs(
    layer_norm_forward(5 * x, w, None, eps=NO_EPS)[0]
    - layer_norm_forward(x, w, None, eps=NO_EPS)[0]
).max()
scale_rms = np.abs(
    rms_norm_forward(5 * x, w, eps=NO_EPS)[0] - rms_norm_forward(x, w, eps=NO_EPS)[0]
).max()
shift_ln = np.abs(
    layer_norm_forward(x + 3, w, None, eps=NO_EPS)[0]
    - layer_norm_forward(x, w, None, eps=NO_EPS)[0]
).max()
shift_rms = np.abs(
    rms_norm_forward(x + 3, w, eps=NO_EPS)[0] - rms_norm_forward(x, w, eps=NO_EPS)[0]
).max()
print(f"x -> 5x:    LayerNorm changes by {scale_ln:.1e}, RMSNorm by {scale_rms:.1e}")
print(f"x -> x + 3: LayerNorm changes by {shift_ln:.1e}, RMSNorm by {shift_rms:.2f}")
assert max(scale_ln, scale_rms, shift_ln) < 1e-12 and shift_rms > 0.1

dy = rng.normal(size=x.shape)
row_sum_ln = np.abs(layer_norm_backward(dy, layer_norm_forward(x, w, None)[1])[0].sum(axis=1)).max()
row_sum_rms = np.abs(rms_norm_backward(dy, rms_norm_forward(x, w)[1])[0].sum(axis=1)).max()
print(f"max |row sum of dx|: LayerNorm {row_sum_ln:.1e}, RMSNorm {row_sum_rms:.2f}")
assert row_sum_ln < 1e-12 and row_sum_rms > 0.1

# %% [markdown]
# ## The savings, timed here
#
# Like for like: normlab's NumPy reference LayerNorm and RMSNorm, forward and backward, float32,
# one thread, the median of interleaved repeats on three shapes (tokens × width). These are
# timings on a shared machine, shown and never asserted: they move from run to run.

# %%
def fwd_bwd(kind, x, dy, w):
    if kind == "layernorm":
        return layer_norm_backward(dy, layer_norm_forward(x, w, None)[1])
    return rms_norm_backward(dy, rms_norm_forward(x, w)[1])


def median_times(shape, repeats=9):
    xs = rng.normal(size=shape).astype(np.float32)
    dys = rng.normal(size=shape).astype(np.float32)
    ws = np.ones(shape[-1], np.float32)
    times = {"layernorm": [], "rmsnorm": []}
    for kind in times:
        fwd_bwd(kind, xs, dys, ws)  # warm up
    for r in range(repeats):  # interleaved, alternating order: the same conditions for both
        for kind in (("layernorm", "rmsnorm") if r % 2 else ("rmsnorm", "layernorm")):
            t0 = time.perf_counter()
            fwd_bwd(kind, xs, dys, ws)
            times[kind].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


print(f"numpy {np.__version__}, Python {platform.python_version()}, "
      f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, {os.cpu_count()} CPUs")
shapes = [(4096, 64), (4096, 512), (1024, 4096)]
savings = []
for shape in shapes:
    t = median_times(shape)
    savings.append(1 - t["rmsnorm"] / t["layernorm"])
    print(
        f"{shape!s:13s} LayerNorm {t['layernorm'] * 1e3:7.2f} ms   "
        f"RMSNorm {t['rmsnorm'] * 1e3:7.2f} ms"
        f"   saving {savings[-1]:+.0%}"
    )

plt.figure(figsize=(5, 3))
plt.bar([f"{n}x{c}" for n, c in shapes], np.array(savings) * 100)
plt.axhspan(7, 64, color="C1", alpha=0.15, label="paper: 7-64% (whole models)")
plt.axhspan(10, 40, color="C2", alpha=0.15, label="chapter: 10-40%")
plt.ylabel("RMSNorm's saving vs LayerNorm (%)"); plt.legend(fontsize=8)
plt.title("forward + backward, NumPy reference, 1 thread", fontsize=10); plt.show()

# %% [markdown]
# ## The chapter's numbers against the paper's
#
# The chapter says Zhang & Sennrich report "speedups on the order of 10–40% for the normalization
# computation itself". The paper's abstract says RMSNorm "reduces the running time by 7%∼64%",
# and those are **end-to-end training times of whole models**, not of the normalization alone:
#
# | model (Zhang & Sennrich 2019) | LayerNorm | RMSNorm | saving |
# |---|---|---|---|
# | Transformer-base, WMT14 (time per 1k steps) | 248 s | 231 s | 6.9 % (the "7 %") |
# | RNNSearch, TF Nematus | 665 s | 501 s | 24.7 % |
# | CNN/DailyMail attentive reader (per 0.1k steps) | 392 s | 333 s | 15.1 % |
# | Order embedding, COCO (per 0.1k steps) | 12.02 s | 7.12 s (pRMSNorm 4.34 s) | 40.8 % (pRMSNorm 63.9 %, the "64 %") |
#
# So the range is 7–64%, its top end is partial RMSNorm's, and it measures models, which is why
# it depends so much on how large a share of the step the normalization is. The per-operation
# saving timed above is a different quantity; in NumPy it is large because every reduction and
# elementwise pass is a separate trip through memory.

# %%
paper = {"Transformer-base": (248, 231), "RNNSearch": (665, 501), "attentive reader": (392, 333),
         "order embedding (RMSNorm)": (12.02, 7.12), "order embedding (pRMSNorm)": (12.02, 4.34)}
paper_savings = {k: 1 - r / l for k, (l, r) in paper.items()}
for k, v in paper_savings.items():
    print(f"{k:28s} {v:.1%}")
assert (
    round(100 * min(paper_savings.values())) == 7 and round(100 * max(paper_savings.values())) == 64
)
