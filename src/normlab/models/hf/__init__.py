"""Read and write checkpoints in the layout of Hugging Face ``transformers``: ``config.json`` plus
``model.safetensors``, or shards listed in ``model.safetensors.index.json``.

Seven families are understood, each a setting of ``GPTConfig`` (the README's "Your model" table):

    gpt2     pre-LN LayerNorm with biases, learned positions, tied head, tanh GELU
    llama    RMSNorm, RoPE (rotate-half; linear / llama3 scaling), SwiGLU, GQA, optional biases
    mistral  llama + a sliding window on every layer
    qwen2    llama + biases on q, k, v only (+ sliding windows on the layers ``layer_types`` says)
    qwen3    llama + per-head RMSNorm QK-norm and a free head width
    gemma2   sandwich RMSNorm with gain (1 + w), GeGLU, embeddings times sqrt(C), tied head,
             scale 1 / sqrt(query_pre_attn_scalar), sliding windows on alternate layers,
             attention soft-cap and final soft-cap
    olmo2    RMSNorm on the branch output (x + N(F(x))), RMSNorm over all of q and k, GQA

The weight layouts differ from normlab's in two ways only: q, k and v (and a gated MLP's gate and
up) are separate tensors that normlab stacks in one projection, and GPT-2's ``Conv1D`` stores
weights transposed (in, out). ``_layout`` lists, for every normlab parameter, the checkpoint
tensors it is made of; loading and saving read that one list in the two directions.

Reading: the files are memory-mapped (private, copy-on-write). A parameter stored in one tensor
of its dtype stays a view of the map, read from disk when first used (GPT-2's transposed
``Conv1D`` weights as a transposed view, which NumPy's matrix products read as they are); the
others are copied into the model's parameters (float16 and bfloat16 converted on
the copy, bfloat16 through ml_dtypes), one tensor at a time, each mapped range released after its
copy, so the peak memory is the copied parameters plus about one tensor.
The header is read and checked in full (``safetensors``: every rule of the format, before a byte
is mapped) rather than by ``safetensors.safe_open``, whose NumPy side neither knows bfloat16 nor
lets a mapped range go; writing uses the ``safetensors`` library.

The package: ``safetensors`` (the format: header rules, memory maps), ``fields`` (config fields
typed and bounded), ``families`` (each family's config, layout and refusals), ``checkpoint``
(``load_hf``, ``save_hf``).

What a family's config says that normlab cannot express is refused with the field's name, and a
tensor in the file that no parameter takes is refused with its name: nothing is dropped silently.
"""

from __future__ import annotations

from .checkpoint import (
    CONFIG_FILE,
    INDEX_FILE,
    WEIGHTS_FILE,
    checkpoint_files,
    load_hf,
    save_hf,
)
from .families import (
    ARCHITECTURES,
    FAMILIES,
    NORM_PARAMETERS,
    config_from_hf,
    family_of,
    from_hf_tensors,
    hf_config,
    to_hf_tensors,
)
from .safetensors import SafetensorsError, read_header

__all__ = [
    "ARCHITECTURES", "CONFIG_FILE", "FAMILIES", "INDEX_FILE", "NORM_PARAMETERS", "WEIGHTS_FILE",
    "SafetensorsError", "checkpoint_files", "config_from_hf", "family_of", "from_hf_tensors",
    "hf_config", "load_hf", "read_header", "save_hf", "to_hf_tensors",
]
