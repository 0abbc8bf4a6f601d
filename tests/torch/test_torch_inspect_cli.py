"""normlab inspect --torch on a transformers family normlab's GPT cannot express (Phi-3)."""

import json

import numpy as np
import pytest
import torch

from normlab.lab.cli import main

transformers = pytest.importorskip("transformers")


def test_inspect_torch_on_a_phi3_directory(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.Phi3Config(vocab_size=80, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=64,
                                  pad_token_id=0)
    transformers.Phi3ForCausalLM(cfg).save_pretrained(tmp_path / "phi3")
    np.save(tmp_path / "ids.npy", np.random.default_rng(0).integers(0, 80, 40))
    out = tmp_path / "out"
    rc = main(["inspect", str(tmp_path / "phi3"), "--tokens", str(tmp_path / "ids.npy"),
               "--torch", "--out", str(out), "--policies", "amp_bf16", "fp8_hybrid"])
    assert rc == 0
    res = json.loads((out / "inspect.json").read_text())
    assert res["model"]["config"]["architecture"] == "Phi3ForCausalLM"
    assert len(res["layers"]) == 2 and set(res["policies"]) == {"fp32", "amp_bf16", "fp8_hybrid"}
    assert any(k.endswith("qkv_proj.input") for k in res["tensors"])
    page = (out / "inspect.html").read_text()
    assert "Phi3ForCausalLM" in page or "phi3" in page
    assert "Tensors: precision headroom" in page
