import numpy as np
import pytest

from normlab.functional import IGNORE_INDEX
from normlab.train import AlgorithmicSource, MarkovSource, TextSource


def test_markov_entropy_rate_matches_a_brute_force_computation():
    src = MarkovSource(vocab_size=3, order=2, alpha=0.7, seed=5)
    V = 3
    # the context chain as a dense 9 x 9 matrix; its stationary law by eigen-decomposition
    M = np.zeros((V * V, V * V))
    for a in range(V):
        for b in range(V):
            for c in range(V):
                M[a * V + b, b * V + c] = src.transitions[a * V + b, c]
    w, vecs = np.linalg.eig(M.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1))])
    pi /= pi.sum()
    np.testing.assert_allclose(src.stationary, pi, atol=1e-13)
    P = src.transitions
    H = -np.sum(pi[:, None] * P * np.log(P))
    assert src.entropy_rate == pytest.approx(H, rel=1e-12)


def test_markov_entropy_is_what_samples_show():
    # the empirical conditional entropy of a long sample approaches the exact rate
    src = MarkovSource(vocab_size=4, order=1, alpha=1.0, seed=1)
    x = src.sample(400, 500, np.random.default_rng(0))
    counts = np.zeros((4, 4))
    np.add.at(counts, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    p = counts / counts.sum(1, keepdims=True)
    H_emp = -np.sum(counts / counts.sum() * np.log(p))
    assert H_emp == pytest.approx(src.entropy_rate, abs=0.01)
    marg = np.bincount(x.ravel(), minlength=4) / x.size
    np.testing.assert_allclose(marg, src.stationary, atol=0.01)  # starts are stationary


def test_entropy_floor_accounts_for_the_short_context_at_the_start():
    src = MarkovSource(vocab_size=5, order=3, alpha=0.5, seed=2)
    H1, H2, H3 = (src.block_entropy(j) for j in (1, 2, 3))
    T = 10
    expected = ((H2 - H1) + (H3 - H2) + (T - 2) * src.entropy_rate) / T
    assert src.entropy_floor(T) == pytest.approx(expected, rel=1e-14)
    assert src.entropy_floor(T) > src.entropy_rate
    first = MarkovSource(vocab_size=5, order=1, alpha=0.5, seed=2)
    assert first.entropy_floor(7) == pytest.approx(first.entropy_rate, rel=1e-14)


def test_markov_batches_are_shifted_seeded_and_validation_is_fixed():
    src = MarkovSource(vocab_size=6, order=2, seed=3)
    x, y = src.train_batch(4, 9, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 9) and x.dtype.kind == "i"
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    x2, _ = src.train_batch(4, 9, np.random.default_rng(0))
    np.testing.assert_array_equal(x, x2)
    a, b = (
        src.val_batches(2, 4, 9),
        MarkovSource(vocab_size=6, order=2, seed=3).val_batches(2, 4, 9),
    )
    for (xa, _ya), (xb, _yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
    # a zero-probability transition never appears
    P = src.transitions
    ctx = x[:, 0] * 6 + x[:, 1]
    assert np.all(P[ctx, x[:, 2]] > 0)


@pytest.mark.parametrize(("V", "order"), [(2, 1), (16, 1), (16, 2), (5, 3), (300, 1)])
def test_the_compiled_markov_walk_draws_the_references_symbols(V, order):
    from normlab.kernels.sampling import markov_walk as compiled
    from normlab.train.data import markov_walk as reference

    src = MarkovSource(vocab_size=V, order=order, alpha=0.3, seed=1)
    rng = np.random.default_rng(7)
    B, steps = 13, 41
    ctx = rng.integers(0, V**order, B)
    u = rng.random((steps, B))
    u[0] = src._cdf[ctx, V // 2]  # uniforms equal to a cumulative probability: '>' is strict
    u[1, :3] = (0.0, 1.0 - 2**-53, 1.0)
    walked = []
    for walk in (reference, compiled):
        out, c = np.full((B, order + steps), -1, np.int64), ctx.copy()
        walk(src._cdf, c, u, out, order)
        walked.append((out, c))
    assert (walked[0][0][:, order:] >= 0).all() and (walked[0][0][:, :order] == -1).all()
    np.testing.assert_array_equal(walked[1][0], walked[0][0])
    np.testing.assert_array_equal(walked[1][1], walked[0][1])  # the last contexts
    # and MarkovSource.sample walks with it: its first `order` symbols unpack the start context
    x = src.sample(B, order + steps, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    start = rng.choice(V**order, size=B, p=src.stationary)
    ref = np.empty((B, order + steps), np.int64)
    for i in range(order):
        ref[:, i] = (start // V ** (order - 1 - i)) % V
    reference(src._cdf, start, rng.random((steps, B)), ref, order)
    np.testing.assert_array_equal(x, ref)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda a: {**a, "cdf": a["cdf"].astype(np.float32)}, "cdf must be an ndarray of float64"),
    (lambda a: {**a, "ctx": a["ctx"].astype(np.float64)}, "ctx must be an ndarray of int64"),
    (lambda a: {**a, "ctx": a["ctx"] + 100}, r"ctx must hold contexts in \[0, 16\)"),
    (lambda a: {**a, "uniforms": a["uniforms"][:, :2]}, r"uniforms must .* \(steps, B = 3\)"),
    (lambda a: {**a, "out": a["out"][:, :4]}, r"out must .* >= order \+ steps = 6"),
    (lambda a: {**a, "order": 0}, "order must be an integer >= 1"),
])
def test_the_compiled_markov_walk_refuses_what_it_cannot_read_by_name(edit, message):
    from normlab.kernels.sampling import markov_walk

    src = MarkovSource(vocab_size=4, order=2, seed=0)
    args = {"cdf": src._cdf, "ctx": np.array([0, 5, 15]), "uniforms": np.full((4, 3), 0.5),
            "out": np.zeros((3, 6), np.int64), "order": 2}
    markov_walk(**args)  # the unedited arguments walk
    with pytest.raises(ValueError, match=message):
        markov_walk(**edit(args))


@pytest.mark.parametrize("task", ["copy", "reverse"])
@pytest.mark.parametrize("T", [8, 9])
def test_algorithmic_tasks_score_only_the_answer(task, T):
    src = AlgorithmicSource(task, vocab_size=7, seed=0)
    x, y = src.train_batch(3, T, np.random.default_rng(1))
    n = T // 2
    s = x[:, :n]
    assert np.all(x[:, n] == src.sep) and np.all(s < src.sep)
    answer = s if task == "copy" else s[:, ::-1]
    np.testing.assert_array_equal(y[:, n:2 * n], answer)
    assert np.all(y[:, :n] == IGNORE_INDEX) and np.all(y[:, 2 * n:] == IGNORE_INDEX)
    assert src.entropy_floor(T) == 0.0


def test_pydoc_text_has_a_fixed_split_and_hash():
    src = TextSource.pydoc()
    assert src.n_chars > 100_000 and 50 < src.vocab_size < 300
    assert len(src.val) == pytest.approx(0.1 * src.n_chars, abs=1)
    x, y = src.train_batch(2, 16, np.random.default_rng(0))
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    v1, v2 = src.val_batches(2, 3, 16), TextSource.pydoc().val_batches(2, 3, 16)
    np.testing.assert_array_equal(v1[1][0], v2[1][0])
    assert src.describe()["sha256"] == TextSource.pydoc().sha256
    assert src.entropy_floor(16) is None


def test_text_file_source(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcab" * 100, encoding="utf-8")
    src = TextSource.from_file(path)
    assert src.vocab_size == 3 and src.chars == ["a", "b", "c"]
    with pytest.raises(ValueError, match="does not exist"):
        TextSource.from_file(tmp_path / "missing.txt")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not UTF-8"):
        TextSource.from_file(tmp_path / "bin")
    with pytest.raises(ValueError, match="fewer than seq_len"):
        src.val_batches(1, 2, 100)


@pytest.mark.parametrize("kw,message", [
    ({"vocab_size": 1}, "vocab_size must be >= 2"),
    ({"order": 0}, "order must be an integer >= 1"),
    ({"alpha": 0.0}, "alpha must be a finite number > 0"),
    ({"vocab_size": 64, "order": 4}, "too many"),
])
def test_markov_bad_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        MarkovSource(**kw)


def test_a_chain_whose_stationary_law_does_not_converge_is_refused_by_name():
    """A chain too peaked to mix in the iteration budget is a bad markov_alpha (a ValueError
    naming the field, which `normlab train` reports as --markov-alpha), not a crash."""
    src = MarkovSource(vocab_size=4, order=1, alpha=0.5, seed=0)
    with pytest.raises(ValueError, match=r"markov_alpha = 0\.5 is too small"):
        src._stationary(max_iter=1)
