import numpy as np
import pytest
import torch
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional import batch_norm_backward, batch_norm_forward
from normlab.testing import gradcheck, oracles


def _inputs(rng, shape):
    C = shape[-1]
    return {"x": rng.normal(0.5, 2.0, size=shape), "weight": rng.normal(size=C),
            "bias": rng.normal(size=C), "running_mean": rng.normal(size=C),
            "running_var": rng.uniform(0.5, 2.0, size=C)}


def _op(training, mask=None, momentum=0.1):
    def forward(x, weight, bias, running_mean, running_var):
        out, cache, _, _ = batch_norm_forward(x, weight, bias, running_mean, running_var,
                                              training=training, mask=mask, momentum=momentum)
        return out, cache

    def backward(dout, cache):
        return batch_norm_backward(dout, cache) + (None, None)

    return forward, backward


def _torch(training):
    def f(x, weight, bias, running_mean, running_var):
        return oracles.batch_norm(x, weight, bias, running_mean.detach().clone(),
                                  running_var.detach().clone(), training=training)
    return f


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(6, 3), (2, 4, 5)])
def test_gradcheck(rng, shape, training):
    fwd, bwd = _op(training)
    report = gradcheck(fwd, bwd, _inputs(rng, shape), rng=rng)
    assert report.passed, str(report)


def test_gradcheck_masked(rng):
    mask = rng.random((3, 5)) > 0.4
    fwd, bwd = _op(True, mask)
    # Padded outputs are don't-care: they carry no gradient, so the check's loss ignores them.
    masked_fwd = lambda *a: (fwd(*a)[0] * mask[..., None], fwd(*a)[1])  # noqa: E731
    report = gradcheck(masked_fwd, bwd, _inputs(rng, (3, 5, 4)), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [s for s in SHAPES if s[0] > 1])
def test_matches_torch(rng, shape, dtype, training):
    fwd, bwd = _op(training)
    check_against_torch(fwd, bwd, _torch(training), _inputs(rng, shape), DTYPES[dtype], rng)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_running_statistics_match_torch(rng, dtype):
    dt = DTYPES[dtype]
    C = 6
    rm, rv = np.zeros(C, dt), np.ones(C, dt)
    trm, trv = oracles.to_torch(rm), oracles.to_torch(rv)  # torch updates these in place
    g, b = rng.normal(size=C).astype(dt), rng.normal(size=C).astype(dt)
    for step in range(5):
        x = rng.normal(step, 1 + step, size=(4, 7, C)).astype(dt)
        out, _, rm, rv = batch_norm_forward(x, g, b, rm, rv, training=True, momentum=0.1)
        oracles.batch_norm(oracles.to_torch(x), oracles.to_torch(g), oracles.to_torch(b), trm, trv,
                           training=True, momentum=0.1)
        np.testing.assert_allclose(rm, trm.numpy(), rtol=50 * np.finfo(dt).eps, atol=1e-12)
        np.testing.assert_allclose(rv, trv.numpy(), rtol=50 * np.finfo(dt).eps)
    # eval uses the running statistics, exactly as torch does
    x = rng.normal(size=(5, C)).astype(dt)
    out, _, rm2, rv2 = batch_norm_forward(x, g, b, rm, rv, training=False)
    assert rm2 is rm and rv2 is rv
    t_out = oracles.batch_norm(oracles.to_torch(x), oracles.to_torch(g), oracles.to_torch(b),
                               trm, trv, training=False)
    np.testing.assert_allclose(out, t_out.numpy(), rtol=50 * np.finfo(dt).eps, atol=1e-6)


def test_cumulative_average_matches_torch_momentum_none(rng):
    C = 4
    bn = torch.nn.BatchNorm1d(C, momentum=None, dtype=torch.float64)
    rm, rv = np.zeros(C), np.ones(C)
    g, b = np.ones(C), np.zeros(C)
    for step in range(6):
        x = rng.normal(step, 2.0, size=(9, C))
        bn(torch.from_numpy(x))
        _, _, rm, rv = batch_norm_forward(x, g, b, rm, rv, training=True, momentum=None,
                                          num_batches_tracked=step)
    np.testing.assert_allclose(rm, bn.running_mean.numpy(), rtol=1e-13)
    np.testing.assert_allclose(rv, bn.running_var.numpy(), rtol=1e-13)


