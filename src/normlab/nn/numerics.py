"""Where a precision policy rounds values inside a model: a small set of named hooks.

Modules keep float32 (or float64) arrays throughout; a low-precision format is emulated by
rounding values onto its grid at these documented points, each tied to a role of
``normlab.precision.PrecisionPolicy``:

    param(w)    a parameter as the forward reads it                   params (the low-precision
                                                                      copy of a master weight)
    weight(w)   a parameter as a matrix multiply reads it             compute(params(w))
    input(x)    a matrix multiply's activation operand (forward)      compute
    output(y)   a matrix multiply's result as the GEMM writes it,     activations
                forward (y) and backward (dx, dW)
    stream(x)   the residual stream, and its gradient                 activations
    grad(g)     a backward matrix multiply's gradient operand dY      gradients

Every hook takes a ``key`` naming the tensor within its module (a module calls ``output`` for
y, dx and dW), so that a scaled format (fp8 delayed scaling) keeps one scale history per tensor.
Saved activations are the rounded values (a Linear saves its rounded input), so the backward sees
what a low-precision forward would have kept. Norms, softmax and the loss compute in float32 on
the rounded values, as autocast's float32 list does.

A policy with GEMM ``operands`` (the ``nvfp4``, ``mxfp8_2d`` and ``fp8_blockwise`` recipes)
rounds ``weight`` as ``fprop.weight``, ``input`` as ``fprop.input`` and ``grad`` as
``dgrad.grad_output``, and its linear layers' backward GEMMs take their own operands
(``splits(key)`` is True there): ``operand(name, x, key, rounded)`` quantizes the
high-precision tensor ``x`` as ``dgrad.weight`` (``params(W)`` along C_out, dx's reduction
axis; the forward's rounded W where the two precisions are one deterministic rounding that a
transpose leaves as it is: 2D tiles) or as ``wgrad.input`` / ``wgrad.grad_output`` (x and dY
flattened to (tokens, channels) and rounded along the token axis, dW's reduction axis, with
zero tokens padded up to a whole block and dropped after: the RHT of the recipe rotates there),
as ``normlab.torch.emulate``'s ``RecipeLinear`` does. Where a site does not split, ``operand``
returns ``rounded`` (the forward's rounded x and W and the dgrad-rounded dY: the backward as it
was), so every policy without operands computes the same bits as before. The modules and
patterns of its ``keep_layers`` (the tied head: ``head``) round as ``policy.kept()`` (the
operands in ``params``' format, unscaled) and do not split.

MX block scaling (the ``mxfp8`` preset) groups 32 values along each tensor's last axis. For the
forward ``x W^T`` and for dY in ``dx = dY W`` that is the contraction axis, as the MX recipe
requires. The backward reuses the forward's row-wise rounded x and W, where a GPU recipe
re-quantizes them column-wise for ``dx = dY W`` and ``dW = dY^T x``: an approximation of the
backward only, which keeps one rounded copy per tensor.

``Numerics`` is full precision (every hook the identity); ``PolicyNumerics`` rounds as a policy
says. ``bind(site)`` gives each module its own view (its own scale histories); ``end_step()``
advances the delayed-scaling histories once per optimizer step. ``numerics_scope(model, n)``
installs ``n`` for a ``with`` block and then reinstalls what the model had (its delayed-scaling
histories included), whether the block returns or raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..precision.policy import OPERAND_ROLES, transposes


class Numerics:
    """Full precision: every hook returns its argument unchanged (no copy)."""

    def bind(self, site: str) -> Numerics:
        """The hooks as seen by the module at ``site`` (a dotted name)."""
        return self

    def param(self, w: np.ndarray, key: str = "param") -> np.ndarray:
        return w

    def weight(self, w: np.ndarray, key: str = "weight") -> np.ndarray:
        return w

    def input(self, x: np.ndarray, key: str = "input") -> np.ndarray:
        return x

    def output(self, y: np.ndarray, key: str = "output") -> np.ndarray:
        return y

    def stream(self, x: np.ndarray, key: str = "stream") -> np.ndarray:
        return x

    def grad(self, g: np.ndarray, key: str = "grad") -> np.ndarray:
        return g

    def splits(self, key: str = "weight") -> bool:
        """Whether the linear layer's backward GEMMs quantize their own operands (``operand``)
        rather than reuse the forward's rounded x and W and the dgrad-rounded dY."""
        return False

    def operand(self, name: str, x: np.ndarray, key: str, rounded: np.ndarray) -> np.ndarray:
        """The backward GEMM operand ``name`` (``dgrad.weight``, ``wgrad.input``,
        ``wgrad.grad_output``) quantized from the high-precision ``x`` (W (C_out, C_in), or
        x (..., C_in) / dY (..., C_out)); ``rounded`` (x's shape): what the backward uses where
        the site does not split. Returns x's shape."""
        return rounded

    def end_step(self) -> None:
        """Called once per optimizer step (delayed scaling advances its amax histories)."""

    def state(self) -> dict:
        """JSON-serializable state for a checkpoint (the delayed-scaling histories)."""
        return {}

    def load_state(self, state: dict) -> None:
        if state:
            raise ValueError("full precision has no numerics state to load")


