"""The norm registry: one vocabulary for the config, QK-norm and the fused add + norm; every
entry's functional pair checked by finite differences and against its PyTorch twin; the modules
built from entries; names refused by name."""

import numpy as np
import pytest
from test_derf import derf_scales

from normlab import kernels
from normlab import nn as nnl
from normlab.functional import add_norm, attention, norms
from normlab.models import config
from normlab.testing import gradcheck
from normlab.testing.parity import dyt_scales, torch_parity

SCALES = {"dyt": dyt_scales, "derf": derf_scales}


def test_the_vocabularies_are_the_registrys_and_keep_their_strings():
    assert norms.block_names() == config.NORMS == ("layernorm", "rmsnorm", "dyt", "derf",
                                                    "centernorm", "none")
    assert set(norms.qk_names()) == set(attention.QK_NORMS) == {"none", "rmsnorm", "layernorm"}
    assert norms.fused_names() == add_norm.NORMS == ("layer", "rms")
    assert norms.by_fused("rms") is norms.get("rmsnorm")
    assert set(norms.config_fields()) == {"norm_eps", "bias", "norm_partial", "norm_offset",
                                          "dyt_alpha", "derf_alpha", "derf_shift"}


def test_unknown_and_taken_names_are_refused_by_name():
    with pytest.raises(ValueError, match="norm must be one of 'layernorm', 'rmsnorm', 'dyt'"):
        norms.get("groupnorm")
    with pytest.raises(ValueError, match="'layer', 'rms'"):
        norms.by_fused("group")
    with pytest.raises(ValueError, match="norm name 'rmsnorm' is taken"):
        norms.register(norms.get("rmsnorm"))
    with pytest.raises(ValueError, match="norm name 'none' is taken"):
        norms.register(norms.NormEntry("none", np.negative, np.negative, params=()))
    with pytest.raises(TypeError, match="entry must be a NormEntry"):
        norms.register({"name": "x"})
    with pytest.raises(ValueError, match="qk_norm must be one of"):
        config.GPTConfig(qk_norm="dyt")  # DyT is not a QK-norm
    with pytest.raises(ValueError, match="qk_norm must be one of"):
        config.GPTConfig(qk_norm="derf")  # nor is Derf


def _inputs(entry, rng, shape=(3, 4, 8)):
    d = {"x": rng.normal(0.5, 2.0, size=shape)}
    for p in entry.params:  # random, never the ones and zeros they start at
        d[p.name] = rng.normal(0.7, 0.3, size=() if p.scalar else shape[-1])
    return d


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "dyt", "derf", "centernorm"])
def test_every_entry_passes_gradcheck_and_matches_its_twin(name, rng):
    entry = norms.get(name)
    d = _inputs(entry, rng)
    assert gradcheck(entry.forward, entry.backward, d, rng=rng).passed
    report = torch_parity(entry.forward, entry.backward, entry.twin_fn(), d, np.float32, rng,
                          scales=SCALES.get(name))
    assert report.ok, report.failures()
    assert [r.what for r in report.rows] == ["forward", "dx"] + [f"d{p}" for p in
                                                                  entry.param_names]


@pytest.mark.parametrize("name,cls", [("layernorm", nnl.LayerNorm), ("rmsnorm", nnl.RMSNorm),
                                      ("dyt", nnl.DyT), ("derf", nnl.Derf)])
def test_modules_are_built_from_entries(name, cls, rng):
    entry = norms.get(name)
    built = entry.build(6, dtype=np.float64)
    assert type(built) is cls and entry.module_class() is cls
    generic = nnl.Norm(name, 6, dtype=np.float64)
    assert list(generic.params) == list(built.params) == [
        p.name for p in entry.params if p.flag is None or entry.module_options.get(p.flag)]
    for a, b in zip(generic.params.values(), built.params.values(), strict=True):
        np.testing.assert_array_equal(a, b)
    x = rng.normal(size=(2, 3, 6))
    np.testing.assert_array_equal(generic(x), built(x))


