"""The norm registry: one entry per norm, read by everything that builds or dispatches a norm.

An entry holds what a norm is made of, in one place:

    name        the config's name ("layernorm"), accepted by ``GPTConfig.norm`` and, where the
                entry allows it, by attention's ``qk_norm`` and the fused add + norm's ``norm``
    forward     the functional reference ``forward(x, *params, **options) -> (out, cache)``
    backward    ``backward(dout, cache) -> (dx, *dparams)``, gradients in the order of ``params``
    params      the parameters, in the forward's order, with their shapes and initial values
    options     the forward's keyword options and their defaults (``eps`` and the like)
    module      the ``nn`` module class of a norm defined outside normlab (a test's toy norm);
                None: the class the ``nn`` layer registered for the name (:func:`register_module`)
    twin        the PyTorch twin for its tests, for a norm defined outside normlab; None: the
                twin ``normlab.testing`` registered for the name (:func:`register_twin`)
    config      which ``GPTConfig`` field sets which module option
    kernel      the op name in ``normlab.kernels`` (``layer_norm`` for ``layer_norm_forward`` /
                ``layer_norm_backward``), None where only the reference exists
    fused       the name the fused add + norm knows it by (``add_norm_forward(norm=...)``), or None
    row_stats   with ``fused``: the row statistics its cache holds (``RowStats``), which the fused
                op saves in its own cache, and how the cache is rebuilt from them
    qk          usable as QK-norm: ``forward(x, weight, eps=...)`` with the gain alone

The users, each reading the registry instead of a list of its own: ``models.block.make_norm``
(the blocks and the final norm), ``GPTConfig``'s vocabulary and checks, attention's QK-norm
(``functional.attention``, ``nn.attention``), the fused add + norm
(``functional.add_norm``, ``kernels.add_norm``) and the modules of ``nn.layers``.

Why here, in ``functional/``: two of the users (QK-norm inside ``attention_forward`` and the fused
add + norm) are functional ops, and ``functional`` imports nothing above it, not even by name.
The module class and the PyTorch twin live above it (``nn``, ``testing``), so the layer that owns
them registers them against the entry's name: ``nn.layers`` registers ``LayerNorm``,
``RMSNorm``, ``DyT``, ``Derf`` and the generic ``Norm`` (:func:`register_module`),
``normlab.testing`` the PyTorch twins (:func:`register_twin`); :meth:`NormEntry.module_class`
and :meth:`NormEntry.twin_fn` read what was registered. A norm defined outside normlab (a test's
toy norm) may give its class and twin in the entry itself.

A new norm is its functional forward and backward, one :func:`register` call (an entry), and a
PyTorch twin for its tests; ``nn.Norm`` builds its module from the entry, and the blocks, the
config and QK-norm accept its name. BatchNorm is not an entry: it keeps running statistics and a
training flag, so it does not fit the row-wise ``forward(x, *params, **options)`` contract; its
gain and bias carry the same names (``weight``, ``bias``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _checks as ck
from .centernorm import center_norm_backward, center_norm_forward
from .derf import ALPHA_INIT as DERF_ALPHA_INIT
from .derf import SHIFT_INIT as DERF_SHIFT_INIT
from .derf import derf_backward, derf_forward
from .dyt import ALPHA_INIT, dyt_backward, dyt_forward
from .layernorm import LayerNormCache, layer_norm_backward, layer_norm_forward
from .rmsnorm import RMSNormCache, rms_norm_backward, rms_norm_forward

NONE = "none"  # the identity: no norm (a name in every vocabulary, not an entry)


@dataclass(frozen=True)
class Param:
    """One parameter of a norm: its name, its shape and its initial value.

    ``init`` is a constant, or a function of the module's options (RMSNorm's gain starts at
    ``1 - offset``, DyT's alpha at ``alpha_init``). ``flag`` names the module option that switches
    the parameter on (LayerNorm's ``bias``); None: always present.
    """

    name: str
    scalar: bool = False  # shape () (DyT's alpha) instead of (C,)
    init: float | Callable[[Mapping[str, Any]], float] = 1.0
    flag: str | None = None

    def initial(self, options: Mapping[str, Any]) -> float:
        """The initial value under the module's ``options``."""
        return float(self.init(options) if callable(self.init) else self.init)


@dataclass(frozen=True)
class RowStats:
    """How the fused add + norm keeps a norm's cache: it saves the row statistics and rebuilds
    the norm's input instead of saving it (``functional.add_norm``).

    ``stats(cache) -> (mean, rstd, gain)``: the forward cache's row means (None for a norm without
    them), reciprocal standard deviations (..., 1) and gain (C,), in the compute dtype.
    ``cache(x, mean, rstd, gain, has_bias, param_dtypes)``: the forward's cache again, over the
    rebuilt input ``x``, for the entry's backward.
    """

    stats: Callable[[Any], tuple[Any, Any, Any]]
    cache: Callable[..., Any]


@dataclass(frozen=True)
class NormEntry:
    """A norm: see the module docstring for what each field means."""

    name: str
    forward: Callable[..., Any]
    backward: Callable[..., Any]
    params: tuple[Param, ...]
    options: Mapping[str, Any] = field(default_factory=dict)  # forward keyword options: defaults
    module_options: Mapping[str, Any] = field(default_factory=dict)  # init-only: defaults
    module: type | None = None  # None: the class registered for the name, else the generic one
    twin: Callable[..., Any] | None = None  # None: the twin registered for the name
    config: Mapping[str, str] = field(default_factory=dict)  # module option -> GPTConfig field
    kernel: str | None = None
    fused: str | None = None
    row_stats: RowStats | None = None  # required with ``fused``
    qk: bool = False
    title: str = ""

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def _own_module(self) -> type | None:
        """The entry's own class, else the one registered for its name (None: the generic)."""
        return self.module or _MODULES.get(self.name)

    def module_class(self) -> type:
        """The ``nn`` module class: the entry's own, the one registered for its name, else the
        generic ``Norm`` (registered by ``normlab.nn``, which must have been imported)."""
        cls = self._own_module() or _MODULES.get(GENERIC)
        if cls is None:
            raise LookupError(f"norm {self.name!r}: no nn module class is registered; import "
                              f"normlab.nn (it registers its module classes)")
        return cls

    def twin_fn(self) -> Callable[..., Any]:
        """The PyTorch twin ``twin(x, *params, **options) -> tensor``: the entry's own, else the
        one registered for its name (``normlab.testing`` registers the built-in norms' twins
        when imported; calling one imports torch)."""
        twin = self.twin or _TWINS.get(self.name)
        if twin is None:
            raise LookupError(f"norm {self.name!r} has no PyTorch twin (normlab.testing "
                              f"registers those of normlab's norms when imported)")
        return twin

    def build(self, C: int, *, dtype: Any, **options: Any) -> Any:
        """A module of this norm over a width ``C``: ``cls(C, ...)`` of its own class, or the
        generic ``Norm(entry, C, ...)`` (:meth:`module_class`)."""
        cls = self.module_class()
        if self._own_module() is None:
            return cls(self, C, dtype=dtype, **options)
        return cls(C, dtype=dtype, **options)


GENERIC = ""  # register_module's name for the generic module class (nn.layers.Norm)
_REGISTRY: dict[str, NormEntry] = {}
_MODULES: dict[str, type] = {}  # name (or GENERIC) -> nn module class, registered by nn.layers
_TWINS: dict[str, Callable[..., Any]] = {}  # name -> PyTorch twin, registered by normlab.testing


def register(entry: NormEntry) -> NormEntry:
    """Add ``entry`` under its name (a name already taken, or "none", is refused); returns it."""
    if not isinstance(entry, NormEntry):
        raise TypeError(f"entry must be a NormEntry; got {type(entry).__name__}")
    if entry.name == NONE or entry.name in _REGISTRY:
        raise ValueError(f"norm name {entry.name!r} is taken; registered: {names()}")
    if entry.fused is not None and entry.fused in fused_names():
        raise ValueError(f"fused name {entry.fused!r} is taken; fused: {fused_names()}")
    if entry.fused is not None and not isinstance(entry.row_stats, RowStats):
        raise TypeError(f"norm {entry.name!r}: a fused name needs row_stats (a RowStats)")
    if entry.fused is not None and not set(entry.param_names) <= {"weight", "bias"}:
        raise ValueError(f"norm {entry.name!r}: the fused add + norm passes weight and bias "
                         f"only; its params are {entry.param_names}")
    _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    """Remove the entry ``name`` and what was registered for it (for tests that register a norm
    of their own)."""
    get(name)
    del _REGISTRY[name]
    _MODULES.pop(name, None)
    _TWINS.pop(name, None)


def register_module(name: str, cls: type) -> None:
    """Register ``cls`` as the ``nn`` module class of the entry ``name``, built as ``cls(C,
    dtype=..., **options)`` (``name`` = :data:`GENERIC`: the generic class, built as ``cls(entry,
    C, ...)`` for an entry without a class of its own). ``nn.layers`` calls it for its classes;
    a later call for the same name replaces the class (a module reloaded)."""
    if name != GENERIC:
        get(name)
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a class; got {cls!r}")
    _MODULES[name] = cls


def register_twin(name: str, twin: Callable[..., Any]) -> None:
    """Register ``twin(x, *params, **options) -> tensor`` as the PyTorch twin of the entry
    ``name`` (``normlab.testing`` calls it for normlab's norms); a later call replaces it."""
    get(name)
    if not callable(twin):
        raise TypeError(f"twin must be callable; got {twin!r}")
    _TWINS[name] = twin


def get(name: str) -> NormEntry:
    """The entry ``name``, or a ValueError naming the registered norms."""
    ck.choice(name, "norm", names())
    return _REGISTRY[name]


def names() -> tuple[str, ...]:
    """The registered norms, in registration order (without "none")."""
    return tuple(_REGISTRY)


def block_names() -> tuple[str, ...]:
    """``GPTConfig.norm``'s vocabulary: every registered norm, then "none"."""
    return names() + (NONE,)


def qk_names() -> tuple[str, ...]:
    """``qk_norm``'s vocabulary: "none", then the norms usable as QK-norm."""
    return (NONE,) + tuple(e.name for e in _REGISTRY.values() if e.qk)


def fused_names() -> tuple[str, ...]:
    """``add_norm_forward(norm=...)``'s vocabulary: the fused names ("layer", "rms")."""
    return tuple(e.fused for e in _REGISTRY.values() if e.fused is not None)


def by_fused(name: str) -> NormEntry:
    """The entry the fused add + norm calls ``name`` ("layer" or "rms")."""
    for e in _REGISTRY.values():
        if e.fused == name:
            return e
    raise ValueError(f"norm must be one of {fused_names()}; got {name!r}")


def config_fields() -> tuple[str, ...]:
    """Every ``GPTConfig`` field some entry reads, in first-use order."""
    out: dict[str, None] = {}
    for e in _REGISTRY.values():
        out.update(dict.fromkeys(e.config.values()))
    return tuple(out)


def _one_minus_offset(options: Mapping[str, Any]) -> float:
    """RMSNorm's initial gain: 1 - offset (0 for Gemma's ``(1 + w)``), so offset + w starts at 1."""
    return 1.0 - float(options["offset"])


def _alpha_init(options: Mapping[str, Any]) -> float:
    return float(options["alpha_init"])


def _shift_init(options: Mapping[str, Any]) -> float:
    return float(options["shift_init"])


LAYER_NORM_ROWS = RowStats(
    stats=lambda c: (c.mean, c.rstd, c.weight),
    cache=lambda x, mean, rstd, gain, has_bias, dtypes: LayerNormCache(x, gain, has_bias, mean,
                                                                       rstd, dtypes))
RMS_NORM_ROWS = RowStats(  # the gain is offset + weight; the RMS over every feature (no partial)
    stats=lambda c: (None, c.rstd, c.scale),
    cache=lambda x, mean, rstd, gain, has_bias, dtypes: RMSNormCache(x, gain, rstd, x.shape[-1],
                                                                     dtypes[0]))


register(NormEntry(
    "layernorm", layer_norm_forward, layer_norm_backward,
    params=(Param("weight"), Param("bias", init=0.0, flag="bias")),
    options={"eps": 1e-5}, module_options={"bias": True},
    config={"eps": "norm_eps", "bias": "bias"}, kernel="layer_norm", fused="layer",
    row_stats=LAYER_NORM_ROWS, qk=True,
    title="LayerNorm (Ba et al. 2016)",
))
register(NormEntry(
    "rmsnorm", rms_norm_forward, rms_norm_backward,
    params=(Param("weight", init=_one_minus_offset),),
    options={"eps": 1e-8, "partial": None, "offset": 0.0},
    config={"eps": "norm_eps", "partial": "norm_partial", "offset": "norm_offset"},
    kernel="rms_norm", fused="rms", row_stats=RMS_NORM_ROWS, qk=True,
    title="RMSNorm (Zhang & Sennrich 2019)",
))
register(NormEntry(
    "dyt", dyt_forward, dyt_backward,
    params=(Param("alpha", scalar=True, init=_alpha_init),
            Param("weight"), Param("bias", init=0.0)),
    module_options={"alpha_init": ALPHA_INIT},
    config={"alpha_init": "dyt_alpha"},
    title="Dynamic Tanh (Zhu et al. 2025)",
))
register(NormEntry(  # arXiv 2512.10938; the official code's Dynamic_erf (functional/derf.py)
    "derf", derf_forward, derf_backward,
    params=(Param("alpha", scalar=True, init=_alpha_init),
            Param("shift", scalar=True, init=_shift_init),
            Param("weight"), Param("bias", init=0.0)),
    module_options={"alpha_init": DERF_ALPHA_INIT, "shift_init": DERF_SHIFT_INIT},
    config={"alpha_init": "derf_alpha", "shift_init": "derf_shift"},
    title="Dynamic erf (Chen et al. 2025)",
))

register(NormEntry(  # LayerNorm without its rescaling: the centering's ablation (centernorm.py)
    "centernorm", center_norm_forward, center_norm_backward,
    params=(Param("weight"), Param("bias", init=0.0, flag="bias")),
    module_options={"bias": True}, config={"bias": "bias"},
    title="centering only (LayerNorm without the rescaling)",
))

__all__ = ["GENERIC", "LAYER_NORM_ROWS", "NONE", "RMS_NORM_ROWS", "NormEntry", "Param",
           "RowStats", "block_names", "by_fused", "config_fields", "fused_names", "get", "names",
           "qk_names", "register", "register_module", "register_twin", "unregister"]
