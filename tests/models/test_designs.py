"""The normalization designs of 2024-26 as choices of the whole stack: each one listed by
``normlab train --help``, trained there for a few steps, and refused by name where a config
cannot hold it. Their ops, modules and models are checked in tests/functional, tests/nn and
tests/models (finite differences, PyTorch), their ensembles in tests/train/test_ensemble.py."""

from __future__ import annotations

import json

import pytest

from normlab.lab.cli import main as cli
from normlab.models import GPTConfig
from normlab.models.hf import families

NGPT = {"placement": "ngpt", "norm": "none", "positions": "rope"}


def _help(capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        cli(["train", "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone


def _option_help(text: str, flag: str) -> str:
    """The help of ``flag`` (its last occurrence: the first ones are the usage lines)."""
    return text.rsplit(flag, 1)[1].split(" --", 1)[0]


@pytest.mark.parametrize("flag,word", [
    ("--norm STR", "derf"), ("--derf-alpha FLOAT", "Derf's"), ("--derf-shift FLOAT", "Derf's"),
    ("--placement STR", "lns"), ("--placement STR", "mixln"),
    ("--mixln-fraction FLOAT", "Mix-LN's"), ("--no-attn-gate", "gated"),
    ("--attn-fn STR", "sigmoid"), ("--attn-sigmoid-bias FLOAT|none", "sigmoid"),
    ("--placement STR", "ngpt"),
])
def test_train_help_lists_each_design(flag, word, capsys):
    assert word in _option_help(_help(capsys), flag).replace(",", " ").split()


@pytest.mark.parametrize("flags,model", [
    (["--norm", "derf", "--derf-alpha", "0.8"], {"norm": "derf", "derf_alpha": 0.8}),
    (["--placement", "lns"], {"placement": "lns"}),
    (["--placement", "mixln", "--mixln-fraction", "0.5"],
     {"placement": "mixln", "mixln_fraction": 0.5}),
    (["--attn-gate"], {"attn_gate": True}),
    (["--attn-fn", "sigmoid"], {"attn_fn": "sigmoid", "attn_sigmoid_bias": None}),
    (["--attn-fn", "sigmoid", "--attn-sigmoid-bias", "-3"],
     {"attn_fn": "sigmoid", "attn_sigmoid_bias": -3.0}),
    (["--placement", "ngpt", "--norm", "none", "--positions", "rope"],
     {"placement": "ngpt", "norm": "none", "positions": "rope"}),
])
def test_normlab_train_runs_each_design(flags, model, tmp_path):
    out = tmp_path / "run.json"
    rc = cli(["train", "--steps", "3", "--depth", "2", "--width", "16", "--heads", "2",
              "--batch", "2", "--seq", "8", "--eval-interval", "3", "--eval-batches", "1",
              "--quiet", "--json", str(out), *flags])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert {k: doc["config"]["model"][k] for k in model} == model
    assert doc["final_val_loss"] < 10.0  # a finite loss: the design trained


@pytest.mark.parametrize("fields,message", [
    ({"derf_alpha": 0.0}, "config: derf_alpha must be a finite number > 0"),
    ({"derf_shift": float("inf")}, "config: derf_shift must be a finite number"),
    ({"placement": "mixln", "mixln_fraction": -0.1}, "config: mixln_fraction must be a finite"),
    ({"attn_fn": "relu"}, "config: attn_fn must be one of"),
    ({"attn_sigmoid_bias": -2.0}, "config: attn_sigmoid_bias applies to attn_fn 'sigmoid'"),
    ({"attn_fn": "sigmoid", "attn_sigmoid_bias": float("-inf")},
     "config: attn_sigmoid_bias must be a finite number"),
    ({"placement": "ngpt"}, r"config: placement 'ngpt' contradicts norm='layernorm' \(ngpt: "
                            r"'none', no norm layers\), positions='learned'"),
    *[({**NGPT, field: value}, f"config: placement 'ngpt' contradicts {field}=")
      for field, value in (("qk_norm", "rmsnorm"), ("attn_softcap", 30.0),
                           ("final_softcap", 30.0), ("attn_scale", 0.5), ("embed_scale", 2.0),
                           ("bias", True), ("n_kv_heads", 1))],
])
def test_bad_design_fields_are_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**fields)


@pytest.mark.parametrize("family,why", [
    ("qwen3_next", "gated attention .normlab's attn_gate., but three layers in four are Gated "
                   "DeltaNet"),
    ("qwen3_5", "gated attention .normlab's attn_gate., but its layer_types mix them"),
])
def test_a_family_with_gated_attention_is_refused_by_name_saying_why(family, why):
    """transformers' families that use gated attention (Qwen3-Next's and Qwen3.5's
    ``attn_output * torch.sigmoid(gate)``) hold it with layers GPTConfig cannot express."""
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(family).to_dict()
    with pytest.raises(ValueError, match=f"{family}: model_type not supported: its "
                                         f"full-attention layers are {why}"):
        families.config_from_hf(config)


def test_sigmoid_attentions_bias_is_minus_log_n_at_the_context_length():
    """arXiv 2410.10781's b = -log n; the official 2048-token configs hold -7.62."""
    assert GPTConfig().sigmoid_bias is None
    assert GPTConfig(attn_fn="sigmoid", seq_len=2048).sigmoid_bias == pytest.approx(-7.62,
                                                                                     abs=5e-3)
    assert GPTConfig(attn_fn="sigmoid", attn_sigmoid_bias=-1.5).sigmoid_bias == -1.5


def test_save_hf_refuses_ngpt_by_name(tmp_path):
    """No transformers family holds nGPT: save_hf says so, for the default and a named family,
    before anything is written."""
    import numpy as np

    from normlab.models import GPT
    from normlab.models.hf import save_hf

    cfg = GPTConfig(vocab_size=11, seq_len=8, n_layers=1, d_model=16, n_heads=2,
                    activation="swiglu", **NGPT)
    model = GPT(cfg, rng=np.random.default_rng(0))
    for family in (None, "llama"):
        with pytest.raises(ValueError, match=r"save_hf: no transformers family holds nGPT "
                                             r"\(placement 'ngpt'"):
            save_hf(model, tmp_path / "out", family=family)
    assert not (tmp_path / "out").exists()
