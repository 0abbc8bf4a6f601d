"""An ensemble's member is its single run: losses, gradients and final parameters bit for bit.

Every placement, every norm and every precision preset, at tiny sizes; the members differ in the
seed and in per-member scalars (learning rate, warmup, weight decay, loss multiplier, z-loss,
soft-cap, label smoothing, precision policy). The ensemble and the single runs are stepped in
lockstep and compared after every step.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from normlab.models import NORMS, PLACEMENTS, GPTConfig
from normlab.train import PRECISIONS, Ensemble, TrainConfig, Trainer, train, train_ensemble
from normlab.train.probes import PROBE_NAMES


def base(**model) -> TrainConfig:
    m = dict(vocab_size=16, seq_len=8, n_layers=2, d_model=16, n_heads=2)
    m.update(model)
    return TrainConfig(model=GPTConfig(**m), steps=4, warmup=2, batch_size=2, eval_interval=2,
                       eval_batches=2)


def members(config: TrainConfig, precisions: tuple[str, ...] | None = None) -> list[TrainConfig]:
    """Three members: the seed and every per-member scalar varied."""
    a = config
    b = dataclasses.replace(config, seed=1, lr=3e-3, warmup=1, weight_decay=0.0,
                            model=dataclasses.replace(config.model, z_loss=1e-4))
    cap = None if config.model.placement == "ngpt" else 5.0  # nGPT refuses soft-caps
    c = dataclasses.replace(config, seed=2, loss_multiplier=2.0, min_lr=1e-4,
                            model=dataclasses.replace(config.model, final_softcap=cap,
                                                      label_smoothing=0.1))
    out = [a, b, c]
    if precisions is not None:
        out = [dataclasses.replace(x, precision=p) for x, p in zip(out, precisions)]
    return out


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def assert_members_are_single_runs(configs: list[TrainConfig]) -> None:
    ens = Ensemble(configs)
    singles = [Trainer(c) for c in configs]
    for _ in range(configs[0].steps):
        records = ens.train_step()
        for i, single in enumerate(singles):
            member = ens.members[i]
            if i not in records:
                continue
            want = single.train_step()
            assert records[i] == want, f"member {i}: step {single.step} record differs"
            if single.stopped is not None and "loss" in single.stopped:
                continue  # stopped by its loss: no update follows, and the ensemble's backward
                #           skips it (its single run's gradient is computed and dropped)
            for name, g in single.grads.items():
                assert _bits(member.grads[name]) == _bits(g), f"member {i}: d{name} differs"
            member.step += 1
            single.step += 1
    for i, single in enumerate(singles):
        for name, p in single.params.items():
            assert _bits(ens.members[i].params[name]) == _bits(p), f"member {i}: {name} differs"


def _results_equal(configs: list[TrainConfig]) -> None:
    for got, want in zip(train_ensemble(configs), [train(c) for c in configs]):
        a, b = got.to_dict(), want.to_dict()
        for k in ("wall_time_s", "tokens_per_s"):
            a.pop(k), b.pop(k)
        assert a == b


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_placement_member_equals_its_single_run(placement):
    ngpt = {"norm": "none", "positions": "rope"} if placement == "ngpt" else {}
    assert_members_are_single_runs(members(base(placement=placement, **ngpt)))


@pytest.mark.parametrize("preset", ["fp32", "pure_bf16"])
def test_ngpt_members_renormalize_their_matrices_as_their_single_runs(preset):
    """nGPT's renormalization after each step (the Trainer's): a member's matrices stay on the
    unit sphere and equal its single run's bit for bit, also where the policy rounds the
    stored weights (pure_bf16: no master weights)."""
    configs = members(base(placement="ngpt", norm="none", positions="rope", attn_gate=True,
                           activation="swiglu"), (preset,) * 3)
    assert_members_are_single_runs(configs)
    single = Trainer(configs[1])
    for _ in range(2):
        single.train_step()
        single.step += 1
    for name, w, axis in single.model.matrices():
        norms = np.linalg.norm(w.astype(np.float64), axis=axis)
        tol = 1e-6 if preset == "fp32" else 1e-2  # bf16-rounded entries
        assert np.all(np.abs(norms - 1.0) <= tol), f"{name}: norms {norms.min()}..{norms.max()}"


@pytest.mark.parametrize("norm", NORMS)
def test_every_norm_member_equals_its_single_run(norm):
    assert_members_are_single_runs(members(base(norm=norm, placement="sandwich")))


@pytest.mark.parametrize("preset", PRECISIONS)
def test_every_precision_preset_member_equals_its_single_run(preset):
    assert_members_are_single_runs(members(base(), (preset, preset, preset)))


def test_members_of_different_precision_policies_and_loss_scalers():
    assert_members_are_single_runs(members(base(), ("fp32", "amp_fp16", "fp8_hybrid")))


def _groups(configs: list[TrainConfig], site: str, hook: str) -> list:
    module = Ensemble(configs).model
    for name in site.split("."):
        module = getattr(module, name) if not name.isdigit() else module[int(name)]
    return [parts for parts, _ in module.numerics.groups[hook]]


def test_members_that_round_alike_are_rounded_together_and_equal_their_single_runs():
    # amp_fp16 at members 0, 2, 3, bf16 compute at 1, 5, 6 (amp_bf16 and pure_bf16), fp32 (the
    # identity), fp8_hybrid (delayed scaling: per member); member 3 alone has probes, which
    # watch each block's output stream
    precisions = ("amp_fp16", "amp_bf16", "amp_fp16", "amp_fp16", "fp32", "pure_bf16",
                  "amp_bf16", "fp8_hybrid")
    configs = [dataclasses.replace(base(), seed=i, precision=p, probes=())
               for i, p in enumerate(precisions)]
    configs[3] = dataclasses.replace(configs[3], probes=PROBE_NAMES, update_probe=2,
                                     eval_headroom=True)
    # each class rounded in one call per run of consecutive members (a view, never a copy)
    assert _groups(configs, "blocks.0.attn.branch.qkv", "input") == [
        (0, slice(2, 4)), (1, slice(5, 7)), (7,)]
    # (fp8_hybrid keeps its activations in bf16, unscaled: with the bf16 class)
    assert _groups(configs, "blocks.0.mlp", "stream") == [(0, 2), (1, slice(5, 8)), (3,)]
    assert_members_are_single_runs(configs)
    _results_equal(configs)
    # two classes of one member: each hook sees its own member's tensor
    assert _groups(configs[1:3], "blocks.0.attn.branch.qkv", "input") == [(0,), (1,)]
    # one class, not consecutive, beside the identity: one call per member
    apart = [configs[0], configs[4], configs[2]]
    assert _groups(apart, "blocks.0.attn.branch.qkv", "input") == [(0, 2)]
    assert_members_are_single_runs(apart)
    # one class: one call over the whole stacked tensor
    assert _groups(configs[2:4], "blocks.0.attn.branch.qkv", "input") == [(slice(0, 2),)]


@pytest.mark.parametrize("model", [
    dict(dropout=0.1, attn_dropout=0.1),
    dict(positions="rope", qk_norm="rmsnorm", n_kv_heads=1, attn_softcap=3.0),
    dict(qk_norm="layernorm", qk_norm_scope="all", tie_embeddings=True, bias=True),
    dict(qk_norm="layernorm"),  # the reference attention, all members in one call
    dict(qk_norm="rmsnorm", qk_norm_scope="all", sliding_window=3),
    dict(positions="rope", sliding_window=5, window_layers=(1,), attn_softcap=2.0),
    dict(activation="swiglu", norm="rmsnorm", norm_offset=1.0, embed_scale=2.0),
    dict(placement="mixln", mixln_fraction=0.5),  # block 0 Post-LN, block 1 Pre-LN
    dict(attn_gate=True),  # the fused attention over every member, then the gate
    dict(attn_gate=True, bias=True, qk_norm="layernorm", attn_dropout=0.1),  # member by member
    dict(attn_fn="sigmoid"),  # the reference attention over every member at once
    dict(attn_fn="sigmoid", qk_norm="rmsnorm", positions="rope"),  # per-head QK-norm, stacked
    dict(attn_fn="sigmoid", attn_dropout=0.1, attn_sigmoid_bias=-1.0),  # member by member
])
def test_model_features_member_equals_its_single_run(model):
    assert_members_are_single_runs(members(base(**model)))


@pytest.mark.parametrize("model, how", [
    (dict(), "fused"), (dict(qk_norm="layernorm"), "stacked"),
    (dict(qk_norm="rmsnorm", qk_norm_scope="all"), "fused"),
    (dict(positions="rope", qk_norm="rmsnorm"), "stacked"),
    (dict(dropout=0.1, attn_dropout=0.1), "members"),
])
def test_attention_runs_once_over_every_member_unless_each_draws_its_own_dropout(
        model, how, monkeypatch):
    from normlab.nn.attention import CausalSelfAttention

    seen = []
    forward = CausalSelfAttention._members_forward

    def spy(self, x):
        y = forward(self, x)
        seen.append((self._cache[0], len(self.member_max_logit)))
        return y

    monkeypatch.setattr(CausalSelfAttention, "_members_forward", spy)
    Ensemble(members(base(**model))).train_step()
    assert seen == [(how, 3)] * 2  # both blocks


def test_whole_results_with_evaluations_and_probes_equal_the_single_runs():
    cfg = dataclasses.replace(base(), update_probe=2, eval_headroom=True)
    _results_equal(members(cfg))


def test_members_with_their_own_evaluation_intervals_and_steps():
    a, b, c = members(base())
    _results_equal([a, dataclasses.replace(b, eval_interval=3), dataclasses.replace(c, steps=2)])


def test_a_diverging_member_stops_and_the_others_go_on():
    a, b, c = members(base())
    wild = dataclasses.replace(b, lr=50.0, warmup=0, grad_clip=None, divergence_factor=1.01)
    results = train_ensemble([a, wild, c])
    assert results[1].stopped is not None and results[0].stopped is None
    assert results[0].steps_done == results[2].steps_done == a.steps
    _results_equal([a, wild, c])


def test_members_that_stop_or_finish_leave_the_stacked_model_and_the_rest_keep_their_bits():
    a, b, c = members(base())
    a = dataclasses.replace(a, steps=6)
    wild = dataclasses.replace(b, lr=50.0, warmup=0, grad_clip=None, divergence_factor=1.01)
    short = dataclasses.replace(c, steps=3)
    assert_members_are_single_runs([a, wild, short])  # losses, gradients, final parameters
    ens = Ensemble([a, wild, short])
    sizes = []
    while ens.running():
        ens.train_step()
        for i in ens.running():
            ens.members[i].step += 1
        sizes.append(len(ens.slots))
    assert ens.members[1].stopped is not None
    assert sizes[0] == 3 and sizes[-1] == 1 and ens.model.flat_parameters.shape[0] == 1
    _results_equal([a, wild, short])


def test_configs_that_change_shapes_are_refused_by_field():
    a = base()
    with pytest.raises(ValueError, match=r"configs\[1\]\.model\.d_model = 32"):
        Ensemble([a, dataclasses.replace(a, model=dataclasses.replace(a.model, d_model=32))])
    with pytest.raises(ValueError, match=r"configs\[1\]\.batch_size"):
        Ensemble([a, dataclasses.replace(a, batch_size=3)])
    with pytest.raises(ValueError, match=r"model\.placement"):
        Ensemble([a, dataclasses.replace(a, model=dataclasses.replace(a.model,
                                                                      placement="post"))])
    with pytest.raises(TypeError, match="non-empty list"):
        Ensemble([])
    with pytest.raises(TypeError, match="non-empty list"):
        Ensemble(a)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"configs\[1\] must be a TrainConfig"):
        Ensemble([a, "seed=1"])  # type: ignore[list-item]


def test_the_stacked_model_holds_every_member_parameter_with_a_member_axis():
    configs = members(base())
    ens = Ensemble(configs)
    stacked = ens.model.parameters()
    for i, member in enumerate(ens.members):
        for name, p in member.params.items():
            assert stacked[name].shape == (3, *p.shape)
            assert np.shares_memory(stacked[name], p)
            np.testing.assert_array_equal(stacked[name][i], p)


def test_rebind_refuses_parameters_that_do_not_match_the_state():
    from normlab.train.optim import AdamW

    p = {"a": np.zeros((2, 3), np.float32), "b": np.zeros(4, np.float32)}
    opt = AdamW(p)
    with pytest.raises(ValueError, match="in this order"):
        opt.rebind({"b": p["b"].copy(), "a": p["a"].copy()})
    with pytest.raises(ValueError, match="parameter 'a' must keep its shape"):
        opt.rebind({"a": np.zeros((3, 2), np.float32), "b": p["b"].copy()})
    moved = {k: v.copy() for k, v in p.items()}
    opt.rebind(moved)
    assert opt.params is moved


@pytest.mark.parametrize("model", [
    dict(qk_norm="layernorm"), dict(qk_norm="rmsnorm", qk_norm_scope="all"),
    dict(positions="rope", n_kv_heads=1, sliding_window=3),
])
def test_stacked_model_on_the_reference_path_equals_each_member_model(model):
    """``set_impl("reference")`` (the functional ops, no kernels): the stacked model's losses
    and gradients equal each member model's bit for bit, the members' QK-norm gains apart."""
    from normlab.models import GPT, stack

    cfg = base(**model).model
    models = [GPT(cfg, rng=np.random.default_rng(s)) for s in range(3)]
    singles = [GPT(cfg, rng=np.random.default_rng(s)) for s in range(3)]
    for m, (a, b) in enumerate(zip(models, singles)):
        for name, p in a.parameters().items():
            if name.endswith(("q_norm", "k_norm")):  # each member's own gains
                p[...] = b.parameters()[name][...] = 1.0 + 0.25 * m + 0.01 * np.arange(p.size)
    ens = stack(models).set_impl("reference")
    rng = np.random.default_rng(9)
    idx = rng.integers(0, cfg.vocab_size, size=(3, 2, cfg.seq_len))
    targets = rng.integers(0, cfg.vocab_size, size=(3, 2, cfg.seq_len))
    losses = ens.forward(idx, targets)
    ens.backward()
    for m, single in enumerate(singles):
        single.set_impl("reference")
        assert single.forward(idx[m], targets[m]) == losses[m]
        single.backward()
        for name, g in single.gradients().items():
            assert _bits(models[m].gradients()[name]) == _bits(g), f"member {m}: d{name}"
