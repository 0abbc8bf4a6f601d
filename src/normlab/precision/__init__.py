"""Number formats, rounding, scaling, loss scaling, master weights and precision policies.

Everything here runs on a CPU with NumPy: ``quantize`` puts values on a format's grid (returned
as float32), so a recipe can be tried before it is run on hardware that has the format.

Modules: ``formats`` (FloatFormat, FORMATS), ``rounding`` (quantize, cast), ``scaling`` (the
scaling dialects behind one protocol and their table ``SCALINGS``: per-tensor, delayed, MX, and
MX's integer elements), ``tiles`` (1D blocks and 2D tiles of a tensor), ``nvfp4`` (NVFP4 as
TransformerEngine and torchao compute it), ``blocks`` (FP8 in 1x128 / 128x128 blocks as
DeepGEMM, TransformerEngine and torchao compute it, per-row FP8), ``hadamard`` (the random
Hadamard transform, and a dialect that applies it before another), ``stochastic`` (the
statistical conformance test of a stochastic rounding), ``blockstats`` (per-block statistics of
any dialect on any array), ``roles`` (a policy's roles as a model applies them: shared by
normlab's model and ``normlab.torch``), ``loss_scaling`` (GradScaler's algorithm), ``master``
(weight updates in low precision), ``matmul`` (emulated matmul), ``policy`` (PrecisionPolicy and
presets), ``demos`` (the chapter's demonstrations), ``accumulate`` (sums in a low-precision
accumulator, chunked), ``conformance`` (the golden vectors and the table of other tools).

    >>> import numpy as np
    >>> from normlab.precision import quantize
    >>> quantize(np.array([448.0, 464.0, 465.0], np.float32), "float8_e4m3fn")
    array([448., 448.,  nan], dtype=float32)
    >>> quantize(np.array([465.0, 1e5], np.float32), "float8_e4m3fn", overflow="saturate")
    array([448., 448.], dtype=float32)
"""

from .accumulate import Accumulation, accumulate_sum, add_to_odd
from .blocks import (
    FP8_BLOCK_DIALECTS,
    BlockTensor,
    FP8BlockScaling,
    FP8RowScaling,
    FP8RowTensor,
    fp8_block_quantize,
    fp8_row_quantize,
)
from .formats import DIALECTS, FORMATS, FloatFormat, format_table, get_format
from .hadamard import TE_SIGNS, HadamardScaling, RotatedTensor, hadamard_matrix, rht, rht_inverse
from .loss_scaling import DynamicLossScaler, StaticLossScaler, find_nonfinite, has_nonfinite
from .master import METHODS, WeightUpdater, apply_updates
from .matmul import matmul
from .nvfp4 import NVFP4_DIALECTS, NVFP4Scaling, nvfp4_quantize
from .policy import (
    ACCUMULATION_ROLES,
    OPERAND_ROLES,
    PRESETS,
    RECIPES,
    ROLES,
    LossScaling,
    Precision,
    PrecisionPolicy,
    get_policy,
    mxfp4_recipe,
    mxfp8_recipe,
    nvfp4_recipe,
)
from .roles import APPLIED_ROLES, PolicyRoles
from .rounding import OVERFLOWS, ROUNDINGS, cast, quantize, round_to_bfloat16
from .scaling import (
    MX_INT_FORMATS,
    MXINT8,
    SCALINGS,
    DelayedScaling,
    DelayedScalingState,
    ErrorStats,
    MXScaling,
    MXTensor,
    Quantized,
    ScaledTensor,
    Scaling,
    ScalingDialect,
    ScalingState,
    TensorScaling,
    amax,
    error_stats,
    mx_dequantize,
    mx_quantize,
    mx_scale,
    register_scaling,
    scaled_qdq,
    scaling_from_dict,
    tensor_scale,
    unregister_scaling,
)
from .stochastic import SRCheck, sr_check
from .tiles import Tiling

__all__ = [
    "ACCUMULATION_ROLES",
    "APPLIED_ROLES",
    "DIALECTS",
    "FORMATS",
    "FP8_BLOCK_DIALECTS",
    "METHODS",
    "MXINT8",
    "MX_INT_FORMATS",
    "NVFP4_DIALECTS",
    "OPERAND_ROLES",
    "OVERFLOWS",
    "PRESETS",
    "RECIPES",
    "ROLES",
    "ROUNDINGS",
    "SCALINGS",
    "TE_SIGNS",
    "Accumulation",
    "BlockTensor",
    "DelayedScaling",
    "DelayedScalingState",
    "DynamicLossScaler",
    "ErrorStats",
    "FP8BlockScaling",
    "FP8RowScaling",
    "FP8RowTensor",
    "FloatFormat",
    "HadamardScaling",
    "LossScaling",
    "MXScaling",
    "MXTensor",
    "NVFP4Scaling",
    "PolicyRoles",
    "Precision",
    "PrecisionPolicy",
    "Quantized",
    "RotatedTensor",
    "SRCheck",
    "ScaledTensor",
    "Scaling",
    "ScalingDialect",
    "ScalingState",
    "StaticLossScaler",
    "TensorScaling",
    "Tiling",
    "WeightUpdater",
    "accumulate_sum",
    "add_to_odd",
    "amax",
    "apply_updates",
    "cast",
    "error_stats",
    "find_nonfinite",
    "format_table",
    "fp8_block_quantize",
    "fp8_row_quantize",
    "get_format",
    "get_policy",
    "hadamard_matrix",
    "has_nonfinite",
    "matmul",
    "mx_dequantize",
    "mx_quantize",
    "mx_scale",
    "mxfp4_recipe",
    "mxfp8_recipe",
    "nvfp4_quantize",
    "nvfp4_recipe",
    "quantize",
    "register_scaling",
    "rht",
    "rht_inverse",
    "round_to_bfloat16",
    "scaled_qdq",
    "scaling_from_dict",
    "sr_check",
    "tensor_scale",
    "unregister_scaling",
]
