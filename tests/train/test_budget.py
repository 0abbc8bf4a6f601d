"""The memory budget: the parameter count agrees with the model built from the config, the estimate
bounds what a training step holds, and what cannot fit is refused with the field named before
anything is allocated."""

import dataclasses
import itertools
import tracemalloc

import numpy as np
import pytest

from normlab.models import GPT, GPTConfig
from normlab.train import TrainConfig, Trainer
from normlab.train.budget import (
    MemoryBudgetError,
    available_memory,
    check_memory,
    count_parameters,
    estimate,
    format_bytes,
)
from normlab.train.data import MarkovSource

MODEL = GPTConfig(vocab_size=16, seq_len=16, n_layers=2, d_model=32, n_heads=4)
CFG = TrainConfig(model=MODEL, steps=3, batch_size=4, warmup=0, eval_batches=2)


VARIANTS = list(
    itertools.product(
        ["gelu", "swiglu"],
        ["pre", "post", "sandwich", "deepnorm", "rezero", "none"],
        ["layernorm", "rmsnorm", "dyt"],
        ["learned", "rope"],
        [False, True],
        [False, True],
        ["none", "layernorm"],
    )
)


@pytest.mark.parametrize("activation,placement,norm,positions,tie,bias,qk", VARIANTS[::7])
def test_parameter_count_bounds_the_built_model(
    activation, placement, norm, positions, tie, bias, qk
):
    cfg = GPTConfig(
        vocab_size=11,
        seq_len=8,
        n_layers=2,
        d_model=16,
        n_heads=2,
        activation=activation,
        placement=placement,
        norm=norm,
        positions=positions,
        tie_embeddings=tie,
        bias=bias,
        qk_norm=qk,
    )
    exact = GPT(cfg, rng=np.random.default_rng(0)).num_parameters()
    assert exact <= count_parameters(cfg) <= 1.3 * exact


@pytest.mark.parametrize("kw", [{}, {"model": dataclasses.replace(MODEL, seq_len=64, n_heads=8)},
                                {"model": dataclasses.replace(MODEL, activation="swiglu")},
                                {"precision": "amp_bf16"}])
def test_the_estimate_bounds_a_runs_peak_within_a_small_factor(kw):
    cfg = dataclasses.replace(CFG, **kw)
    Trainer(cfg).run()  # warm-up: imports and compiled kernels are not the run's memory
    tracemalloc.start()
    try:
        Trainer(cfg).run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = estimate(cfg).total
    assert peak <= total <= 6 * peak


@pytest.mark.parametrize("field,value,flag", [
    ("model.n_layers", 1_000_000_000, "model.n_layers"),
    ("model.d_model", 1_000_000_000, "model.d_model"),
    ("model.d_head", 1_000_000_000, "model.d_head"),  # a head width apart from d_model
    ("model.seq_len", 1_000_000_000, "model.seq_len"),
    ("batch_size", 1_000_000_000, "batch_size"),
    ("eval_batches", 1_000_000_000, "eval_batches"),
    ("steps", 10**15, "steps"),
])
def test_what_cannot_fit_is_refused_naming_the_field(field, value, flag):
    if field.startswith("model."):
        cfg = dataclasses.replace(CFG, model=dataclasses.replace(MODEL, **{field[6:]: value}))
    else:
        cfg = dataclasses.replace(CFG, **{field: value})
    with pytest.raises(MemoryBudgetError, match=f"^{flag} {value}: the run needs about") as info:
        check_memory(cfg, available=2**30)
    assert info.value.field == field and "more than the 1.1 GB available" in str(info.value)
    with pytest.raises(MemoryBudgetError):
        Trainer(cfg)  # the core refuses too, before allocating


def test_a_markov_order_that_cannot_fit_is_refused_without_computing_the_power():
    cfg = dataclasses.replace(CFG, markov_order=10**9)
    with pytest.raises(MemoryBudgetError, match="16\\^1000000000 = astronomically many contexts"):
        check_memory(cfg, flag=lambda f: "--" + f.replace("_", "-"))
    with pytest.raises(ValueError, match="16\\^1000000000 = too many contexts"):
        MarkovSource(16, 10**9)
    with pytest.raises(MemoryBudgetError, match="--markov-order 6"):
        check_memory(
            dataclasses.replace(CFG, markov_order=6), flag=lambda f: "--" + f.replace("_", "-")
        )


def test_a_run_that_fits_passes_and_the_machine_reports_memory():
    assert check_memory(CFG).total == estimate(CFG).total
    avail = available_memory()
    assert avail is None or avail > 0
    assert format_bytes(1.5e9) == "1.5 GB" and format_bytes(12) == "12 B"