def test_textbook_momentum_is_one_minus_torch_momentum(rng):
    # The chapter's running = m * running + (1 - m) * batch with m = 0.9 (and the unbiased var).
    x = rng.normal(size=(8, 3))
    rm, rv = rng.normal(size=3), rng.uniform(1, 2, size=3)
    _, _, new_m, new_v = batch_norm_forward(x, np.ones(3), np.zeros(3), rm, rv, training=True,
                                            momentum=0.1)
    np.testing.assert_allclose(new_m, 0.9 * rm + 0.1 * x.mean(0), rtol=1e-14)
    np.testing.assert_allclose(new_v, 0.9 * rv + 0.1 * x.var(0, ddof=1), rtol=1e-14)


def test_callers_arrays_are_never_mutated(rng):
    d = _inputs(rng, (5, 3))
    before = {k: v.copy() for k, v in d.items()}
    batch_norm_forward(**d, training=True)
    for k in d:
        assert np.array_equal(d[k], before[k]), k


def test_masked_equals_batchnorm_on_the_unpadded_positions_alone(rng):
    B, T, C = 4, 6, 5
    lengths = [6, 2, 4, 1]
    mask = np.arange(T)[None, :] < np.array(lengths)[:, None]  # (B, T)
    d = _inputs(rng, (B, T, C))
    d["x"][~mask] = 1e3  # padding garbage must not leak into the statistics
    out, cache, rm, rv = batch_norm_forward(**d, training=True, mask=mask)
    packed = d["x"][mask]  # (n, C)
    ref, ref_cache, ref_rm, ref_rv = batch_norm_forward(
        packed, d["weight"], d["bias"], d["running_mean"], d["running_var"], training=True)
    np.testing.assert_allclose(out[mask], ref, rtol=1e-13)
    np.testing.assert_allclose(rm, ref_rm, rtol=1e-13)
    np.testing.assert_allclose(rv, ref_rv, rtol=1e-13)
    dout = rng.normal(size=(B, T, C))
    dx, dg, db = batch_norm_backward(dout, cache)
    ref_dx, ref_dg, ref_db = batch_norm_backward(dout[mask], ref_cache)
    np.testing.assert_allclose(dx[mask], ref_dx, rtol=1e-12, atol=1e-14)
    assert not np.any(dx[~mask])  # padding gets zero gradient
    np.testing.assert_allclose(dg, ref_dg, rtol=1e-12)
    np.testing.assert_allclose(db, ref_db, rtol=1e-12)


def test_padding_contaminates_unmasked_statistics(rng):
    # The problem the mask solves: zero padding drags the mean toward 0.
    x = rng.normal(5.0, 1.0, size=(2, 8, 3))
    mask = np.ones((2, 8), bool)
    mask[1, 3:] = False
    x[~mask] = 0.0
    _, c_plain, _, _ = batch_norm_forward(x, np.ones(3), np.zeros(3), None, None, training=True)
    _, c_mask, _, _ = batch_norm_forward(x, np.ones(3), np.zeros(3), None, None, training=True,
                                         mask=mask)
    assert np.all(c_plain.mean < c_mask.mean - 1.0)
    np.testing.assert_allclose(c_mask.mean, x[mask].mean(0), rtol=1e-13)


def test_eval_uses_running_statistics(rng):
    d = _inputs(rng, (4, 3))
    out, _, _, _ = batch_norm_forward(**d, training=False, eps=1e-5)
    ref = (d["x"] - d["running_mean"]) / np.sqrt(d["running_var"] + 1e-5) * d["weight"] + d["bias"]
    np.testing.assert_allclose(out, ref, rtol=1e-14)


def test_one_value_per_channel_is_refused_in_training(rng):
    d = _inputs(rng, (1, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        batch_norm_forward(**d, training=True)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        d2 = _inputs(rng, (2, 3, 3))
        mask = np.zeros((2, 3), bool)
        mask[0, 0] = True
        batch_norm_forward(**d2, training=True, mask=mask)
    batch_norm_forward(**d, training=False)  # fine in eval, as in torch


@pytest.mark.parametrize("shape", SHAPES)
def test_no_running_statistics_in_training(rng, shape):
    d = _inputs(rng, shape)
    out, _, rm, rv = batch_norm_forward(d["x"], d["weight"], d["bias"], None, None, training=True)
    assert rm is None and rv is None and np.all(np.isfinite(out))
