"""Read and write checkpoints in the layout of Hugging Face ``transformers``: ``config.json`` plus
``model.safetensors``, or shards listed in ``model.safetensors.index.json``.

The families understood (``FAMILIES``), each a setting of ``GPTConfig`` and one record of
``families.RECORDS`` (docs/models.md has the table):

    gpt2     pre-LN LayerNorm with biases, learned positions, tied head, tanh GELU
    llama    RMSNorm, RoPE (rotate-half; linear / llama3 scaling), SwiGLU, GQA, optional biases
    mistral  llama + a sliding window on every layer
    qwen2    llama + biases on q, k, v only (+ sliding windows on the layers ``layer_types`` says)
    qwen3    llama + per-head RMSNorm QK-norm and a free head width
    gemma2   sandwich RMSNorm with gain (1 + w), GeGLU, embeddings times sqrt(C), tied head,
             scale 1 / sqrt(query_pre_attn_scalar), sliding windows on alternate layers,
             attention soft-cap and final soft-cap
    olmo2    RMSNorm on the branch output (x + N(F(x))), RMSNorm over all of q and k, GQA

Each record states its coverage of ``config.json``: the fields it maps onto ``GPTConfig``, the
fields it ignores with the value normlab assumes of each (``families.Assumed``), and besides these
only bookkeeping keys (``families.BOOKKEEPING``: names, token ids, generation settings). A field
set to a value other than the one assumed is refused, naming the field, its value and the
assumption; a field neither mapped nor listed is refused by name; a family transformers has and
normlab knowingly cannot compute is refused with its reason (``families.REFUSED_FAMILIES``:
Helium, whose RoPE is interleaved). A tensor in the file that no parameter takes is refused with
its name: nothing is dropped silently.

The weight layouts differ from normlab's in two ways only: q, k and v (and a gated MLP's gate and
up) are separate tensors that normlab stacks in one projection, and GPT-2's ``Conv1D`` stores
weights transposed (in, out). ``families.layout`` lists, for every normlab parameter, the
checkpoint tensors it is made of; loading and saving read that one list in the two directions.

Reading: the config's sizes are checked against the memory available first
(``checkpoint.check_memory``, with ``normlab._memory``: a refusal names the field to lower; a
RoPE model is charged for no table of all its positions). The files are memory-mapped (private,
copy-on-write). A parameter stored in one tensor of its dtype stays a view of the map, read from
disk when first used (GPT-2's transposed ``Conv1D`` weights as a transposed view, which NumPy's
matrix products read as they are); the others are copied into the model's parameters (float16
and bfloat16 converted on the copy, bfloat16 through ml_dtypes), one tensor at a time, each
mapped range released after its copy, so the peak memory is the copied parameters plus about one
tensor. The header is read and checked in full (``safetensors``: every rule of the format,
before a byte is mapped) rather than by ``safetensors.safe_open``, whose NumPy side neither knows
bfloat16 nor lets a mapped range go; writing uses the ``safetensors`` library. A loaded model
remembers its family (``GPT.hf_family``), and ``save_hf`` writes it back as that family.

The package: ``safetensors`` (the format: header rules, memory maps), ``fields`` (config fields
typed and bounded), ``families`` (each family's coverage, config, layout and refusals),
``checkpoint`` (``load_hf``, ``save_hf``, the memory check).
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
