"""The ops' contract: ``x_forward(inputs..., *, options)``. Every parameter of a public forward
that is not an array is keyword-only, but for the few named here (the probability of dropout,
softmax's axis: the op's own argument, as in PyTorch)."""

import importlib
import inspect
import pkgutil

import normlab.functional as F
import normlab.kernels as K

POSITIONAL = {("dropout_forward", "p_drop"), ("softmax_forward", "axis")}
ARRAYS = ("Array", "np.ndarray", "Array | None", "np.ndarray | None", inspect.Parameter.empty)


def _forwards():
    for package in (F, K):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, fn in vars(module).items():
                if (name.endswith("_forward") and not name.startswith("_") and callable(fn)
                        and getattr(fn, "__module__", None) == module.__name__):
                    yield module.__name__, name, fn


def test_every_option_of_a_forward_is_keyword_only():
    found, positional = [], []
    for module, name, fn in _forwards():
        found.append(name)
        for p in inspect.signature(fn).parameters.values():
            if (p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    and p.annotation not in ARRAYS and (name, p.name) not in POSITIONAL):
                positional.append(f"{module}.{name}({p.name})")
    assert {"layer_norm_forward", "rms_norm_forward", "qk_norm_forward", "gelu_forward",
            "add_norm_forward", "attention_forward"} <= set(found)
    assert not positional, positional
