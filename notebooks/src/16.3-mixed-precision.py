# %% [markdown]
# # 16.3 Mixed precision
#
# *Chapter 16, section 16.3 (Listing 16.4).*
#
# Range and precision fail differently. float16 has 5 exponent bits: past 65,504 a value becomes
# infinity, below about 6e-8 it becomes zero. bfloat16 keeps float32's 8 exponent bits (the same
# range) but only 8 significant bits, so it rounds coarsely and small updates vanish quietly.
# The fixes follow: loss scaling moves fp16 gradients into range, float32 master weights and
# accumulators keep the small updates.
#
# `normlab.precision` rounds values to any format's grid on a CPU (`quantize`), bit for bit with
# ml_dtypes' casts; `normlab.precision.demos` holds this section's demonstrations as functions.

# %%
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

from normlab.precision import DynamicLossScaler, get_format, quantize, round_to_bfloat16
from normlab.precision.demos import (
    bfloat16_running_sum,
    fp16_overflows_but_bfloat16_keeps_range,
    loss_scaled_gradient,
    update_stagnation,
)

# %% [markdown]
# ## The formats
#
# The numbers the section quotes, read from normlab's format table (and checked against
# ml_dtypes' `finfo`):

# %%
print(
    f"{'format':10s} {'largest':>12s} {'smallest normal':>16s} "
    f"{'smallest subnormal':>19s} {'eps':>10s}"
)
for name in ("float32", "bfloat16", "float16"):
    f = get_format(name)
    print(
        f"{name:10s} {f.max_finite:12.5g} {f.min_normal:16.4g} "
        f"{f.min_subnormal:19.4g} {f.eps:10.3g}"
    )
    info = ml_dtypes.finfo(f.dtype)
    assert f.max_finite == float(info.max) and f.eps == float(info.eps)

fp16, bf16, fp32 = get_format("float16"), get_format("bfloat16"), get_format("float32")
assert fp16.max_finite == 65504.0  # "its largest finite value is 65,504"
assert bf16.emax == fp32.emax and bf16.emin == fp32.emin  # "keeps float32's exponent range"
assert (fp16.mantissa_bits, bf16.mantissa_bits) == (10, 7)  # "fewer fraction bits"

# %% [markdown]
# ## Listing 16.4: range, loss scaling and bfloat16 rounding
#
# The chapter's code, with `round_to_bfloat16` from `normlab.precision`:

# %%
def listing_fp16_overflows_but_bfloat16_keeps_range():
    large = np.array([1e5, 1e30], dtype=np.float32)
    fp16 = large.astype(np.float16).astype(np.float32)
    bf16 = round_to_bfloat16(large)
    return fp16, bf16


def listing_loss_scaled_gradient(gradient, scale):
    scaled = (gradient * scale).astype(np.float16)
    unscaled = scaled.astype(np.float32) / scale
    return unscaled


with np.errstate(over="ignore"):
    fp16_vals, bf16_vals = listing_fp16_overflows_but_bfloat16_keeps_range()
