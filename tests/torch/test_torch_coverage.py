"""emulate's coverage by model family (tools/torch_coverage.py builds the tiny models): every op
that computes with a weight or is a matrix product is rounded or named, nothing is left
unnamed (strict=True), and what the coverage calls rounded did run on rounded values, checked
below emulate, at the level of aten's products (forward and backward) and at the modules'
outputs. The table docs/torch.md shows is the one these runs make."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from normlab.torch import emulate

pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("torch_coverage", ROOT / "tools" /
                                              "torch_coverage.py")
TOOL = importlib.util.module_from_spec(spec)
spec.loader.exec_module(TOOL)
FAMILIES = list(TOOL.families())
aten = torch.ops.aten
# aten's products and the positions of their matrix operands (a bias is added unrounded)
PRODUCTS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1), aten.addmm.default: (1, 2),
            aten.baddbmm.default: (1, 2), aten.convolution.default: (0, 1),
            aten.convolution_backward.default: (0, 1, 2), aten._grouped_mm.default: (0, 1),
            aten.mv.default: (0, 1), aten.dot.default: (0, 1)}


# what the backward of a rounded product runs (Linear's closed form: mm; a convolution, a grouped
# product); bmm and baddbmm in a backward are the attention's inside (float32, as normlab's)
BACKWARD = {aten.mm.default, aten.addmm.default, aten.convolution_backward.default,
            aten._grouped_mm.default}


class Attention(TorchFunctionMode):
    """Entered below emulate: sees the scaled_dot_product_attention emulate calls, so that the
    products inside it (its math kernel's q k^T and p v: float32 as normlab's attention) are
    told apart."""

    def __init__(self):
        super().__init__()
        self.inside = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not F.scaled_dot_product_attention:
            return func(*args, **(kwargs or {}))
        self.inside = True
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.inside = False


def on_grid(t: torch.Tensor) -> bool:
    return bool(torch.equal(t, t.to(torch.bfloat16).float()))


class Products(TorchDispatchMode):
    """Every aten product of the pass: (module, phase, whether its operands are bfloat16
    values); the module from the test's own forward hooks."""

    def __init__(self, stack, attention):
        super().__init__()
        self.stack, self.attention, self.seen = stack, attention, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        backward = torch._C._current_graph_task_id() != -1
        if func in PRODUCTS and not self.attention.inside and (func in BACKWARD
                                                               or not backward):
            ops = [args[i] for i in PRODUCTS[func] if isinstance(args[i], torch.Tensor)]
            self.seen.append((self.stack[-1] if self.stack and not backward else None,
                              "backward" if backward else "forward",
                              all(on_grid(t) for t in ops if t.is_floating_point())))
        return out


def _hooks(model, stack, outputs):
    names = {id(m): n for n, m in model.named_modules()}
    weights = (torch.nn.Linear, torch.nn.Conv2d)

    def pre(m, args):
        stack.append(names[id(m)])

    def post(m, args, out):
        stack.pop()
        if isinstance(m, weights) or type(m).__name__ == "Conv1D":
            outputs.append((names[id(m)], on_grid(out)))

    return [h for m in model.modules() for h in (m.register_forward_pre_hook(pre),
                                                  m.register_forward_hook(post))]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_product_is_rounded_or_named(family):
    model, loss_of = TOOL.families()[family]()
    model.train()
    plain = float(loss_of(model).detach())
    stack, outputs = [], []
    handles = _hooks(model, stack, outputs)
    attention = Attention()
    probe = Products(stack, attention)
    with attention, emulate(model, "amp_bf16", strict=True) as em, probe:  # strict: all named
        loss = loss_of(model)
        loss.backward()
    for h in handles:
        h.remove()
    rows = list(em.coverage)
    left = {r["module"] for r in rows if r["status"] == "float32"}
    assert not [r for r in rows if r["status"] == "not emulated"]
    assert any(r["status"] == "rounded" for r in rows)
    off = [(m, phase) for m, phase, ok in probe.seen if not ok and m not in left]
    assert probe.seen and not off, off  # every other product ran on bfloat16 values
    assert any(phase == "backward" for _, phase, _ in probe.seen)
    assert outputs and all(ok for _, ok in outputs), outputs  # y rounded to activations
    assert float(loss) != plain  # the format's rounding changed the result


KINDS = {"GPT-2": {"addmm", "embedding", "scaled_dot_product_attention", "stream"},
         "Llama": {"linear", "embedding", "scaled_dot_product_attention", "stream"},
         "Qwen3": {"linear", "scaled_dot_product_attention"},
         "Mixtral (MoE)": {"linear", "grouped_mm"},
         "Phi-3": {"linear", "scaled_dot_product_attention"},
         "ResNet-style CNN": {"conv2d", "linear"},
         "nn.TransformerEncoder": {"linear", "scaled_dot_product_attention", "stream"}}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_rounds_its_op_kinds(family):
    em = TOOL.run(family)
    rounded = {r["op"] for r in em.coverage if r["status"] == "rounded"}
    assert KINDS[family] <= rounded, (family, rounded)


def test_the_docs_table_is_these_runs():
    """docs/conformance/torch_coverage.txt holds the rows these runs make (the page's table is
    that file's: test_torch_docs_figures.py)."""
    lines = TOOL.OUT.read_text().splitlines()
    assert lines[1:] == TOOL.table(), "run python tools/torch_coverage.py"
