"""Where the two chapters and their sources differ: the chapter's sentence, the source's
statement, and what normlab measured.

Each row names the experiment and the row (by its id in the experiment's claim register, the
first of those given that the report has) whose measurement settles it; the report fills the
measured text and the status from that run's result, so the number shown is the one just
measured, never typed here. A row whose evidence is not a lab
measurement says what normlab does instead (``evidence``).
"""

from __future__ import annotations

from typing import NamedTuple


class Difference(NamedTuple):
    chapter: str  # the chapter and section
    says: str  # the chapter's sentence (quoted, shortened with ...)
    source: str  # what the source says, with the citation
    experiment: str = ""  # the lab experiment that measures it ('' : none)
    check: tuple[str, ...] = ()  # the register ids of the row that settles it (the first the
    #                              report has: a row per width)
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
        "gradients-at-init", ("post-ln-gradient-grows-with-layer",)),
    Difference(
        "chapter 2.4, section 5",
        "\"Zhang and Sennrich reporting speedups on the order of 10-40% for the normalization "
        "computation itself\"",
        "Zhang & Sennrich 2019 report RMSNorm reducing running time by 7%-64% across models "
        "and hardware (of the whole model's step, not the norm alone).",
        "invariances-and-cost", ("rmsnorm-step-faster-than-layernorm",)),
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
    Difference(
        "chapter 2.4, section 2",
        "\"If you stack many residual blocks without any renormalization, the scale of the "
        "running sum can grow roughly with the number of blocks\"",
        "Xiong et al. 2020 (Lemma 2): with Pre-LN E||x_l||^2 grows linearly in l, (1 + l/2) d <= "
        "E||x_l||^2 <= (1 + 3l/2) d, so the norm grows as sqrt(l), not l; without any norm each "
        "branch reads the growing stream and the growth is geometric. Random branches add in "
        "quadrature, not in line.",
        "residual-growth", ("pre-ln-stream-grows-linearly-not-quadratically",)),
    Difference(
        "chapter 2.4, self-check quiz",
        "\"10 x 2 = 20 ... illustrating how the running sum's scale grows roughly with the number "
        "of blocks when nothing renormalizes it\"",
        "20 holds only when the ten contributions point the same way; independent (orthogonal) "
        "contributions of norm 2 add in quadrature, to 2 sqrt(10) = 6.32, and random residual "
        "branches at initialization are close to orthogonal (Xiong et al. 2020, Lemma 2: the "
        "squared norm, not the norm, grows linearly).",
        "residual-growth", ("chapter-orthogonal-sum-adds-in-quadrature",)),
    Difference(
        "chapter 2.4, section 4",
        "\"an essentially unimpeded additive path from input to output, along which gradients can "
        "flow with a magnitude that doesn't depend on network depth the way Post-LN's does\"",
        "Xiong et al. 2020 (Theorem 1, Fig. 3c-d): the reverse. Post-LN's last-layer gradient "
        "does not shrink with depth (about 1.6 at every depth 6..14); Pre-LN's scales as "
        "O(d sqrt(ln d / L)), shrinking as 1/sqrt(L).",
        "gradients-at-init", ("pre-ln-last-layer-gradient-shrinks-with-depth",)),
    Difference(
        "chapter 2.4, section 6",
        "\"In Post-LN, normalization sits directly on that path after every addition, which Xiong "
        "et al. show leads to gradient magnitudes at early layers that scale poorly with depth\"",
        "The interview answer repeats section 4's error: Xiong et al. 2020 (Fig. 3a) find "
        "Post-LN's gradient largest at the layers nearest the output, growing with the layer "
        "index; the early layers' gradients are the small ones.",
        "gradients-at-init", ("post-ln-gradient-grows-with-layer",)),
    Difference(
        "chapter 2.4, sections 4 and 6",
        "\"the normalization applied before every sublayer, on every layer, constrains the range "
        "of functions each sublayer can express slightly more than applying it only once per "
        "block after the residual sum\"",
        "Liu et al. 2020 (Admin) explain Pre-LN's quality cost by its light dependence on the "
        "residual branches: each branch's share of a growing stream shrinks, which limits the "
        "model's potential, while Post-LN's heavy dependence amplifies updates (O(N) against "
        "O(log N) output change). Nothing constrains the functions a sublayer can express.",
        "output-change", ("post-ln-amplifies-more-than-pre-ln",)),
    Difference(
        "chapter 2.4, section 5",
        "\"QK-norm ... normalizes the query and key vectors (typically with RMSNorm) before "
        "computing their dot product inside attention, which bounds the dot product's magnitude "
        "regardless of how large the individual query and key components might otherwise grow\"",
        "With RMSNorm on q and k the logit q.k / sqrt(D) is bounded by sqrt(D) g_q g_k, and the "
        "gains g_q, g_k are learned: the bound moves with them (Henry et al. 2020 learn the scale "
        "outright; Wortsman et al. 2023 see QK-norm lower, not remove, the logit growth).",
        "attention-logit-growth",
        ("qk-norm-logits-10x-below-baseline-d32", "qk-norm-logits-10x-below-baseline-d16",
         "qk-norm-logits-10x-below-baseline-d64")),
    Difference(
        "chapter 2.4, section 4",
        "\"Xiong et al.'s theoretical and empirical analysis shows Pre-LN Transformers ... can be "
        "trained successfully at depths where Post-LN configurations become unstable\"",
        "Xiong et al. 2020 train 6-layer translation models and 12-layer BERT; the depth results "
        "are Liu et al. 2020's (Post-LN 'failed' at 12L-12L and 18L-18L where Pre-LN and Admin "
        "train) and Wang et al. 2022's (DeepNet to 1,000 layers).",
        "norm-placement-depth", ("post-ln-fails-deep",)),
    Difference(
        "chapter 16.1, equation 16.3",
        "\"where $s$ is the row standard deviation\"",
        "The forward divides by sqrt(var + eps) (eq. 16.1), so the backward's s is "
        "sqrt(var + eps), not the standard deviation: without eps the gradient of a row of small "
        "variance is too large, and infinite for a constant row. LayerNorm's Jacobian has norm "
        "1 / sqrt(Var[x] + eps) (Xiong et al. 2020, Lemma 3, with eps).",
        "layernorm-jacobian", ("layernorm-jacobian-norm-closed-form",)),
    Difference(
        "chapter 16.2, Listing 16.3",
        "\"var = x.var(axis=0) ... running_var += (1 - momentum) * var\"",
        "Ioffe & Szegedy 2015 (Algorithm 2) use the unbiased m/(m - 1) Var_B[x] for the inference "
        "statistics, and PyTorch's BatchNorm stores the unbiased variance in running_var; the "
        "listing stores the biased one, (m - 1)/m sigma^2 in expectation.",
        "batchnorm-vs-layernorm", ("biased-batch-variance-and-its-correction",)),
    Difference(
        "chapter 16.3",
        "\"Mixed precision is standard: fp16 needs loss scaling, whereas bf16 often avoids it\"",
        "Micikevicius et al. 2017 need loss scaling for some networks only: the ImageNet CNNs "
        "trained in fp16 to fp32's accuracy without it (ResNet-50 75.92% against 76.04%), Faster "
        "R-CNN ended 0.5 mAP below fp32 without it (68.6 against 69.1), SSD diverged: it is "
        "needed where gradients fall below fp16's range.",
        "precision-recipes", ("fp16-unscaled-natural-gradients",)),
)