FULL_PRECISION = Numerics()


class PolicyNumerics(Numerics):
    """The hooks of a ``normlab.precision.PrecisionPolicy`` (a preset name or a policy).

    The roles, their checks and the per-tensor scaling states are
    ``normlab.precision.roles.PolicyRoles`` (shared with ``normlab.torch.emulate``): ``rng`` is
    required when a role rounds stochastically; the ``accumulate`` role must be float32 (the
    model's matrix multiplies accumulate in float32; ``precision.matmul`` emulates lower
    accumulators op by op), and ``communication`` does not apply to one process.
    """

    def __init__(self, policy: Any, *, rng: np.random.Generator | None = None,
                 impl: str = "kernel"):
        from .. import kernels
        from ..precision.roles import PolicyRoles

        # The element rounding: normlab.kernels.quantize (the default, where numba imports) or
        # normlab.precision.quantize; the two return the same bits, stochastic rounding included.
        kernels.check_impl(impl)
        self.quantizer = kernels.quantize if impl == "kernel" and kernels.available() else None
        self.rounding = PolicyRoles(policy, rng=rng)
        self.policy, self.roles, self.rng = self.rounding.policy, self.rounding.roles, rng
        self.kept = self.policy.kept() if self.policy.keep_layers else None

    @property
    def states(self) -> dict[str, Any]:
        """The per-tensor scaling states, by ``"site/key/role"``."""
        return self.rounding.states

    def bind(self, site: str) -> Numerics:
        return _Site(self, site)

    def apply(self, role: str, x: np.ndarray, site: str, key: str,
              precision: Any = None) -> np.ndarray:
        """``x`` in ``role``'s precision (``precision`` instead where given: a GEMM operand's
        or a kept layer's, stateless), float32; the identity for one that does not round."""
        p = self.roles[role] if precision is None else precision
        if not p.rounds:
            return x
        state = self.rounding.state(role, f"{site}/{key}") if precision is None else None
        return p.apply(x, rng=self.rng, state=state, quantizer=self.quantizer).astype(
            x.dtype, copy=False)

    def end_step(self) -> None:
        self.rounding.end_step()

    def state(self) -> dict:
        return self.rounding.state_dict()

    def load_state(self, state: dict) -> None:
        """Restore what :meth:`state` returned, each entry checked first
        (``PolicyRoles.load_state``: a TypeError or ValueError naming it)."""
        self.rounding.load_state(state)


class _Site(Numerics):
    """A module's view of a PolicyNumerics: the hooks, with the module's name in every key."""

    def __init__(self, owner: PolicyNumerics, site: str):
        self.owner, self.site = owner, site

    def bind(self, site: str) -> Numerics:
        return self.owner.bind(site)

    def param(self, w, key="param"):
        return self.owner.apply("params", w, self.site, key)

    def _operand(self, name: str, key: str) -> Any:
        """A GEMM operand's precision where the policy sets operands or keeps this layer, else
        None (the role's)."""
        o = self.owner
        if o.kept is not None and (o.policy.keeps(self.site) or
                                   (key in ("head", "dhead") and o.policy.keeps("head"))):
            return o.kept.operand(name)
        return dict(o.policy.operands).get(name)

    def weight(self, w, key="weight"):
        return self.owner.apply("compute", self.param(w, key), self.site, key,
                                self._operand("fprop.weight", key))

    def input(self, x, key="input"):
        return self.owner.apply("compute", x, self.site, key, self._operand("fprop.input", key))

    def output(self, y, key="output"):
        return self.owner.apply("activations", y, self.site, key)

    def stream(self, x, key="stream"):
        return self.owner.apply("activations", x, self.site, key)

    def grad(self, g, key="grad"):
        return self.owner.apply("gradients", g, self.site, key,
                                self._operand("dgrad.grad_output", key))

    def splits(self, key="weight"):
        o = self.owner
        return bool(o.policy.operands) and not (
            o.kept is not None and (o.policy.keeps(self.site) or
                                    (key in ("head", "dhead") and o.policy.keeps("head"))))

    def operand(self, name, x, key, rounded):
        if name not in BACKWARD_OPERANDS:
            raise ValueError(f"operand: name must be one of {', '.join(BACKWARD_OPERANDS)}; "
                             f"got {name!r}")
        if not self.splits(key):
            return rounded
        pol = self.owner.policy
        p = pol.operand(name)
        if name == "dgrad.weight":
            if transposes(pol.operand("fprop.weight"), p):
                return rounded
            wp = self.param(x, key)  # (C_out, C_in): blocks along C_out
            return np.ascontiguousarray(
                self.owner.apply("compute", np.ascontiguousarray(wp.T), self.site, key, p).T)
        return _along_tokens(lambda t: self.owner.apply(OPERAND_ROLES[name], t, self.site, key,
                                                        p), x, _block(p))


