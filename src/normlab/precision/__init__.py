"""Number formats, rounding, scaling, loss scaling, master weights and precision policies.

Everything here runs on a CPU with NumPy: ``quantize`` puts values on a format's grid (returned
as float32), so a recipe can be tried before it is run on hardware that has the format.

Modules: ``formats`` (FloatFormat, FORMATS), ``rounding`` (quantize, cast), ``scaling``
(the scaling dialects behind one protocol and their table ``SCALINGS``: per-tensor, delayed,
MX), ``roles`` (a policy's roles as a model applies them: shared by normlab's model and
``normlab.torch``), ``loss_scaling`` (GradScaler's algorithm), ``master`` (weight updates
in low precision), ``matmul`` (emulated matmul), ``policy`` (PrecisionPolicy and presets),
``demos`` (the chapter's demonstrations), ``accumulate`` (sums in a low-precision
accumulator, chunked), ``conformance`` (the golden vectors and the table of other tools).

    >>> import numpy as np
    >>> from normlab.precision import quantize
    >>> quantize(np.array([448.0, 464.0, 465.0], np.float32), "float8_e4m3fn")
    array([448., 448.,  nan], dtype=float32)
    >>> quantize(np.array([465.0, 1e5], np.float32), "float8_e4m3fn", overflow="saturate")
    array([448., 448.], dtype=float32)
"""

from .accumulate import Accumulation, accumulate_sum
from .formats import DIALECTS, FORMATS, FloatFormat, format_table, get_format
from .loss_scaling import DynamicLossScaler, StaticLossScaler, find_nonfinite, has_nonfinite
from .master import METHODS, WeightUpdater, apply_updates
from .matmul import matmul
from .policy import (
    ACCUMULATION_ROLES,
    PRESETS,
    ROLES,
    LossScaling,
    Precision,
    PrecisionPolicy,
    get_policy,
)
from .roles import APPLIED_ROLES, PolicyRoles
from .rounding import OVERFLOWS, ROUNDINGS, cast, quantize, round_to_bfloat16
from .scaling import (
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

__all__ = [
    "ACCUMULATION_ROLES",
    "APPLIED_ROLES",
    "DIALECTS",
    "FORMATS",
    "METHODS",
    "OVERFLOWS",
    "PRESETS",
    "ROLES",
    "ROUNDINGS",
    "SCALINGS",
    "Accumulation",
    "DelayedScaling",
    "DelayedScalingState",
    "DynamicLossScaler",
    "ErrorStats",
    "FloatFormat",
    "LossScaling",
    "MXScaling",
    "MXTensor",
    "PolicyRoles",
    "Precision",
    "PrecisionPolicy",
    "Quantized",
    "ScaledTensor",
    "Scaling",
    "ScalingDialect",
    "ScalingState",
    "StaticLossScaler",
    "TensorScaling",
    "WeightUpdater",
    "accumulate_sum",
    "amax",
    "apply_updates",
    "cast",
    "error_stats",
    "find_nonfinite",
    "format_table",
    "get_format",
    "get_policy",
    "has_nonfinite",
    "matmul",
    "mx_dequantize",
    "mx_quantize",
    "mx_scale",
    "quantize",
    "register_scaling",
    "round_to_bfloat16",
    "scaled_qdq",
    "scaling_from_dict",
    "tensor_scale",
    "unregister_scaling",
]
