"""Gradient checking and comparison helpers, shipped so users can check layers of their own."""

from .compare import assert_close, assert_no_worse_than, errors, format_eps
from .gradcheck import GradcheckReport, InputError, gradcheck, numerical_grad

__all__ = [
    "GradcheckReport",
    "InputError",
    "assert_close",
    "assert_no_worse_than",
    "errors",
    "format_eps",
    "gradcheck",
    "numerical_grad",
]
