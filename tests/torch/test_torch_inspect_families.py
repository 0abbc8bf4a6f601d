"""Parity on the seven checkpoint families: ``normlab.torch.inspect`` of the transformers model
and ``normlab inspect`` (``inspect_model``) of the same checkpoint loaded with ``load_hf``
agree statistic for statistic where they measure the same tensor: the loss and the output's
log Z, the residual stream after each sublayer (the attention sublayer's too, sandwich-aware in
Gemma 2 and OLMo 2) and its gradient after each layer, per head the largest attention logit
and the mean entropy, and every weight and weight gradient stored as one tensor in both."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import test_hf as hf  # noqa: E402  (the tiny random checkpoints of tests/models)

from normlab.models import load_hf  # noqa: E402
from normlab.models.hf.families import family_of, hf_name, layout  # noqa: E402
from normlab.models.inspect import inspect_model  # noqa: E402
from normlab.torch import inspect  # noqa: E402

FAMILIES = ["gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "olmo2"]
T = 8


def _close(a: dict, b: dict, name: str, rel: float) -> None:
    assert a["size"] == b["size"] and a["nonfinite"] == b["nonfinite"], name
    for k in ("amax", "rms"):
        assert a[k] == pytest.approx(b[k], rel=rel, abs=1e-30), (name, k, a[k], b[k])
    # the non-zero values counted (a gradient exactly 0 in one sum may be tiny in the other)
    assert abs(sum(a["hist"]["counts"]) - sum(b["hist"]["counts"])) <= 2, name
    # counts, not fractions: a value within float32 rounding of a threshold may flip (2), and a
    # value that is rounding noise (GPT-2's key-bias gradient, 0 in exact arithmetic: exactly 0
    # in one sum, 1e-9 of the tensor's largest in the other) may be counted anywhere
    nz_a = a["size"] - a["zeros"] - a["nonfinite"]
    nz_b = b["size"] - b["zeros"] - b["nonfinite"]
    noise = max(_noise(a), _noise(b)) + abs(nz_a - nz_b)
    for key, fa in a["formats"].items():
        if key == "mxfp8":  # the mxfp8 preset's scale rule here, OCP's floor in normlab inspect
            continue  # (test_torch_inspect.py: test_mxfp8_column_follows_the_preset)
        for what, v in fa.items():
            diff = abs(v * nz_a - b["formats"][key][what] * nz_b)
            assert diff <= 2 + noise + 1e-9, (name, key, what)


def _noise(s: dict) -> int:
    """The values of a statistic's tensor 2^16 and more below its largest (its histogram's
    bins): float32 sums of other orders differ there by more than their size."""
    if not s["amax"] > 0:
        return 0
    top = math.floor(math.log2(s["amax"]))
    lo = s["hist"]["lo"]
    return sum(c for i, c in enumerate(s["hist"]["counts"]) if lo + i < top - 16)


def _measure(name: str, root: Path):
    path = hf._save(name, root)
    model = load_hf(path)
    tokens = np.random.default_rng(3).integers(3, 40, T + 1)
    want = inspect_model(model, tokens, seq_len=T, policies=())
    # Gemma 2's soft-capped attention is the eager one (transformers' sdpa leaves the cap out);
    # the others run scaled_dot_product_attention
    attn = {"attn_implementation": "eager"} if name == "gemma2" else {}
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **attn)
    ids = torch.from_numpy(tokens[None, :-1])
    # normlab's targets are the next tokens of all T positions: transformers' shift_labels
    batch = {"input_ids": ids, "labels": ids, "shift_labels": torch.from_numpy(tokens[None, 1:])}
    return model, theirs, want, inspect(theirs, batch)


@pytest.mark.parametrize("name", FAMILIES)
def test_inspect_parity_on_each_family(name, tmp_path):
    model, theirs, want, got = _measure(name, tmp_path)
    cfg = theirs.config
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert got["output"]["log_z"] == pytest.approx(want["output"]["log_z"], rel=1e-5)
    layers = next(n for n, m in theirs.named_modules() if isinstance(m, torch.nn.ModuleList))
    cap = getattr(cfg, "attn_logit_softcapping", None)
    for i in range(model.config.n_layers):
        ours = f"{layers}.{i}"
        for a, b in ((f"{ours}.attn.stream.x", f"blocks.{i}.attn.stream.x"),
                     (f"{ours}.stream.x", f"blocks.{i}.mlp.stream.x"),
                     (f"{ours}.stream.dx", f"blocks.{i}.mlp.stream.dx")):
            _close(got["tensors"][a], want["tensors"][b], b, rel=1e-5)
        lt, ln = got["layers"][i], want["layers"][i]
        assert lt["residual_rms"] == pytest.approx(ln["residual_rms"], rel=1e-5)
        # normlab's largest logit is before the soft-cap; Gemma 2's eager attention hands the
        # capped logits to its softmax: compare cap tanh(max / cap), the same (tanh rises)
        ml = ln["max_logit"] if not cap else [cap * math.tanh(v / cap) for v in ln["max_logit"]]
        assert lt["max_logit"] == pytest.approx(ml, rel=1e-5, abs=1e-6), i
        assert lt["entropy"] == pytest.approx(ln["entropy"], rel=1e-5, abs=1e-6), i
        assert len(lt["max_logit"]) == cfg.num_attention_heads if name != "gpt2" else True
    family = family_of(model.config)
    params = model.parameters()
    named = dict(theirs.named_parameters())
    compared = 0
    for e in layout(model.config, family):
        stored = hf_name(family, e.parts[0])
        if len(e.parts) != 1 or e.transpose or stored not in named:
            continue
        if not np.array_equal(params[e.ours], named[stored].detach().numpy()):
            continue  # stored another way (a gain's offset): not the same tensor
        for kind, rel in (("weight", 1e-6), ("grad", 1e-4)):
            _close(got["tensors"][f"{kind}:{stored}"], want["tensors"][f"{kind}:{e.ours}"],
                   e.ours, rel)
        compared += 1
    assert compared >= 2 * model.config.n_layers, compared


def test_sandwich_layers_add_the_post_norm_output():
    """In a sandwich layer the stream after attention is the input plus the post-attention
    norm's output, not the attention output; in a Llama layer plus the attention output."""
    from normlab.torch.inspect import _added

    for name, post in (("olmo2", "post_attention_layernorm"), ("gemma2",
                                                               "post_attention_layernorm"),
                       ("llama", "self_attn")):
        cfg, cls = hf._family(name)
        layer = cls(cfg).model.layers[0]
        assert _added(layer)["attn"] is getattr(layer, post), name