#: The backward GEMMs' operands that ``Numerics.operand`` quantizes.
BACKWARD_OPERANDS = ("dgrad.weight", "wgrad.input", "wgrad.grad_output")


def _block(p: Any) -> int:
    """The block length of a precision's scaling along its axis (1: none), as torch's recipe
    pads the token axis to."""
    s = p.scaling
    inner = getattr(s, "scaling", None) or s
    for attr in ("block", "block_size"):
        if hasattr(inner, attr):
            return int(getattr(inner, attr))
    return 16 if inner is not None and inner.kind == "nvfp4" else 1


def _along_tokens(fn: Any, x: np.ndarray, block: int) -> np.ndarray:
    """``fn`` applied to x (..., C) as (C, tokens): the channels' rows, the tokens along the
    last axis (the blocks' axis), zero tokens padded up to a multiple of ``block`` and dropped
    after. Returns x's shape."""
    C = x.shape[-1]
    x2 = x.reshape(-1, C)
    N = x2.shape[0]
    pad = (-N) % block
    t = np.zeros((C, N + pad), x.dtype)
    t[:, :N] = x2.T
    q = fn(t)
    return np.ascontiguousarray(q[:, :N].T).reshape(x.shape)


@contextmanager
def numerics_scope(model: Any, numerics: Numerics) -> Iterator[Numerics]:
    """Install ``numerics`` in ``model`` (anything with ``set_numerics`` and ``numerics_root``,
    as ``normlab.models.GPT``) for the ``with`` block, then reinstall the numerics it had before,
    also when the block raises. Yields ``numerics``.

        with numerics_scope(model, PolicyNumerics("amp_bf16")):
            loss = model.forward(idx, targets).loss
    """
    if not isinstance(numerics, Numerics):
        raise TypeError(f"numerics must be a Numerics; got {type(numerics).__name__}")
    if not hasattr(model, "set_numerics"):
        raise TypeError(f"model must have set_numerics (a normlab GPT); got "
                        f"{type(model).__name__}")
    previous = getattr(model, "numerics_root", FULL_PRECISION)
    model.set_numerics(numerics)
    try:
        yield numerics
    finally:
        model.set_numerics(previous)


# ---- an ensemble's members -----------------------------------------------------------------------
_ROLES = {"param": ("params",), "weight": ("params", "compute"), "input": ("compute",),
          "output": ("activations",), "stream": ("activations",), "grad": ("gradients",)}


class MemberNumerics(Numerics):
    """The hooks of an ensemble's stacked model (``normlab.models.stack``): member m's own hooks
    (``members[m]``: its policy, its probes' watch) applied to member m's slice ``x[m]`` of every
    tensor, so that each member rounds, scales and draws rounding noise as its model alone would.
    A hook that is the identity for every member costs nothing. Members whose rounding is the
    same element-wise map (policy sites, not watched, of equal roles, none scaled, none
    stochastic) are rounded in one call over their slices together: an element-wise map gives
    each value the bits it has alone, and one call for the group costs what one member's does.
    ``end_step``, state and checkpoints stay each member's own."""

    def __init__(self, members: list[Numerics]):
        if not members or not all(isinstance(m, Numerics) for m in members):
            raise TypeError("members must be a non-empty list of Numerics")
        self.members = list(members)

    def bind(self, site: str) -> Numerics:
        return _MemberSite([m.bind(site) for m in self.members])