def test_module_options_come_from_the_entry():
    m = nnl.RMSNorm(4, offset=1.0, eps=1e-6)
    assert m.options == {"eps": 1e-6, "partial": None, "offset": 1.0} and m.offset == 1.0
    assert np.all(m.params["weight"] == 0.0)  # 1 - offset: Gemma's zero-centred gain
    assert list(nnl.LayerNorm(4, bias=False).params) == ["weight"]
    with pytest.raises(TypeError, match=r"rmsnorm: unknown options \['momentum'\]"):
        nnl.Norm("rmsnorm", 4, momentum=0.1)
    with pytest.raises(ValueError, match="eps"):
        nnl.LayerNorm(4, eps=0.0)
    with pytest.raises(TypeError):
        nnl.LayerNorm(4, 1e-5)  # options are keyword-only


def test_eps_is_keyword_only_in_every_norm_op():
    x, w = np.ones((2, 4)), np.ones(4)
    for fn, args in ((norms.get("layernorm").forward, (x, w, None, 1e-5)),
                     (kernels.layer_norm_forward, (x, w, None, 1e-5)),
                     (norms.get("rmsnorm").forward, (x, w, 1e-5)),
                     (kernels.rms_norm_forward, (x, w, 1e-5)),
                     (add_norm.add_norm_forward, (x, None, w, None, 1e-5)),
                     (kernels.add_norm_forward, (x, None, w, None, 1e-5))):
        with pytest.raises(TypeError):
            fn(*args)


def test_kernel_table_pairs_each_kernel_with_a_reference_in_functional_or_precision():
    for name, op in kernels.OPS.items():
        kernel = kernels.resolve("kernel", name)
        assert kernel.__module__ == f"normlab.kernels.{op.kernel}"
        if op.reference is None:
            with pytest.raises(ValueError, match=f"no reference implementation of '{name}'"):
                kernels.resolve("reference", name)
            continue
        ref = kernels.resolve("reference", name)
        assert ref.__module__.startswith(("normlab.functional.", "normlab.precision.")), name
        assert ref.__name__ == name


def test_the_fused_add_norm_runs_a_registered_norm_through_its_entry():
    """A norm with a fused name is computed by the add + norm through the entry's forward and
    backward (the kernel's own norms aside: another one runs the reference on both paths)."""
    from normlab.functional.layernorm import layer_norm_backward, layer_norm_forward

    calls = []

    def forward(x, weight, bias=None, *, eps=1e-5):
        calls.append("forward")
        return layer_norm_forward(x, weight, bias, eps=eps)

    def backward(dout, cache):
        calls.append("backward")
        return layer_norm_backward(dout, cache)

    entry = norms.NormEntry("counted", forward, backward,
                            params=(norms.Param("weight"), norms.Param("bias", init=0.0)),
                            options={"eps": 1e-5}, fused="counted",
                            row_stats=norms.LAYER_NORM_ROWS)
    rng = np.random.default_rng(3)
    x, res = rng.normal(size=(2, 3, 8)).astype(np.float32), rng.normal(size=(2, 3, 8))
    res = res.astype(np.float32)
    w, b = rng.normal(1.0, 0.3, 8).astype(np.float32), rng.normal(0.0, 0.3, 8).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    opts = dict(eps=1e-5, p_drop=0.25, training=True)
    (y_ln, r_ln), c_ln = add_norm.add_norm_forward(x, res, w, b, norm="layer",
                                                   rng=np.random.default_rng(1), **opts)
    g_ln = add_norm.add_norm_backward((dy, dy), c_ln)
    norms.register(entry)
    try:
        assert "counted" in norms.fused_names()
        for op in (add_norm, kernels):
            calls.clear()
            (y, r), c = op.add_norm_forward(x, res, w, b, norm="counted",
                                            rng=np.random.default_rng(1), **opts)
            grads = op.add_norm_backward((dy, dy), c)
            assert calls == ["forward", "backward"]
            np.testing.assert_array_equal(y, y_ln)
            np.testing.assert_array_equal(r, r_ln)
            for g, g_ref in zip(grads, g_ln):
                np.testing.assert_array_equal(g, g_ref)
    finally:
        norms.unregister("counted")
    with pytest.raises(TypeError, match="'counted': a fused name needs row_stats"):
        norms.register(norms.NormEntry("counted", forward, backward, params=entry.params,
                                       fused="counted"))
    with pytest.raises(ValueError, match="passes weight and bias only"):
        norms.register(norms.NormEntry("counted", forward, backward,
                                       params=(norms.Param("alpha"),), fused="counted",
                                       row_stats=norms.LAYER_NORM_ROWS))
    assert "counted" not in norms.names()
