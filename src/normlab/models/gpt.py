"""A decoder-only Transformer language model with a hand-written backward.

Forward (reads down), for token ids idx (B, T):

    x = s_e wte[idx] + wpe[0..T-1]         (no table with RoPE: positions enter q and k;
                                           s_e = embed_scale, Gemma's sqrt(C))
    x = block_l(x)                         for l = 1..L (``Block``: attention, then MLP)
    x = norm_f(x)                          where the placement leaves the stream unnormalized
    logits = x W_head^T                    W_head = wte with tied embeddings (nGPT: times s_z)
    loss = cross_entropy(logits, targets)  (final-logit soft-cap, z-loss, label smoothing)

nGPT (placement 'ngpt', arXiv 2410.01131; NVIDIA/ngpt model.py and train.py): no norm layers,
the logits times the learned s_z (V,) (stored at 1 / sqrt(C), read times sqrt(C): the code's
``sz_init_value / sz_init_scaling``), and every matrix's vectors along the embedding axis on the
unit sphere (``normalize_matrices``: at build, and after every optimizer step, by the Trainer).

Backward (reads up): the same lines in reverse order, each module adding its parameter gradients
into its buffers.

An ensemble's stacked model (``normlab.models.stack``: M models' parameters along a leading
member axis) reads the same lines on idx (M, B, T); its forward returns one ``LossParts`` per
member, each from the member's own loss settings, and its backward takes one dloss per member.

The forward computes no statistics beyond the loss: a measurement observes the tensors through
the numerics hooks every module calls (``normlab.train.probes``; ``normlab inspect``), so that
inference pays for nothing it did not ask for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from ..functional import (
    CrossEntropyCache,
    LinearCache,
    linear_backward,
    linear_forward,
    rope_frequencies,
    rope_tables,
)
from ..functional.ngpt import normalize_rows_
from ..nn import Embedding, Identity, Linear, Module
from ..nn.linear import operand_backward
from ..nn.numerics import FULL_PRECISION, Numerics
from .block import Block, init_stds, make_norm
from .config import GPTConfig

# RoPE's tables (cos and sin, (rows, D/2) each) hold at first the positions 0..ROPE_ROWS-1 (or
# seq_len, when fewer) and grow when a longer sequence comes: a model of 10^9 positions holds no
# table for the positions it never reads (transformers computes cos and sin per forward)
ROPE_ROWS = 4096


class LossParts(NamedTuple):
    """What one forward with targets returns."""

    loss: float  # the objective: cross-entropy (label-smoothed) + z-loss
    nll: float  # mean negative log-likelihood of the targets (nats per token): compare with H
    log_z: float  # mean log Z of the output softmax (Wortsman et al.'s output-logit drift)


class GPT(Module):
    """The model of ``config``; ``rng`` draws the initial parameters, ``dropout_rng`` (default: a
    generator seeded from ``rng``) the dropout masks. With ``flatten`` (the default) parameters
    and gradients live in two flat buffers (``Module.flatten``: one fused optimizer pass);
    ``load_hf`` builds without, so that weights mapped from a file stay mapped.

    Children: ``wte`` (V, C), ``wpe`` (T_max, C) with learned positions, ``blocks`` (L of them),
    ``norm_f``, and ``head`` (V, C) unless the embeddings are tied.
    """

    numerics: Numerics = FULL_PRECISION
    # the parameters that are memory maps of a checkpoint's files (set by load_hf)
    mapped_parameters: tuple[str, ...] = ()
    # the transformers family of the checkpoint it was loaded from (set by load_hf; save_hf's
    # default family)
    hf_family: str | None = None

    def __init__(self, config: GPTConfig, *, rng: np.random.Generator,
                 dropout_rng: np.random.Generator | None = None, flatten: bool = True):
        ck.generator(rng)
        self._build(config, rng, dropout_rng, flatten)

    @classmethod
    def empty(cls, config: GPTConfig, *,
              dropout_rng: np.random.Generator | None = None) -> GPT:
        """The model of ``config`` with every parameter zero and nothing drawn (a zero array's
        pages come from the OS only once written): for a loader that then sets every parameter
        with ``Module.replace_parameters``, as ``load_hf`` does. Not flattened. ``dropout_rng``
        defaults to the generator ``GPT(config, rng=np.random.default_rng(0))`` would use."""
        model = cls.__new__(cls)
        model._build(config, None, dropout_rng, False)
        return model

    def _build(self, config: GPTConfig, rng: np.random.Generator | None,
               dropout_rng: np.random.Generator | None, flatten: bool) -> None:
        super().__init__()
        ck.flag(flatten, "flatten")
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig; got {type(config).__name__}")
        cfg = self.config = config
        dtype = np.dtype(cfg.dtype)
        seed_rng = np.random.default_rng(0) if rng is None else rng
        self.dropout_rng = ck.generator(
            np.random.default_rng(seed_rng.integers(2**63)) if dropout_rng is None
            else dropout_rng, "dropout_rng",
        )
        C, V = cfg.d_model, cfg.vocab_size
        std = init_stds(cfg)  # cfg.init: gpt2 (init_std) or fan_in (1 / sqrt(fan_in))
        self.wte = Embedding(V, C, rng=rng, std=std["table"], dtype=dtype)
        rope = None
        if cfg.positions == "learned":
            self.wpe = Embedding(cfg.seq_len, C, rng=rng, std=std["table"], dtype=dtype)
        else:
            self._inv_freq = rope_frequencies(
                cfg.head_dim, cfg.rope_base, cfg.rope_scaling, factor=cfg.rope_factor,
                low_freq_factor=cfg.rope_low_freq_factor,
                high_freq_factor=cfg.rope_high_freq_factor,
                original_max=cfg.rope_original_max)  # (D/2,)
            # [cos, sin], one list shared by every block's attention: grown in place (_embed)
            rope = self._rope = list(rope_tables(min(cfg.seq_len, ROPE_ROWS), cfg.head_dim,
                                                 cfg.rope_base, dtype, inv_freq=self._inv_freq))
        # rng is None for GPT.empty: Block then draws nothing (its hint says Generator)
        self.blocks = [Block(cfg, rng=rng,  # type: ignore[arg-type]
                             dropout_rng=self.dropout_rng, rope=rope, window=cfg.window(layer),
                             layer=layer)
                       for layer in range(cfg.n_layers)]
        self.norm_f = (make_norm(cfg.norm, C, dtype=dtype, **cfg.norm_fields())
                       if cfg.final_norm else Identity())
        if not cfg.tie_embeddings:
            self.head = Linear(C, V, rng=rng, std=std["head"], dtype=dtype)
        if cfg.placement == "ngpt":  # s_z: stored at 1 / sqrt(C), read times sqrt(C)
            self.sz_scale = float(np.sqrt(C))
            self.add_param("sz", np.full(V, 1.0 / self.sz_scale, dtype))
            if rng is not None:  # the official train.py: normalize_matrices() before step 0
                self.normalize_matrices()
        self._raw_logits: np.ndarray | None = None  # ngpt: the logits before s_z
        self.numerics_root: Numerics = FULL_PRECISION  # what set_numerics installed
        self._head_cache: LinearCache | None = None
        # the loss's cache (an ensemble's stacked model: one per member)
        self._loss_cache: CrossEntropyCache | list[CrossEntropyCache] | None = None
        if flatten:  # parameters and gradients in two flat buffers: one fused optimizer pass
            self.flatten()

    # ---- forward ---------------------------------------------------------------------------
    def _embed(self, idx: np.ndarray) -> np.ndarray:
        """The residual stream's start x_0 (B, T, C): scaled token embeddings plus positions."""
        cfg = self.config
        idx = np.asarray(idx)
        M = self.members
        if idx.ndim != 2 + (M > 0) or (M and idx.shape[0] != M):
            shape = f"(M = {M}, B, T)" if M else "(B, T)"
            raise ValueError(f"idx must be a {shape} array of token ids; got shape {idx.shape}")
        T = idx.shape[-1]
        if not 1 <= T <= cfg.seq_len:
            raise ValueError(f"sequence length T = {T} must be in [1, seq_len = {cfg.seq_len}]")
        if cfg.positions == "rope" and T > len(self._rope[0]):  # positions the tables lack
            rows = min(cfg.seq_len, max(T, 2 * len(self._rope[0])))
            self._rope[:] = rope_tables(rows, cfg.head_dim, cfg.rope_base, cfg.dtype,
                                        inv_freq=self._inv_freq)  # (rows, D/2) x 2
        x = self.wte(idx)  # (B, T, C)
        if cfg.embed_scale != 1.0:
            x = x * x.dtype.type(cfg.embed_scale)  # (B, T, C)
        if cfg.positions == "learned" and M:
            x = x + self.wpe(np.broadcast_to(np.arange(T), (M, T)))[:, None]  # (M, B, T, C)
        elif cfg.positions == "learned":
            x = x + self.wpe(np.arange(T))  # (B, T, C) + (T, C)
        return self.numerics.stream(x, "x")

    def _trunk(self, idx: np.ndarray, stream: list | None = None) -> np.ndarray:
        """Embeddings, blocks, final norm and head: the logits (B, T, V) before any soft-cap;
        ``stream``, when given, receives the residual stream after every block."""
        cfg = self.config
        x = self._embed(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
            if stream is not None:
                stream.append(x)
        x = self.norm_f(x)  # (B, T, C)
        if cfg.tie_embeddings:
            n = self.numerics
            logits, self._head_cache = linear_forward(n.input(x, "head"),
                                                      n.weight(self.wte.params["weight"], "head"))
            self._head_raw = (x, self.wte.params["weight"]) if n.splits("head") else None
            logits = n.output(logits, "head")  # (B, T, V)
        else:
            logits = self.head(x)  # (B, T, V)
        if cfg.placement == "ngpt":
            self._raw_logits, logits = logits, logits * self._sz(logits)
        return logits

    def _sz(self, like: np.ndarray) -> np.ndarray:
        """nGPT's s_z (V,) as it broadcasts against ``like`` (an ensemble's (M, 1, 1, V))."""
        w = self.params["sz"]
        s = w * w.dtype.type(self.sz_scale)
        return s.reshape(s.shape[:1] + (1,) * (like.ndim - 2) + s.shape[1:]) if self.members else s

    def _sz_backward(self, dlogits: np.ndarray) -> np.ndarray:
        """The inverse of the logits' s_z: d sz (times its scale) added, d raw logits returned."""
        raw, self._raw_logits = self._raw_logits, None
        assert raw is not None  # set by forward's _trunk
        if self.members:
            ds = np.stack([ck.reduce_rows(d * r) for d, r in zip(dlogits, raw)])
        else:
            ds = ck.reduce_rows(dlogits * raw)
        self.accumulate("sz", ds * self.sz_scale)
        return dlogits * self._sz(dlogits)

    def matrices(self) -> list[tuple[str, np.ndarray, int]]:
        """nGPT's matrices as ``(name, weight, axis)``: each weight's vectors along ``axis`` (its
        embedding dimension C) are put on the unit sphere (the official ``normalize_matrices``:
        wte and lm_head, query, key, value, c_fc along dim 1, att_c_proj and mlp_c_proj along
        dim 0); the gate of gated attention along C too. Axes count from the end, so that an
        ensemble's member axis does not move them."""
        params = self.parameters()
        out = [("wte.weight", params["wte.weight"], -1)]
        if not self.config.tie_embeddings:
            out.append(("head.weight", params["head.weight"], -1))
        for i in range(self.config.n_layers):
            for name, axis in (("attn.branch.qkv", -1), ("attn.branch.proj", -2),
                               ("attn.branch.gate", -1), ("mlp.branch.fc", -1),
                               ("mlp.branch.proj", -2)):
                key = f"blocks.{i}.{name}.weight"
                if key in params:
                    out.append((key, params[key], axis))
        return out

    def normalize_matrices(self) -> None:
        """nGPT: every matrix of ``matrices`` renormalized in place along its embedding axis
        (``functional.ngpt.normalize_rows_``); an ensemble's stacked model member by member."""
        if self.config.placement != "ngpt":
            raise ValueError(f"normalize_matrices needs placement 'ngpt'; the model's is "
                             f"{self.config.placement!r}")
        for _name, w, axis in self.matrices():
            for part in (w if self.members else (w,)):
                normalize_rows_(part, axis % part.ndim)

    def forward(self, idx: np.ndarray, targets: np.ndarray) -> LossParts:
        """The loss of predicting ``targets`` (B, T) from ``idx`` (B, T); keeps the caches for
        ``backward``. Targets equal to ``normlab.functional.IGNORE_INDEX`` carry no loss."""
        cfg = self.config
        logits = self._trunk(idx)
        if self.members:
            return self._members_loss(logits, targets)  # type: ignore[return-value]
        loss, cache = self.op("cross_entropy_forward")(
            logits, targets, softcap=cfg.final_softcap, z_loss=cfg.z_loss,
            label_smoothing=cfg.label_smoothing,
        )
        self._loss_cache = cache
        log_z = float(np.mean(cache.log_z, dtype=np.float64))
        return LossParts(float(loss), cache.nll, log_z)

    # an ensemble's stacked model (``models.stack``): each member's loss settings (softcap,
    # z_loss, label_smoothing) and the (M, n) buffers holding every parameter and gradient
    member_losses: tuple[dict, ...] = ()
    flat_parameters: np.ndarray | None = None
    flat_gradients: np.ndarray | None = None

    def _members_loss(self, logits: np.ndarray, targets: np.ndarray) -> list[LossParts]:
        """Each member's loss of its targets (M, B, T) from its logits (M, B, T, V), with its
        own soft-cap, z-loss and label smoothing; one cache per member for ``backward``."""
        op, parts, caches = self.op("cross_entropy_forward"), [], []
        for m, options in enumerate(self.member_losses):
            loss, cache = op(logits[m], targets[m], **options)
            caches.append(cache)
            parts.append(LossParts(float(loss), cache.nll,
                                   float(np.mean(cache.log_z, dtype=np.float64))))
        self._loss_cache = caches
        return parts

    def residual_stream(self, idx: np.ndarray) -> list[np.ndarray]:
        """The residual stream after every block on ``idx`` (B, T): L arrays (B, T, C), the
        tensors the ``residual_stats`` probe summarizes (one forward as ``logits``; the caches
        are released)."""
        stream: list[np.ndarray] = []
        self._trunk(idx, stream)
        self.release()
        return stream

    def hidden(self, idx: np.ndarray) -> np.ndarray:
        """The stack's output F(x, W) (B, T, C), the input of the LM head: embeddings, blocks and
        the final norm (the lines of ``_trunk`` before the head)."""
        x = self._embed(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return self.norm_f(x)

    def logits(self, idx: np.ndarray) -> np.ndarray:
        """Next-token logits (B, T, V) for inference, the final soft-cap applied."""
        z = self._trunk(idx)
        cap = self.config.final_softcap
        return z if cap is None else cap * np.tanh(z / z.dtype.type(cap))

    # ---- backward --------------------------------------------------------------------------
    # The model's backward starts from its scalar loss, not from an output gradient as a Module's.
    def backward(self, dloss: Any = 1.0) -> None:
        """Add the gradient of ``dloss * loss`` (``dloss`` is the loss scale under loss scaling)
        into every parameter's buffer; the same lines as ``_trunk`` and ``forward``, upwards. An
        ensemble's stacked model takes one dloss per member (or one for all)."""
        if self._loss_cache is None:
            raise RuntimeError("GPT.backward called before forward(idx, targets)")
        cfg = self.config
        n = self.numerics
        if self.members:  # one dloss per member (its loss scale), one cache per member
            bwd, dl = self.op("cross_entropy_backward"), np.broadcast_to(dloss, self.members)
            dlogits = np.stack([bwd(float(d), c)[0]
                                for d, c in zip(dl, self._loss_cache)])
        else:
            dlogits, _ = self.op("cross_entropy_backward")(dloss, self._loss_cache)  # (B, T, V)
        if cfg.placement == "ngpt":
            dlogits = self._sz_backward(dlogits)
        if cfg.tie_embeddings:
            assert self._head_cache is not None  # set with _loss_cache by forward's _trunk
            g, raw = n.grad(dlogits, "dhead"), getattr(self, "_head_raw", None)
            dx, dW, _ = (linear_backward(g, self._head_cache) if raw is None else
                         operand_backward(n, dlogits, g, self._head_cache, raw, "head"))
            self.wte.accumulate("weight", n.output(dW, "dhead_weight"))
            dx = n.output(dx, "dhead_x")
        else:
            dx = self.head.backward(dlogits)  # (B, T, C)
        dx = self.norm_f.backward(dx)
        for block in reversed(self.blocks):
            dx = block.backward(dx)
        if cfg.positions == "learned":  # (T, C): the table is shared by the batch
            self.wpe.backward(np.stack([d.sum(axis=0) for d in dx]) if self.members
                              else dx.sum(axis=0))
        if cfg.embed_scale != 1.0:
            dx = dx * dx.dtype.type(cfg.embed_scale)  # (B, T, C)
        self.wte.backward(dx)
        self.release()

    def forget(self) -> None:
        """Drop the head's and the loss's saved values with the model's own cache (``release``
        does it for every module below)."""
        super().forget()
        self._head_cache = self._loss_cache = self._raw_logits = None

    # every module's ``forget``, listed at the first release (bound methods, not modules: the
    # list is no child of the model)
    _forgets: tuple[Callable[[], None], ...] | None = None

    def release(self) -> None:
        """``Module.release`` over the modules listed at the first call (a GPT's modules are
        fixed once it is built), so that every step's release does not walk the tree again."""
        if self._forgets is None:
            self._forgets = tuple(m.forget for m in self.modules())
        for forget in self._forgets:
            forget()

    # ---- Admin's profiling ------------------------------------------------------------------
    def profile_admin(self, idx: np.ndarray) -> list[float]:
        """Fill every Admin sublayer's omega from one forward pass over ``idx`` (B, T), as the
        official code's ``adaptive-profiling`` does (Liu et al. 2020): omega_1 = 1, and after
        sublayer i (attention, then MLP, block by block)

            omega_{i+1} = sqrt(Var[omega_i x_{i-1}] + Var[F_i(x_{i-1})])

        (``Residual.profile_omega``), so omega_i^2 = Var[x_0] + sum_{j<i} Var[F_j]. Runs in eval
        mode (no dropout, so no dropout mask is drawn) and keeps no activations. Returns the 2L
        omegas. omega is a parameter afterwards, trained like the norms' gains (the official code
        makes it an ``nn.Parameter``), so profile once, before the first step: the Trainer does.
        """
        if self.config.placement != "admin":
            raise ValueError(f"profile_admin needs placement 'admin'; the model's is "
                             f"{self.config.placement!r}")
        was_training = self.training
        self.eval()
        x, omega, omegas = self._embed(idx), 1.0, []  # (B, T, C)
        for block in self.blocks:
            for sub in (block.attn, block.mlp):
                omegas.append(omega)
                x, omega = sub.profile_omega(x, omega)  # (B, T, C)
        self.release()
        self.train(was_training)
        return omegas

    # ---- helpers ---------------------------------------------------------------------------
    def set_numerics(self, numerics: Numerics) -> None:
        """Install precision hooks in every module that has them, each bound to the module's
        name (``FULL_PRECISION`` undoes it)."""
        if not isinstance(numerics, Numerics):
            raise TypeError(f"numerics must be a Numerics; got {type(numerics).__name__}")
        self.numerics_root = numerics
        for name, m in self.named_modules():
            if hasattr(m, "numerics"):
                m.numerics = numerics.bind(name or "gpt")

    def layer_of(self, name: str) -> int | None:
        """The block index of a dotted parameter name (``blocks.3.attn...`` -> 3), else None."""
        parts = name.split(".")
        return int(parts[1]) if parts[0] == "blocks" else None

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters().values())
