"""Number formats, rounding, scaling, loss scaling, master weights and precision policies.

Everything here runs on a CPU with NumPy: ``quantize`` puts values on a format's grid (as
float32), so a recipe can be tried before it is run on hardware that has the format.

    >>> import numpy as np
    >>> from normlab.precision import quantize
    >>> quantize(np.array([1e5, 464.0, 465.0], np.float32), "float8_e4m3fn")
    array([nan, 448., nan], dtype=float32)
    >>> quantize(np.array([1e5, 465.0], np.float32), "float8_e4m3fn", overflow="saturate")
    array([448., 448.], dtype=float32)
"""

from .formats import FORMATS, FloatFormat, format_table, get_format
from .rounding import OVERFLOWS, ROUNDINGS, cast, quantize, round_to_bfloat16

__all__ = [
    "FORMATS",
    "OVERFLOWS",
    "ROUNDINGS",
    "FloatFormat",
    "cast",
    "format_table",
    "get_format",
    "quantize",
    "round_to_bfloat16",
]
