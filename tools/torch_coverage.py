"""The coverage table of docs/torch.md: what ``normlab.torch.emulate`` rounds in each model
family, as tiny models built from configs (random weights, no download) report it after one
forward and backward under ``emulate(model, "amp_bf16", strict=True)``: one row per family, op
and status, the modules it ran in and its calls, and what was left and why.

    python tools/torch_coverage.py        # writes docs/conformance/torch_coverage.txt
    python tools/torch_doc_figures.py     # copies its table into docs/torch.md

``tests/torch/test_torch_coverage.py`` builds the same models, checks that every product the
table calls rounded ran on rounded operands (at the level of aten's products, forward and
backward) and that the file and the page hold these rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "conformance" / "torch_coverage.txt"
POLICY = "amp_bf16"
V, T = 96, 12  # vocabulary and tokens of the language models
LM = {"vocab_size": V, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}


class BasicBlock(torch.nn.Module):
    """torchvision's ResNet basic block: conv-BN-ReLU-conv-BN plus the input (a 1x1 conv and
    BN where the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c_out)
        self.conv2 = torch.nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = torch.nn.Sequential(torch.nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                            torch.nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet() -> torch.nn.Module:
    """A two-stage ResNet in torchvision's layout (stem conv, BN, max-pool, basic blocks,
    average pool, fully connected head)."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 16, 2)),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))


def _lm(model: torch.nn.Module) -> tuple[torch.nn.Module, Callable[[torch.nn.Module], Any]]:
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, V, (2, T)))
    return model, lambda m: m(input_ids=ids, labels=ids).loss


def families() -> dict[str, Callable[[], tuple[torch.nn.Module, Callable]]]:
    """Each family's tiny model and its loss, built on demand (seeded)."""
    import transformers as tf

    def seeded(build: Callable[[], Any]) -> Callable[[], Any]:
        def make() -> Any:
            torch.manual_seed(0)
            return build()
        return make

    def cnn() -> tuple[torch.nn.Module, Callable]:
        x, y = torch.randn(2, 3, 16, 16), torch.tensor([1, 7])
        return resnet(), lambda m: F.cross_entropy(m(x), y)

    def encoder() -> tuple[torch.nn.Module, Callable]:
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        x = torch.randn(2, T, 32)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), \
            lambda m: m(x).pow(2).mean()

    return {
        "GPT-2": seeded(lambda: _lm(tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=V, n_layer=2, n_embd=32, n_head=4, n_positions=64, bos_token_id=0,
            eos_token_id=0)))),
        "Llama": seeded(lambda: _lm(tf.LlamaForCausalLM(tf.LlamaConfig(**LM)))),
        "Qwen3": seeded(lambda: _lm(tf.Qwen3ForCausalLM(tf.Qwen3Config(**LM, head_dim=8)))),
        "Mixtral (MoE)": seeded(lambda: _lm(tf.MixtralForCausalLM(tf.MixtralConfig(
            **LM, num_local_experts=4, num_experts_per_tok=2)))),
        "Phi-3": seeded(lambda: _lm(tf.Phi3ForCausalLM(tf.Phi3Config(**LM, pad_token_id=0)))),
        "ResNet-style CNN": seeded(cnn),
        "nn.TransformerEncoder": seeded(encoder),
    }


def run(family: str, policy: Any = POLICY, **kwargs: Any) -> Any:
    """One forward and backward of ``family``'s model under ``emulate(model, policy,
    strict=True, **kwargs)``; returns the emulate object."""
    from normlab.torch import emulate

    model, loss_of = families()[family]()
    model.train()
    with emulate(model, policy, strict=True, **kwargs) as em:
        loss_of(model).backward()
    return em


def rows(family: str, em: Any) -> list[list[str]]:
    """The family's rows: per (op, status) the number of modules, the calls, and the first
    row's left and why."""
    out: dict[tuple[str, str], list[Any]] = {}
    for r in em.coverage:
        key = (r["op"], r["status"])
        if key not in out:
            out[key] = [family, r["op"], r["status"], 0, 0,
                        "; ".join(x for x in (r["left"], r["why"]) if x) or "-"]
        out[key][3] += 1
        out[key][4] += r["calls"]
    return [[str(c) for c in row] for row in out.values()]


def table() -> list[str]:
    lines = ["| family | op | status | modules | calls | left, and why |",
             "|---|---|---|---|---|---|"]
    for family in families():
        for row in rows(family, run(family)):
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return lines


def main() -> int:
    import transformers

    head = (f"# emulate's coverage by model family: python tools/torch_coverage.py (torch "
            f"{torch.__version__}, transformers {transformers.__version__}; policy {POLICY}, "
            f"strict=True, one forward and backward of each tiny model)")
    OUT.write_text("\n".join([head, *table()]) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
