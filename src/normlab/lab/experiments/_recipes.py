"""The lab's training recipes, defined once and named: each training experiment derives its
``base`` from one of them by overrides that say what differs and why,

    BASE = R.derive(R.XIONG_MARKOV, "DeepNet's rule needs depth and a small lr", **{
        "model.n_layers": 12, "lr": 1e-3, ...})

and its ``tiny`` size from :func:`tiny_model`. A recipe is a plain ``TrainConfig``; ``derive``
is ``TrainConfig.with_overrides`` (checked as any config is) with the reason kept beside it in
the source, so a reader sees in one place what an experiment changed and why.

* :data:`XIONG_MARKOV`: Xiong et al. 2020 / Liu et al. 2020's setting at CPU size: the papers'
  init (Xavier block matrices, embeddings scaled to unit variance), Adam (0.9, 0.98) without
  weight decay or clipping, a cosine schedule, on the first-order Markov source (its exact
  entropy floor tells how far a run is from the best loss).
* :data:`TEXT`: the lab's text recipe (dyt): LLaMA-style Pre-LN with RoPE, init N(0, 1/d) and
  the embeddings x sqrt(d), AdamW (0.9, 0.95), weight decay 0.1, clipping at 1, warmup then
  cosine, on Python's pydoc text (characters).
* :data:`WORTSMAN`: Wortsman et al. 2023 section 2.1's recipe at CPU size: init N(0, 1/fan_in),
  RoPE, LayerNorm eps 1e-6, no biases, z-loss 1e-4, AdamW (0.9, 0.95, eps 1e-8), clipping at 1,
  warmup then cosine to 1e-5, on pydoc characters.
"""

from __future__ import annotations

from typing import Any

from ...models import GPTConfig
from ...train import TrainConfig

XIONG_MARKOV = TrainConfig(
    model=GPTConfig(vocab_size=16, seq_len=16, n_layers=6, d_model=32, n_heads=4,
                    init_std=32**-0.5, init="xavier", embed_scale=32**0.5),
    data="markov", markov_order=1, steps=200, batch_size=16, schedule="cosine", lr=1e-2,
    warmup=0, beta2=0.98, weight_decay=0.0, grad_clip=None, eval_interval=50, eval_batches=4)

TEXT = TrainConfig(
    model=GPTConfig(vocab_size=64, seq_len=32, n_layers=4, d_model=32, n_heads=4,
                    placement="pre", init_std=32**-0.5, embed_scale=32**0.5, positions="rope"),
    data="pydoc", steps=300, batch_size=16, lr=1e-2, warmup=40, eval_interval=100,
    eval_batches=4)

WORTSMAN = TrainConfig(
    model=GPTConfig(vocab_size=16, seq_len=32, n_layers=2, d_model=32, n_heads=2, init="fan_in",
                    positions="rope", norm_eps=1e-6, z_loss=1e-4),
    data="pydoc", lr=1e-2, min_lr=1e-5, warmup=28, schedule="cosine", steps=550,
    batch_size=8, weight_decay=1e-2, eval_interval=550)

RECIPES = {"xiong-markov": XIONG_MARKOV, "text": TEXT, "wortsman": WORTSMAN}

# The model fields of TEXT that the text experiments written before the recipes were named
# left at GPTConfig's defaults: no embedding scale and learned positions. Kept so that their
# committed numbers stay as they are (a change of recipe is a change of science, made apart).
TEXT_WITHOUT_ROPE_OR_EMBED_SCALE = {"model.embed_scale": 1.0, "model.positions": "learned"}


def derive(recipe: TrainConfig, why: str, overrides: dict[str, Any]) -> TrainConfig:
    """``recipe`` with ``overrides`` (dotted names, as ``TrainConfig.with_overrides``); ``why``
    says in the source what differs from the recipe and why (it must not be empty)."""
    if not why.strip():
        raise ValueError("derive: say why the experiment differs from its recipe (why='')")
    return recipe.with_overrides(overrides)


def tiny_model(d_model: int = 16, n_heads: int = 2, *, embed_scale: bool = False,
               prefix: str = "base.model.") -> dict[str, Any]:
    """The lab's tiny model size as size overrides: width ``d_model``, ``n_heads`` heads and
    the init N(0, 1/d) of the recipes (``init_std = d ** -0.5``); with ``embed_scale`` the
    embeddings x sqrt(d) as well (the recipes that scale them)."""
    out: dict[str, Any] = {f"{prefix}d_model": d_model, f"{prefix}n_heads": n_heads,
                           f"{prefix}init_std": d_model**-0.5}
    if embed_scale:
        out[f"{prefix}embed_scale"] = d_model**0.5
    return out
