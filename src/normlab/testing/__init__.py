"""Gradient checking and comparison helpers, shipped so users can check layers of their own.

Importing it also registers the PyTorch twins of the norm registry's entries
(``normlab.functional.norms.register_twin``; ``NormEntry.twin_fn`` reads them): each twin is
``normlab.testing.oracles``' function of the same name, which imports torch at its first call.
"""

from collections.abc import Callable
from typing import Any

from ..functional import norms as _norms
from .compare import assert_close, assert_no_worse_than, errors, format_eps
from .gradcheck import GradcheckReport, InputError, gradcheck, numerical_grad


def _oracle(attr: str, module: str = "oracles") -> Callable[..., Any]:
    """``normlab.testing.<module>.<attr>``, imported (with torch) when it is first called."""

    def twin(*args: Any, **kwargs: Any) -> Any:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{module}"), attr)(*args, **kwargs)

    twin.__name__ = twin.__qualname__ = attr
    return twin


# the twins of normlab's norms, registered by the layer that owns them (functional never names it)
for _name, _attr in (("layernorm", "layer_norm"), ("rmsnorm", "rms_norm"), ("dyt", "dyt"),
                     ("derf", "derf")):
    _norms.register_twin(_name, _oracle(_attr))
_norms.register_twin("centernorm", _oracle("center_norm", "center_oracle"))

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