def _rounding_class(view: Numerics, hook: str) -> Any:
    """What ``hook`` does at ``view``, as a key that members share exactly when their hooks are
    one element-wise map: ``None`` for the identity, a tuple for a policy site's unscaled,
    deterministic rounding, and the view itself (a class of its own) for anything else."""
    if type(view) is Numerics:
        return None
    if type(view) is not _Site or view.owner.policy.operands or view.owner.kept is not None:
        return view  # watched (each member's own tensor), or operands by site: its own class
    roles = tuple(view.owner.roles[r] for r in _ROLES[hook])
    if not any(p.rounds for p in roles):
        return None
    if any(p.scaling is not None or p.rounding == "stochastic" for p in roles):
        return view
    return (roles, id(view.owner.quantizer))


def _parts(members: list[int]) -> tuple[Any, ...]:
    """Members as indices of the stacked tensor's first axis that select views, never copies:
    a slice for each run of consecutive members, an int for a member alone."""
    parts: list[Any] = []
    lo = prev = members[0]
    for m in [*members[1:], None]:
        if m is not None and m == prev + 1:
            prev = m
            continue
        parts.append(lo if prev == lo else slice(lo, prev + 1))
        if m is not None:
            lo = prev = m
    return tuple(parts)


def _groups(views: list[Numerics], hook: str) -> list[tuple[tuple[Any, ...], Numerics]]:
    """The members that round ``hook`` together: ``(parts, view)`` pairs, the identity members
    left out. ``parts`` (``_parts``) is a member's number where it is alone in its class (its
    hook sees its own tensor), else the slices of the class's runs of consecutive members: each
    a view of the stacked tensor, rounded by one call (an element-wise map gives every value
    the bits it has alone, whatever the call's extent)."""
    classes: dict[Any, list[int]] = {}
    for m, v in enumerate(views):
        c = _rounding_class(v, hook)
        if c is not None:
            classes.setdefault(c if isinstance(c, tuple) else id(c), []).append(m)
    return [(_parts(members), views[members[0]]) for members in classes.values()]


class _MemberSite(Numerics):
    """One module's view of a MemberNumerics: each hook applied once per run of consecutive
    members that round alike (``_groups``), each result written once into the output, the
    identity members' slices copied."""

    def __init__(self, views: list[Numerics]):
        self.views = views
        self.groups = {h: _groups(views, h) for h in _ROLES}
        self.whole = {h: len(g) == 1 and g[0][0] == (slice(0, len(views)),)
                      for h, g in self.groups.items()}
        self.rest: dict[str, tuple[Any, ...]] = {}  # per hook: the identity members' parts
        for h, groups in self.groups.items():
            grouped = {int(m) for parts, _ in groups for index in parts
                       for m in np.arange(len(views))[index].reshape(-1)}
            rest = [m for m in range(len(views)) if m not in grouped]
            self.rest[h] = _parts(rest) if rest else ()

    def _each(self, hook: str, x: np.ndarray, key: str) -> np.ndarray:
        groups = self.groups[hook]
        if not groups:
            return x
        if self.whole[hook]:
            return getattr(groups[0][1], hook)(x, key)
        out = None
        unchanged = list(self.rest[hook])
        for parts, view in groups:
            apply = getattr(view, hook)
            for index in parts:
                part = x[index]  # a view
                y = apply(part, key)
                if y is part:  # a watch that only looked
                    unchanged.append(index)
                    continue
                if out is None:
                    out = np.empty_like(x)
                out[index] = y
        if out is None:
            return x
        for index in unchanged:
            out[index] = x[index]
        return out

    def param(self, w, key="param"):
        return self._each("param", w, key)

    def weight(self, w, key="weight"):
        return self._each("weight", w, key)

    def input(self, x, key="input"):
        return self._each("input", x, key)

    def output(self, y, key="output"):
        return self._each("output", y, key)

    def stream(self, x, key="stream"):
        return self._each("stream", x, key)

    def grad(self, g, key="grad"):
        return self._each("grad", g, key)

    def splits(self, key="weight"):
        return any(v.splits(key) for v in self.views)

    def operand(self, name, x, key, rounded):
        """Member m's operand from its slices ``x[m]`` and ``rounded[m]``."""
        if not self.splits(key):
            return rounded
        out = np.empty_like(rounded)
        for m, v in enumerate(self.views):
            out[m] = v.operand(name, x[m], key, rounded[m])
        return out
