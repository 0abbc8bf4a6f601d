"""The loader's memory check (the fuzz findings of the torch-user review): a config of 10^9
layers is refused naming num_hidden_layers before anything grows with it (it ended in a bare
MemoryError), and a RoPE model is charged for no table of all its positions (10^9 positions were
refused as "needs 64 GB"): its cos and sin tables hold at most ``gpt.ROPE_ROWS`` positions and
grow as longer sequences come, to the same values. A learned position table is real, and
charged. The fuzzed loads run in a child process under an address-space limit, so that a
regression fails there instead of taking the machine's memory."""

from __future__ import annotations

import dataclasses
import json
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("safetensors")

from normlab.models import GPT, GPTConfig, load_hf, save_hf
from normlab.models import gpt as gpt_module
from normlab.models.hf import checkpoint
from normlab.train.budget import count_parameters  # re-exported from normlab._memory

ROPE = GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=16, n_heads=2, norm="rmsnorm",
                 positions="rope", activation="swiglu", bias=False)
LIMIT = 3 * 2**30  # the child's address space: far below what a regression would allocate


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _child(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter limited to ``LIMIT`` bytes of address space; its
    standard output (it must exit 0)."""
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                         capture_output=True, text=True, preexec_fn=_limited, timeout=300,
                         env={**__import__("os").environ, **env})
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def _checkpoint(tmp_path, config: GPTConfig = ROPE, **edit):
    model = GPT(config, rng=np.random.default_rng(0))
    path = save_hf(model, tmp_path / "ck")
    hf = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**hf, **edit}))
    return model, path


def test_a_billion_layers_are_refused_by_name_before_allocating(tmp_path):
    _, path = _checkpoint(tmp_path, num_hidden_layers=10**9)
    out = _child("""
        import sys
        from normlab.models import load_hf
        try:
            load_hf(sys.argv[1])
        except ValueError as e:
            print(type(e).__name__, e.field, e)
        """, str(path))
    assert out.startswith("MemoryBudgetError num_hidden_layers llama: num_hidden_layers = "
                          "1000000000: the model needs about"), out
    assert "; lower num_hidden_layers" in out


def test_a_rope_model_of_a_billion_positions_loads_without_a_table_of_them(tmp_path):
    model, path = _checkpoint(tmp_path, max_position_embeddings=10**9)
    idx = np.random.default_rng(1).integers(0, 11, (2, 8))
    np.save(tmp_path / "idx.npy", idx)
    out = _child("""
        import sys
        import numpy as np
        from normlab.models import load_hf
        model = load_hf(sys.argv[1])
        rows = model.blocks[0].attn.branch.rope[0].shape[0]
        np.save(sys.argv[2], model.logits(np.load(sys.argv[3])))
        print(model.config.seq_len, rows)
        """, str(path), str(tmp_path / "logits.npy"), str(tmp_path / "idx.npy"))
    assert out.split() == ["1000000000", str(gpt_module.ROPE_ROWS)]
    np.testing.assert_array_equal(np.load(tmp_path / "logits.npy"), model.logits(idx))


def test_a_learned_position_table_is_charged_and_named():
    """GPT-2's n_positions is a table of that many rows: 10^9 of them are refused by name; the
    same positions cost a RoPE model only its tables of at most ROPE_ROWS rows."""
    from normlab._memory import MemoryBudgetError

    gpt2 = GPTConfig(vocab_size=11, seq_len=10**9, n_layers=2, d_model=16, n_heads=2, bias=True)
    with pytest.raises(MemoryBudgetError, match=r"gpt2: n_positions = 1000000000: the model "
                                                r"needs about 64.0 GB of memory, more than the "
                                                r"16.0 GB available; lower n_positions") as info:
        checkpoint.check_memory(gpt2, "gpt2", available=16 * 10**9)
    assert info.value.field == "n_positions"
    rope = dataclasses.replace(ROPE, seq_len=10**9)
    need = checkpoint.check_memory(rope, "llama", available=10**7)  # 10 MB is plenty
    small = checkpoint.model_bytes(dataclasses.replace(ROPE, seq_len=gpt_module.ROPE_ROWS))
    assert need == small < 10**6


@pytest.mark.parametrize("field,key", [("d_model", "hidden_size"), ("d_ff", "intermediate_size"),
                                       ("vocab_size", "vocab_size"),
                                       ("n_layers", "num_hidden_layers")])
def test_the_refusal_names_the_size_that_does_not_fit(field, key):
    from normlab._memory import MemoryBudgetError

    cfg = dataclasses.replace(ROPE, **{field: 2**20 if field != "n_layers" else 10**7})
    with pytest.raises(MemoryBudgetError, match=f"llama: {key} = ") as info:
        checkpoint.check_memory(cfg, "llama", available=10**8)
    assert info.value.field == key


def test_rope_tables_grow_to_the_values_built_at_once(monkeypatch):
    """A model built with tables of 4 positions (ROPE_ROWS patched) computes, at T = 10 and
    back at T = 3, the logits and gradients of one built with all 16 at once, bit for bit."""
    cfg = dataclasses.replace(ROPE, seq_len=16, dtype="float64")
    whole = GPT(cfg, rng=np.random.default_rng(0))
    monkeypatch.setattr(gpt_module, "ROPE_ROWS", 4)
    grown = GPT(cfg, rng=np.random.default_rng(0))
    tables = grown.blocks[1].attn.branch.rope
    assert tables[0].shape == (4, 4)
    rng = np.random.default_rng(2)
    for T in (3, 10, 3):
        idx = rng.integers(0, 11, (2, T))
        for m in (whole, grown):
            m.zero_grad()
            m.forward(idx, idx)
            m.backward(1.0)
        np.testing.assert_array_equal(grown.logits(idx), whole.logits(idx))
        for k, g in whole.gradients().items():
            np.testing.assert_array_equal(grown.gradients()[k], g, err_msg=k)
    assert tables[0].shape == (10, 4)  # grown to T = 10 in place, shared by every block
    assert all(b.attn.branch.rope is tables for b in grown.blocks)


@pytest.mark.parametrize("kw", [
    dict(n_kv_heads=1),  # grouped-query attention: fewer k and v rows
    dict(d_head=32),  # heads wider than d_model / n_heads: H D = 64 > C = 16
    dict(d_head=32, n_kv_heads=1, qk_norm="rmsnorm", qk_norm_scope="all", bias=True),
    dict(activation="geglu", d_ff=40),  # gated: two input projections, as SwiGLU
])
def test_the_parameter_count_bounds_every_head_layout(kw):
    """count_parameters (the loader's and the training budget's) bounds the built model from
    above, within 30%: the q, k, v and output projections counted from H, K and D (4 C^2
    under-counted wide heads and GeGLU)."""
    cfg = GPTConfig(**{**dict(vocab_size=11, seq_len=8, n_layers=2, d_model=16, n_heads=2,
                              norm="rmsnorm", positions="rope", activation="swiglu"), **kw})
    exact = GPT(cfg, rng=np.random.default_rng(0)).num_parameters()
    assert exact <= count_parameters(cfg) <= 1.3 * exact


def test_the_train_budget_reads_the_same_helpers():
    from normlab import _memory
    from normlab.train import budget

    for name in ("MemoryBudgetError", "available_memory", "count_parameters", "format_bytes"):
        assert getattr(budget, name) is getattr(_memory, name), name


def test_load_hf_still_loads_what_fits(tmp_path):
    model, path = _checkpoint(tmp_path)
    loaded = load_hf(path)
    idx = np.random.default_rng(3).integers(0, 11, (1, 8))
    np.testing.assert_array_equal(loaded.logits(idx), model.logits(idx))