print("float16 :", fp16_vals)
print("bfloat16:", bf16_vals)
assert np.all(np.isinf(fp16_vals))
assert bf16_vals[0] == 99840.0  # 1e5 to 8 significant bits: 99840 = 390 * 2^8
assert abs(bf16_vals[1] / 1e30 - 1) < bf16.eps / 2  # finite, within half a bfloat16 ulp
# the library's version of the listing gives the same, and agrees with ml_dtypes' own cast
ours = fp16_overflows_but_bfloat16_keeps_range()
assert np.array_equal(ours[0], fp16_vals) and np.array_equal(ours[1], bf16_vals)
assert np.array_equal(
    bf16_vals, np.array([1e5, 1e30], np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
)

# %% [markdown]
# A picture of the two failure modes: the relative error of rounding a value to each format,
# across magnitudes. float16 is accurate to 2^-11 from 6e-5 to 65504 (about nine decades),
# loses bits gradually below that (its subnormals), is zero below 3e-8 and infinite above 65504;
# bfloat16 is 8 times coarser, 2^-8, everywhere float32 is defined.

# %%
mags = np.logspace(-12, 8, 2001).astype(np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    rel = {name: np.abs(quantize(mags, name).astype(np.float64) - mags) / mags
           for name in ("float16", "bfloat16")}
plt.figure(figsize=(6.5, 3.4))
edges = np.arange(0, mags.size, 25)  # the worst error in each window of 25 magnitudes
for name, r in rel.items():
    worst = np.maximum.reduceat(np.where(np.isfinite(r), r, 1e1), edges)
    plt.loglog(mags[edges], worst, label=name, lw=1.5, drawstyle="steps-post")
plt.axhline(2.0**-11, ls=":", c="C0"); plt.axhline(2.0**-8, ls=":", c="C1")
plt.axvline(65504, ls="--", c="grey"); plt.axvline(fp16.min_subnormal, ls="--", c="grey")
plt.ylim(1e-5, 2e1); plt.xlabel("|x|"); plt.ylabel("worst relative rounding error")
plt.title("float16: range; bfloat16: precision (1e1 = overflow, 1 = flushed to zero)", fontsize=9)
plt.legend(); plt.show()

normal16 = (mags >= fp16.min_normal) & (mags <= 65504)
assert rel["float16"][normal16].max() <= 2.0**-11 and rel["bfloat16"].max() <= 2.0**-8
assert np.all(rel["float16"][mags < fp16.min_subnormal / 2] == 1.0)  # flushed to zero
assert np.all(np.isinf(rel["float16"][mags > 65520]))  # overflow (65520 rounds up to inf)

# %% [markdown]
# ## A tiny gradient saved by loss scaling
#
# A gradient of 1e-8 is below float16's smallest subnormal (2^-24 ≈ 6e-8): the backward in
# float16 returns zero. Multiply the loss by S = 2^16 first and the same gradient is 6.6e-4,
# a normal float16 number; dividing by S afterwards gives it back to float16's precision.

# %%
g = np.float32(1e-8)
for S in (1.0, 2.0**16):
    listing = listing_loss_scaled_gradient(g, S)
    ours = loss_scaled_gradient(g, S)
    print(f"S = {S:>7g}: gradient after a float16 backward = {float(ours):.6g}")
    assert float(listing) == float(ours)
assert float(loss_scaled_gradient(g, 1.0)) == 0.0
assert abs(float(loss_scaled_gradient(g, 2.0**16)) / 1e-8 - 1) <= 2.0**-11  # half an fp16 ulp

# bfloat16 needs no scale for this (the "In practice" paragraph): float32's range, 8 bits kept
g_bf16 = float(round_to_bfloat16(g))
print(f"the same gradient stored in bfloat16, unscaled: {g_bf16:.6g}")
assert abs(g_bf16 / 1e-8 - 1) <= 2.0**-8

# %% [markdown]
# The scale has a window: too small and small gradients flush to zero, too large and large ones
# overflow. For gradients spread log-uniformly over 1e-12 .. 1e2, the fraction lost at each
# scale:

# %%
grads = np.float32(10.0 ** np.random.default_rng(0).uniform(-12, 2, 100_000))
scales = 2.0 ** np.arange(0, 41, 2)
lost_small, lost_large = [], []
with np.errstate(over="ignore"):
    for S in scales:
        q = quantize(grads * np.float32(S), "float16")
        lost_small.append(np.mean(q == 0))
        lost_large.append(np.mean(np.isinf(q)))
plt.figure(figsize=(6, 3.2))
plt.plot(np.log2(scales), lost_small, marker=".", label="flushed to zero")
plt.plot(np.log2(scales), lost_large, marker=".", label="overflow to inf")
plt.xlabel("log2 S"); plt.ylabel("fraction of gradients"); plt.legend(); plt.grid(alpha=0.3)
plt.title("float16 gradients under loss scale S", fontsize=10); plt.show()

# Exact expectations for a log-uniform spread: zero below 2^-25 / S, inf from 65520 / S.
for S, small, large in zip(scales, lost_small, lost_large):
    lo = np.clip((np.log10(2.0**-25 / S) + 12) / 14, 0, 1)
    hi = np.clip((2 - np.log10(65520 / S)) / 14, 0, 1)
    se = 4 * np.sqrt(0.25 / grads.size)
    assert abs(small - lo) < se and abs(large - hi) < se
print(f"S = 1: {lost_small[0]:.1%} flushed;  S = 2^16: {lost_small[8]:.1%} flushed, "
      f"{lost_large[8]:.1%} overflow")

# %% [markdown]
# The dynamic scaler (PyTorch's `GradScaler`, step for step) finds the window by itself: it
# halves S and skips the step when a gradient overflows, and doubles it after 2000 clean steps.

# %%
scaler = DynamicLossScaler(init_scale=2.0**16, growth_interval=3)
applied = []
for step, grad in enumerate(
    [np.array([np.inf]), np.array([1e-3]), np.array([1e-3]), np.array([1e-3]), np.array([2e-3])]
):
    skipped = scaler.step({"w": grad}, applied.append)
    print(f"step {step}: gradient {grad[0]:g} -> step {'skipped' if skipped else 'applied'}; "
          f"S is now {scaler.scale:g}")
assert scaler.skipped == 1 and len(applied) == 4
assert scaler.scale == 2.0**16  # halved once (2^15), doubled after 3 clean steps (2^16)

# %% [markdown]
# ## bfloat16 rounding: small updates disappear
#
# bfloat16 has 8 significant bits. Near 256 its spacing is 2, so adding a value below 1 rounds
# back to the same number: a running sum of 10,000 values in [0, 1) stored in bfloat16 stops at
# 256, where a float32 accumulator reaches about 5,000. This is why reductions accumulate in
# float32.

# %%
s_bf16, s_fp32, s_exact = bfloat16_running_sum(n=10_000, seed=0)
print(f"bfloat16 accumulator {s_bf16:g}, float32 accumulator {s_fp32:.2f}, exact {s_exact:.2f}")
assert s_bf16 == 256.0
assert abs(s_fp32 - s_exact) / s_exact < 1e-4  # float32 accumulation: n eps32 / 2 at most ~6e-4
print("bfloat16(1 + 2^-8) =", float(round_to_bfloat16(np.float32(1 + 2.0**-8))),
      "  bfloat16(1 + 2^-7) =", float(round_to_bfloat16(np.float32(1 + 2.0**-7))))
assert float(round_to_bfloat16(np.float32(1 + 2.0**-8))) == 1.0  # a tie, to even
assert float(round_to_bfloat16(np.float32(1 + 2.0**-7))) == 1 + 2.0**-7

# %% [markdown]
# ## Master weights
#
# The same effect on a weight: 1000 updates of −1e-3 applied to a bfloat16 weight of 1.0 leave it
# at 1.0 (each update is below half its spacing, 2^-8). A float32 master copy accumulates them
# and the bfloat16 copy used for compute follows it to 0; Kahan compensation and stochastic
# rounding are the alternatives when there is no room for a master copy.

# %%
result = update_stagnation("bfloat16", w0=1.0, delta=-1e-3, steps=1000, seed=0)
for method, w in result.items():
    print(f"{method:10s} final weight {w:.6f}")
assert result["direct"] == 1.0  # every update lost
assert abs(result["master"] - result["exact"]) < 1000 * 2.0**-24  # float32 rounding per step
assert abs(result["kahan"]) < 2.0**-8  # within bfloat16's spacing at 1 (2^-7) of the exact 0
assert abs(result["stochastic"]) < 4 * np.sqrt(1000) * 2.0**-8  # unbiased: a random walk's spread

# %% [markdown]
# **In practice**, as the section ends: do matmuls in the low-precision format being studied,
# keep losses, reductions, master weights and optimizer state in float32. `normlab train
# --precision amp_bf16 | amp_fp16 | pure_bf16 | fp8_hybrid` runs whole training recipes with those
# rules (and the lab's `precision-recipes` experiment compares them).
