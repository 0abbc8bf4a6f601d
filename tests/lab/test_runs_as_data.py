"""Runs as data (``_training.point_fields`` / ``select`` / ``one``), the named recipes
(``_recipes``), and warmup's rows the register lists as not tested (its lr and depth rows), without
training anything: the runs are built by hand, the judge reads the tiny fixture's data."""

import json
from pathlib import Path

import pytest

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import _recipes as R
from normlab.lab.experiments import _training as T

FIXTURE = Path(__file__).with_name("fixtures") / "tiny-before"


def _run(variant: str, fields: dict) -> T.Run:
    return T.Run(variant, fields["lr"], fields["seed"], "done", None, 1.0, 2.0, None, 10, 0,
                 fields=fields)


def test_a_points_fields_are_its_overrides_by_last_name_and_its_own_coordinates():
    fields = T.point_fields({"model.placement": "post", "model.n_layers": 12, "warmup": 0},
                            {"arm": "post-LN"})
    assert fields == {"placement": "post", "n_layers": 12, "warmup": 0, "arm": "post-LN"}
    with pytest.raises(ValueError, match="both end in 'seed'"):
        T.point_fields({"seed": 1, "model.seed": 2})
    with pytest.raises(ValueError, match="contradicts its override"):
        T.point_fields({"model.placement": "post"}, {"placement": "pre"})
    assert T.point_fields({"model.placement": "pre"}, {"placement": "pre"}) == {"placement": "pre"}


def test_runs_are_selected_by_field_never_by_their_name():
    runs = [_run("whatever a name says", {"placement": p, "n_layers": L, "warmup": w, "lr": 1e-2,
                                           "seed": s})
            for p in ("post", "pre") for L in (2, 4) for w in (0, 8) for s in (0, 1)]
    post = T.select(runs, placement="post", n_layers=4, warmup=0)
    assert [(r.fields["placement"], r.fields["n_layers"], r.fields["warmup"], r.seed)
            for r in post] == [("post", 4, 0, 0), ("post", 4, 0, 1)]
    assert T.select(runs, placement="sandwich") == []
    assert T.select(runs, arm="post") == []  # a field no run has matches none
    assert T.one(runs, placement="pre", n_layers=2, warmup=8, seed=1) is runs[11]
    with pytest.raises(LookupError, match="2 runs have the fields"):
        T.one(runs, placement="pre", n_layers=2, warmup=8)
    assert "fields" not in T.as_data(runs)[0]  # the data keeps its shape (the name keys it)
    assert T.as_data(runs)[0]["variant"] == "whatever a name says"


def test_the_recipes_are_named_once_and_the_text_copies_keep_their_own_values():
    from normlab.lab.experiments import (
        attention_logit_growth,
        dyt,
        massive_activations,
        post_vs_pre_quality,
        rmsnorm_quality,
    )

    assert dyt.BASE is R.TEXT and attention_logit_growth.BASE is R.WORTSMAN
    for mod in (massive_activations, post_vs_pre_quality, rmsnorm_quality):
        # measured before the recipe was named: learned positions (not silently "fixed" to the
        # text recipe's RoPE); no embedding scale, except where the Xavier set-up of the
        # placement experiments asks for unit-variance embeddings (sqrt(d) x the 1/sqrt(d) init)
        scale = 32**0.5 if mod is post_vs_pre_quality else 1.0
        assert (mod.BASE.model.embed_scale, mod.BASE.model.positions) == (scale, "learned")
        assert mod.BASE.data == R.TEXT.data and mod.BASE.model.vocab_size == 64
    assert (R.TEXT.model.embed_scale, R.TEXT.model.positions) == (32**0.5, "rope")
    with pytest.raises(ValueError, match="say why"):
        R.derive(R.TEXT, " ", {"steps": 10})
    assert R.tiny_model(embed_scale=True) == {
        "base.model.d_model": 16, "base.model.n_heads": 2, "base.model.init_std": 0.25,
        "base.model.embed_scale": 4.0}


def _warmup_data() -> dict:
    """The fixture's warmup data, measured before the counted learning rate was fixed in the
    config: its lr* (the highest lr where Post-LN with warmup trained) is the lr the rows read."""
    data = json.loads((FIXTURE / "warmup" / "result.json").read_text())["data"]
    return {**data, "lr": data.get("lr", data.get("lr_star"))}


def _warmup_judged(**change) -> dict:
    module = E.load("warmup")
    data = _warmup_data()
    data.update(change)
    return {c.id: c for c in module.judge(data, E.configure(module, "tiny"))}


def test_warmups_growth_rows_are_registered_as_not_tested_whatever_the_grid():
    """The gap's growth with lr and with depth read the gap's own interval on the lab's grids
    (the gap is about 0 at the lowest lr and depth): the register lists both as claims not
    tested, with the reason, and judge produces no row for them whatever the grid (two lrs,
    the counted lr at the lowest, one depth); every row it produces keeps to its record. "Pre-LN
    without warmup reaches Post-LN with it" is listed as not tested too (a claim about trained
    models between two arms that both train)."""
    module = E.load("warmup")
    untested = {r.id for r in module.REGISTER if r.untested}
    assert untested == {"gap-grows-with-lr", "gap-grows-with-depth",
                        "pre-ln-without-matches-post-ln-with"}
    assert all(r.kind == "claim" and "one effect counted twice" in r.untested
               for r in module.REGISTER if r.id.startswith("gap-grows-with-"))
    assert "both train" in module.RECORDS["pre-ln-without-matches-post-ln-with"].untested
    data = _warmup_data()
    for change in ({}, {"lr": 1e-3}, {"depths": data["depths"][-1:]}):
        rows = _warmup_judged(**change)
        assert not untested & set(rows) and "post-ln-no-warmup-gap" in rows
        register.check_rows(module, rows.values(), "tiny")
