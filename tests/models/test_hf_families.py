"""The family records (issue 23): a new family is one record, and no function compares a
family's name."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")

from normlab.models import GPT, GPTConfig, load_hf, save_hf
from normlab.models.hf import families

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=8, n_heads=2, n_kv_heads=1,
                norm="rmsnorm", positions="rope", activation="swiglu", bias=False)


def test_a_renamed_llama_is_one_record(tmp_path, monkeypatch):
    toy = dataclasses.replace(families.RECORDS["llama"], name="toyllama",
                              architecture="ToyLlamaForCausalLM")
    monkeypatch.setitem(families.RECORDS, "toyllama", toy)
    model = GPT(CFG, rng=np.random.default_rng(0))
    path = save_hf(model, tmp_path / "toy", family="toyllama")
    hf = json.loads((path / "config.json").read_text())
    assert hf["model_type"] == "toyllama" and hf["architectures"] == ["ToyLlamaForCausalLM"]
    llama = save_hf(model, tmp_path / "llama")
    from safetensors.numpy import load_file

    ours, theirs = load_file(path / "model.safetensors"), load_file(llama / "model.safetensors")
    assert sorted(ours) == sorted(theirs)  # the same tensor names and layout
    loaded = load_hf(path)
    assert loaded.config == load_hf(llama).config  # read as llama reads it
    for name, p in model.parameters().items():
        np.testing.assert_array_equal(loaded.parameters()[name], p)
    idx = np.random.default_rng(1).integers(0, 11, (2, 8))
    np.testing.assert_array_equal(loaded.logits(idx), model.logits(idx))


def test_the_records_cover_the_families_in_family_of_order():
    assert set(families.RECORDS) == set(families.FAMILIES)
    assert list(families.RECORDS)[-1] == "llama"  # claims whatever the others leave
    assert families.ARCHITECTURES["qwen3"] == "Qwen3ForCausalLM"


def test_no_function_compares_a_family_name():
    names = set(families.FAMILIES)
    src = Path(families.__file__).parent
    found = []
    for path in sorted(src.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    if isinstance(side, ast.Constant) and side.value in names:
                        found.append(f"{path.name}:{node.lineno}")
    assert not found, found
