"""Probes (normlab.train.probes): a run records what it names, the training itself is the same
with any set of probes, inference computes no statistics, and bad names are refused up front."""

import dataclasses

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.nn.numerics import PolicyNumerics
from normlab.train import TrainConfig, Trainer, train
from normlab.train.probes import DEFAULT_PROBES, PROBE_NAMES, ResidualStats, Watch, observe

MODEL = GPTConfig(vocab_size=12, seq_len=8, n_layers=2, d_model=16, n_heads=2)
CFG = TrainConfig(model=MODEL, steps=5, batch_size=3, warmup=1, eval_interval=5, eval_batches=1)
CORE = ["step", "lr", "loss", "nll", "log_z", "grad_norm", "skipped", "clip_factor"]
BY_PROBE = {"residual_stats": ["residual_rms", "residual_max", "max_attn_logit"],
            "logit_drift": ["mean_logit", "head_norm", "mean_logit_unseen"],
            "grad_stats": ["layer_grad_norm", "layer_grad_rms"],
            "update_stats": ["update_rms", "layer_update_rms"]}


def _training(result) -> list:
    return [{k: r[k] for k in CORE} for r in result.history]


@pytest.mark.parametrize("precision", ["fp32", "fp8_hybrid"])
def test_no_probe_records_only_the_update_and_trains_the_same(precision):
    cfg = dataclasses.replace(CFG, precision=precision)
    bare, full = Trainer(dataclasses.replace(cfg, probes=())), Trainer(cfg)
    a, b = bare.run(), full.run()
    assert all(list(r) == CORE for r in a.history)
    assert _training(a) == _training(b) and a.final_val_loss == b.final_val_loss
    for name, p in bare.params.items():
        np.testing.assert_array_equal(p, full.params[name])


@pytest.mark.parametrize("probe", sorted(BY_PROBE))
def test_each_probe_adds_its_own_keys(probe):
    rec = train(dataclasses.replace(CFG, probes=(probe,), steps=1)).history[0]
    extra = [k for k in rec if k not in CORE]
    assert extra == BY_PROBE[probe]


def test_the_default_probes_are_what_the_trainer_recorded_before():
    assert DEFAULT_PROBES == ("residual_stats", "logit_drift", "grad_stats", "update_stats")
    assert TrainConfig().probes == DEFAULT_PROBES
    assert set(PROBE_NAMES) == set(BY_PROBE) | {"update_probe", "headroom", "attention_sink"}


def test_the_probes_travel_in_the_config_and_headroom_is_a_probe():
    cfg = dataclasses.replace(CFG, probes=["grad_stats", "headroom"])
    assert cfg.probes == ("grad_stats", "headroom")  # a list from JSON becomes a tuple
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.active_probes() == ("grad_stats", "headroom")
    assert all("headroom" in e for e in train(cfg).evals)
    probed = dataclasses.replace(CFG, update_probe=2, eval_headroom=True)
    assert probed.active_probes() == DEFAULT_PROBES + ("update_probe", "headroom")


@pytest.mark.parametrize("probes, match", [
    (("grad_stat",), "probes must be among"), ("grad_stats", "must be a list"),
    (("grad_stats", "grad_stats"), "twice"), (("update_probe",), "update_probe = n > 0")])
def test_bad_probes_are_refused_by_the_config(probes, match):
    with pytest.raises((TypeError, ValueError), match=match):
        dataclasses.replace(CFG, probes=probes)


def test_inference_computes_no_statistics():
    model = GPT(MODEL, rng=np.random.default_rng(0))
    assert not hasattr(model, "metrics")
    calls = []
    probe = ResidualStats(model)
    watch = Watch(model.numerics_root, {k: lambda x: calls.append(x) for k in probe.hooks()})
    model.set_numerics(watch)
    idx = np.random.default_rng(1).integers(0, 12, size=(2, 8))
    model.logits(idx)  # unarmed: the hooks are not called
    assert calls == []
    with watch.armed_for():
        model.logits(idx)
    assert len(calls) == MODEL.n_layers


def test_a_watch_returns_the_policys_values_unchanged():
    idx = np.random.default_rng(1).integers(0, 12, size=(2, 8))
    out = []
    for watched in (False, True):
        model = GPT(MODEL, rng=np.random.default_rng(0))
        numerics = PolicyNumerics("fp8_hybrid", rng=np.random.default_rng(3))
        if watched:
            hooks = ResidualStats(model).hooks()
            numerics = Watch(numerics, {k: (lambda x: None) for k in hooks})
        model.set_numerics(numerics)
        for _ in range(2):
            z = model.logits(idx)
            numerics.end_step()
        out.append((z, numerics.state()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    assert out[0][1] == out[1][1]


def test_observe_names_model_probes_only_and_restores_the_hooks():
    model = GPT(MODEL, rng=np.random.default_rng(0))
    before = model.numerics_root
    with observe(model, "residual_stats", "logit_drift") as seen:
        model.forward(np.zeros((1, 8), np.int64), np.zeros((1, 8), np.int64))
    assert len(seen["residual_rms"]) == MODEL.n_layers and "mean_logit" in seen
    assert model.numerics_root is before
    with pytest.raises(ValueError, match="observe: names must be among"):
        with observe(model, "grad_stats"):
            pass


def test_a_run_without_probes_checkpoints_and_resumes(tmp_path):
    cfg = dataclasses.replace(CFG, probes=())
    full = Trainer(cfg).run()
    first = Trainer(cfg)
    first.run(until=2)
    first.save(tmp_path / "run.npz")
    assert Trainer.resume(tmp_path / "run.npz", cfg).run().history == full.history


def test_probes_follow_hooks_a_caller_installs_on_the_trainers_model():
    from normlab.nn.numerics import FULL_PRECISION

    plain, reset = Trainer(CFG), Trainer(CFG)
    reset.model.set_numerics(FULL_PRECISION)  # as an experiment that resets after its own hooks
    assert reset.run().history == plain.run().history
