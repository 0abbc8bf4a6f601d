"""Where the two chapters and their sources differ: the chapter's sentence, the source's
statement, and what normlab measured.

Each row names the experiment and the check (by the start of its claim) whose measurement
settles it; the report fills the measured text and the status from that run's result, so the
number shown is the one just measured, never typed here. A row whose evidence is not a lab
measurement says what normlab does instead (``evidence``).
"""

from __future__ import annotations

from typing import NamedTuple


class Difference(NamedTuple):
    chapter: str  # the chapter and section
    says: str  # the chapter's sentence (quoted, shortened with ...)
    source: str  # what the source says, with the citation
    experiment: str = ""  # the lab experiment that measures it ('' : none)
    check: str = ""  # the start of the claim of the check that settles it
    evidence: str = ""  # what normlab shows where no check does


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "chapter 2.4, section 4",
        "\"in the Post-LN configuration, the expected magnitude of gradients at the layers "
        "nearest the input grows or is otherwise poorly controlled as the number of layers "
        "increases\"",
        "Xiong et al. 2020 (Theorem 1, Fig. 3): at initialization Post-LN's gradient is largest "
        "at the layers nearest the output and its last layer's gradient does not shrink with "
        "depth; Pre-LN's shrinks as 1/sqrt(L) and is about the same at every layer.",
        "gradients-at-init", "Post-LN's gradient grows with the layer index"),
    Difference(
        "chapter 2.4, section 5",
        "\"Zhang and Sennrich reporting speedups on the order of 10-40% for the normalization "
        "computation itself\"",
        "Zhang & Sennrich 2019 report RMSNorm reducing running time by 7%-64% across models "
        "and hardware (of the whole model's step, not the norm alone).",
        "invariances-and-cost", "RMSNorm is faster than LayerNorm"),
    Difference(
        "chapter 2.4, section 5",
        "\"QK-norm, used in models like Gemma 2, normalizes the query and key vectors\"",
        "Gemma Team 2024 (Gemma 2) caps the attention logits with a soft-cap of 50 and the final "
        "logits at 30; it has no QK-norm. QK-norm (RMSNorm on q and k) replaced the soft-cap in "
        "Gemma 3 (Gemma Team 2025); QK-norm itself is from Henry et al. 2020 and ViT-22B "
        "(Dehghani et al. 2023).",
        evidence="normlab's gemma2 family (normlab.models.load_hf) loads Gemma 2 checkpoints "
                 "with attention soft-cap 50 and final soft-cap 30 and no QK-norm, and is checked "
                 "against transformers' Gemma 2 in tests/models/test_hf.py."),
    Difference(
        "chapter 2.4, section 2",
        "\"Ioffe and Szegedy ... described this phenomenon as 'internal covariate shift' ... "
        "which slows learning\" (stated as the reason normalization helps)",
        "Santurkar et al. 2018 show BatchNorm still helps when noise that shifts each layer's "
        "input statistics is injected after it, and that it smooths the loss landscape: the "
        "internal-covariate-shift explanation is contested.",
        evidence="the lab's internal-covariate-shift experiment, where present, measures both "
                 "explanations."),
)
