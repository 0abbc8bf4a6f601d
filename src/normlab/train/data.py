"""Data that needs no download.

* ``MarkovSource``: a synthetic order-k Markov chain over V symbols whose transition rows are
  Dirichlet(alpha) draws (or, with ``zipf`` s > 0, Dirichlet(alpha V q) draws around a Zipfian
  base measure q_j ~ (j + 1)^-s: many rare symbols, as in a real tokenizer's vocabulary). Its
  exact entropy rate H (nats per token) is the best loss any model can reach;
  ``entropy_floor(T)`` is the best mean loss over a window of T predictions (the first k-1
  predictions see less than k symbols of context, so the floor sits slightly above H).
* ``AlgorithmicSource``: copy or reverse a random string after a separator; only the answer is
  scored, and the answer is determined by the input, so the floor is 0.
* ``TextSource``: characters of a text with a fixed train/validation split: the English prose of
  Python's own ``pydoc_data.topics`` (on every CPython install), or a file of the user's.

Every source hands out ``(x, y)`` pairs of (B, T) integer arrays, y the next tokens of x (targets
equal to ``IGNORE_INDEX`` carry no loss), training batches drawn with the caller's generator and a
fixed list of validation batches.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Protocol

import numpy as np

from .._files import check_input_file
from ..functional import IGNORE_INDEX

MAX_TEXT_BYTES = 256 * 2**20  # the largest text file a TextSource reads (its ids take 8x in memory)

Batch = tuple[np.ndarray, np.ndarray]  # (x, y), each (B, T) integers


class DataSource(Protocol):
    """What the trainer needs from a data source."""

    name: str
    vocab_size: int

    def train_batch(self, B: int, T: int, rng: np.random.Generator) -> Batch: ...

    def val_batches(self, n: int, B: int, T: int) -> list[Batch]: ...

    def entropy_floor(self, T: int) -> float | None: ...

    def describe(self) -> dict: ...


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats along ``axis`` (0 log 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return terms.sum(axis=axis)


def markov_walk(cdf: np.ndarray, ctx: np.ndarray, uniforms: np.ndarray, out: np.ndarray,
                order: int) -> None:
    """Continue B Markov chains: at step t, chain b in context ``ctx[b]`` (a row of ``cdf``, the
    transition table's cumulative rows, (V^order, V)) moves to the symbol its uniform
    ``uniforms[t, b]`` picks by the inverse CDF (the number of the row's entries the uniform
    exceeds), written into ``out[b, order + t]``; ``ctx`` ends as the last contexts. The
    reference of ``normlab.kernels.sampling.markov_walk``, which ``MarkovSource.sample`` runs."""
    n_ctx = cdf.shape[0]
    for t in range(uniforms.shape[0]):
        nxt = (uniforms[t][:, None] > cdf[ctx]).sum(axis=1)  # inverse CDF, (B,)
        out[:, order + t] = nxt
        ctx[:] = (ctx * cdf.shape[1] + nxt) % n_ctx


class MarkovSource:
    """An order-``order`` Markov chain over ``vocab_size`` symbols; ``seed`` fixes the transition
    table (the "language") and the validation batches.

    Attributes: ``transitions`` (V^k, V), row s the next-symbol distribution after the context s
    (the last k symbols read as a base-V number, oldest first); ``stationary`` (V^k,), the
    stationary distribution of contexts; ``entropy_rate`` H in nats per token.

    ``zipf`` = s > 0 draws every row from Dirichlet(alpha V q) with q_j = (j + 1)^-s / sum: the
    same total concentration alpha V as Dirichlet(alpha), but centred on q, so symbol j is drawn
    about q_j of the time (symbol 0 the most frequent); s = 0 is the symmetric Dirichlet(alpha).
    """

    name = "markov"

    def __init__(self, vocab_size: int = 16, order: int = 2, alpha: float = 0.1, seed: int = 0,
                 zipf: float = 0.0):
        for value, what in ((vocab_size, "vocab_size"), (order, "order")):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"markov {what} must be an integer >= 1; got {value!r}")
        if vocab_size < 2:
            raise ValueError(f"markov vocab_size must be >= 2; got {vocab_size}")
        if order * math.log2(vocab_size) > 20:  # compared in logs: never a huge integer
            size = (
                f"{float(vocab_size) ** order:.3g}"
                if order * math.log2(vocab_size) < 1000
                else "too many"
            )
            raise ValueError(
                f"markov vocab_size^order = {vocab_size}^{order} = {size} contexts is too "
                f"many (at most 2^20)"
            )
        if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"markov alpha must be a finite number > 0; got {alpha!r}")
        if not (isinstance(zipf, (int, float)) and math.isfinite(zipf) and zipf >= 0):
            raise ValueError(f"markov zipf must be a finite number >= 0; got {zipf!r}")
        self.vocab_size, self.order, self.alpha, self.seed = (
            int(vocab_size),
            int(order),
            float(alpha),
            seed,
        )
        self.zipf = float(zipf)
        V, k = self.vocab_size, self.order
        rng = np.random.default_rng(seed)
        P = rng.dirichlet(self._concentration(), size=V**k)  # (V^k, V)
        self.transitions = P
        self._cdf = np.cumsum(P, axis=1)
        self._cdf[:, -1] = 1.0
        self.stationary = self._stationary()
        self.entropy_rate = float(self.stationary @ _entropy(P))

    def _concentration(self) -> np.ndarray:
        """(V,) the Dirichlet parameters of every row: alpha each, or alpha V q with Zipf's q."""
        V = self.vocab_size
        if self.zipf == 0:
            return np.full(V, self.alpha)
        q = np.arange(1, V + 1, dtype=np.float64) ** -self.zipf
        return self.alpha * V * q / q.sum()

    def _stationary(self, tol: float = 1e-15, max_iter: int = 200_000) -> np.ndarray:
        """Power iteration of the lazy chain (pi + pi P) / 2: the same fixed point, no periodicity.
        A context (a_1..a_k) moves to (a_2..a_k, b) with probability P[(a_1..a_k), b]."""
        V, k = self.vocab_size, self.order
        P = self.transitions.reshape(V, V ** (k - 1), V)  # [oldest symbol, rest, next]
        pi = np.full(V**k, 1.0 / V**k)
        for _ in range(max_iter):
            step = np.einsum("ar,arb->rb", pi.reshape(V, V ** (k - 1)), P).reshape(-1)
            new = 0.5 * (pi + step)
            new /= new.sum()
            if np.max(np.abs(new - pi)) < tol:
                return new
            pi = new
        raise ValueError(f"markov_alpha = {self.alpha:g} is too small for this chain: its "
                         f"stationary distribution did not converge in {max_iter} iterations "
                         f"(so peaked a chain barely mixes); use a larger markov_alpha")

    def block_entropy(self, j: int) -> float:
        """H(X_1..X_j) under stationarity, for 1 <= j <= order (a marginal of the context law)."""
        V, k = self.vocab_size, self.order
        marginal = self.stationary.reshape(V ** (k - j), V**j).sum(axis=0)
        return float(_entropy(marginal))

    def entropy_floor(self, T: int) -> float:
        """The best achievable mean loss over predictions of x_1..x_T from windows x_0..x_T:
        prediction t sees t + 1 symbols, so for t < k - 1 its floor is
        H(X_{t+1} | X_0..X_t) = H_{t+2} - H_{t+1} (block entropies); from t = k - 1 on it is H."""
        total = 0.0
        for t in range(T):
            if t + 1 >= self.order:
                total += self.entropy_rate
            else:
                total += self.block_entropy(t + 2) - self.block_entropy(t + 1)
        return total / T

    def sample(self, B: int, T: int, rng: np.random.Generator) -> np.ndarray:
        """(B, T) symbols: each row a stretch of the chain started from its stationary law."""
        V, k = self.vocab_size, self.order
        n_ctx = V**k
        ctx = rng.choice(n_ctx, size=B, p=self.stationary)  # (B,) the first k symbols
        out = np.empty((B, max(T, k)), np.int64)
        for i in range(k):  # unpack the base-V context, oldest symbol first
            out[:, i] = (ctx // V ** (k - 1 - i)) % V
        uniforms = rng.random((max(T - k, 0), B))  # in one call: the stream of T - k calls of B
        from ..kernels.sampling import markov_walk as walk  # the same symbols, one loop

        walk(self._cdf, ctx, uniforms, out, k)
        return out[:, :T]

    def train_batch(self, B: int, T: int, rng: np.random.Generator) -> Batch:
        seq = self.sample(B, T + 1, rng)
        return seq[:, :-1], seq[:, 1:]

    def val_batches(self, n: int, B: int, T: int) -> list[Batch]:
        rng = np.random.default_rng([self.seed, 1])  # fixed by the source's seed alone
        return [self.train_batch(B, T, rng) for _ in range(n)]

    def describe(self) -> dict:
        out = {"name": self.name, "vocab_size": self.vocab_size, "order": self.order,
               "alpha": self.alpha, "seed": self.seed, "entropy_rate": self.entropy_rate}
        return out if self.zipf == 0 else {**out, "zipf": self.zipf}


class AlgorithmicSource:
    """``task`` "copy" or "reverse": x = [s_1..s_n, SEP, answer_1..answer_n], the answer s or s
    reversed, n = T // 2 random symbols from the V - 1 non-separator ids (SEP = V - 1). Only the
    answer tokens are targets; the rest are ``IGNORE_INDEX``."""

    def __init__(self, task: str = "copy", vocab_size: int = 16, seed: int = 0):
        if task not in ("copy", "reverse"):
            raise ValueError(f"task must be 'copy' or 'reverse'; got {task!r}")
        if (
            isinstance(vocab_size, bool)
            or not isinstance(vocab_size, (int, np.integer))
            or vocab_size < 3
        ):
            raise ValueError(
                f"{task} vocab_size must be an integer >= 3 (symbols and a separator); "
                f"got {vocab_size!r}"
            )
        self.name, self.task, self.vocab_size, self.seed = task, task, int(vocab_size), seed
        self.sep = self.vocab_size - 1

    def train_batch(self, B: int, T: int, rng: np.random.Generator) -> Batch:
        if T < 2:
            raise ValueError(f"the {self.task} task needs seq_len >= 2; got {T}")
        n = T // 2
        s = rng.integers(0, self.sep, size=(B, n))
        answer = s if self.task == "copy" else s[:, ::-1]
        seq = np.full((B, T + 1), self.sep, np.int64)  # an odd T leaves one trailing SEP
        seq[:, :n] = s
        seq[:, n + 1 : 2 * n + 1] = answer
        x, y = seq[:, :-1], seq[:, 1:].copy()
        scored = np.zeros(T, bool)
        scored[n : 2 * n] = True  # positions that predict the answer
        y[:, ~scored] = IGNORE_INDEX
        return x, y

    def val_batches(self, n: int, B: int, T: int) -> list[Batch]:
        rng = np.random.default_rng([self.seed, 1])
        return [self.train_batch(B, T, rng) for _ in range(n)]

    def entropy_floor(self, T: int) -> float:
        return 0.0  # the answer is a function of the input

    def describe(self) -> dict:
        return {"name": self.name, "vocab_size": self.vocab_size, "seed": self.seed}


class TextSource:
    """Character-level text: the vocabulary is the sorted set of characters, the first
    ``1 - val_fraction`` of the text trains and the rest validates (a fixed split)."""

    def __init__(self, text: str, name: str = "text", val_fraction: float = 0.1):
        if not isinstance(text, str) or len(set(text)) < 2:
            raise ValueError(
                f"{name}: the text must be a string with at least 2 distinct characters"
            )
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1); got {val_fraction!r}")
        self.name = name
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        lookup = {c: i for i, c in enumerate(self.chars)}
        ids = np.fromiter((lookup[c] for c in text), np.int64, count=len(text))
        split = round(len(ids) * (1.0 - val_fraction))
        self.train, self.val = ids[:split], ids[split:]
        self.sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.n_chars = len(text)

    @classmethod
    def pydoc(cls) -> TextSource:
        """Python's ``pydoc_data.topics``: English technical prose (about 465K characters),
        joined in sorted topic order. Its content follows the Python version: ``describe()``
        records the hash."""
        from pydoc_data.topics import topics

        return cls("\n\n".join(topics[k] for k in sorted(topics)), name="pydoc")

    @classmethod
    def from_file(cls, path: str | Path, *, max_bytes: int = MAX_TEXT_BYTES) -> TextSource:
        """The UTF-8 text file at ``path``: an existing regular file of at most ``max_bytes``
        (a directory, FIFO or device, whose reading might never end, is refused unread)."""
        source = check_input_file(path, what="data_path", max_bytes=max_bytes)
        path = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"data_path {str(path)!r} is not UTF-8 text: {exc}") from None
        return cls(text, name=f"file:{path.name}")

    def _windows(self, ids: np.ndarray, starts: np.ndarray, T: int) -> Batch:
        rows = starts[:, None] + np.arange(T + 1)  # (B, T + 1)
        seq = ids[rows]
        return seq[:, :-1], seq[:, 1:]

    def _check(self, ids: np.ndarray, T: int, split: str) -> None:
        if len(ids) < T + 1:
            raise ValueError(
                f"{self.name}: the {split} split has {len(ids)} characters, fewer than "
                f"seq_len + 1 = {T + 1}"
            )

    def train_batch(self, B: int, T: int, rng: np.random.Generator) -> Batch:
        self._check(self.train, T, "train")
        return self._windows(self.train, rng.integers(0, len(self.train) - T, size=B), T)

    def val_batches(self, n: int, B: int, T: int) -> list[Batch]:
        """``n`` batches of windows spread evenly over the validation split (no randomness)."""
        self._check(self.val, T, "validation")
        starts = np.linspace(0, len(self.val) - T - 1, n * B).round().astype(np.int64)
        return [self._windows(self.val, starts[i * B:(i + 1) * B], T) for i in range(n)]

    def entropy_floor(self, T: int) -> None:
        return None  # unknown for natural text

    def describe(self) -> dict:
        return {"name": self.name, "vocab_size": self.vocab_size, "chars": self.n_chars,
                "train_chars": len(self.train), "val_chars": len(self.val), "sha256": self.sha256}
