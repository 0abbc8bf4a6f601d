"""Sweep specs: expansion into points, stable run ids, random search, and every kind of bad spec
refused with the field named before anything runs."""

import math

import pytest
from _sweep_helpers import write_spec

from normlab.lab.cli import main
from normlab.lab.sweep import SpecError, load_spec, make_points, parse_spec, run_id
from normlab.train import TrainConfig


def points_of(tmp_path, body, head="", **kw):
    return load_spec(write_spec(tmp_path, body, head=head, **kw)).points()


def test_grid_times_seeds_in_order_with_stable_ids(tmp_path):
    pts = points_of(tmp_path, '[grid]\nlr = [1e-3, 1e-2]\nmodel.placement = ["pre", "post"]\n',
                    head="seeds = [0, 1]\n")
    assert len(pts) == 8
    assert [p.varied for p in pts[:3]] == [
        {"lr": 1e-3, "model.placement": "pre", "seed": 0},
        {"lr": 1e-3, "model.placement": "pre", "seed": 1},
        {"lr": 1e-3, "model.placement": "post", "seed": 0},
    ]
    c = pts[2].config
    assert (c.lr, c.model.placement, c.seed, c.steps, c.model.d_model) == (1e-3, "post", 0, 6, 16)
    assert c.model.vocab_size == TrainConfig().model.vocab_size  # the rest: TrainConfig's defaults
    assert len({p.id for p in pts}) == 8 and all(len(p.id) == 16 for p in pts)
    assert all(p.id == run_id(p.config) for p in pts)
    again = points_of(
        tmp_path,
        '[grid.model]\nplacement = ["pre", "post"]\n[grid]\nlr = [1e-3, 1e-2]\n',
        head="seeds = [0, 1]\n",
        name="other.toml",
    )
    assert {p.id for p in again} == {p.id for p in pts}  # the same runs, written another way


def test_adding_points_leaves_the_others_ids(tmp_path):
    a = points_of(tmp_path, "[grid]\nlr = [1e-3, 1e-2]\n")
    b = points_of(tmp_path, "[grid]\nlr = [1e-3, 1e-2, 1e-1]\n", name="b.toml")
    assert [p.id for p in a] == [p.id for p in b[:2]]


def test_integers_for_floats_and_none_for_optional_fields(tmp_path):
    pts = points_of(tmp_path, '[grid]\nlr = [1, 0.5]\nmodel.d_ff = ["none", 32]\n')
    assert isinstance(pts[0].config.lr, float) and pts[0].config.lr == 1.0
    assert pts[0].config.model.d_ff is None and pts[1].config.model.d_ff == 32
    one = load_spec(write_spec(tmp_path, "[grid]\nlr = [1]\n", name="a.toml")).points()[0]
    other = load_spec(write_spec(tmp_path, "[grid]\nlr = [1.0]\n", name="b.toml")).points()[0]
    assert one.id == other.id
    spec = parse_spec({"base": {"grad_clip": "None"}, "seeds": [3]})
    assert spec.points()[0].config.grad_clip is None


def test_random_search_is_seeded_within_bounds_and_crossed_with_the_grid(tmp_path):
    body = (
        '[grid]\nmodel.norm = ["layernorm", "rmsnorm"]\n'
        "[random]\nsamples = 6\nseed = 3\nlr = { log_uniform = [1e-4, 1e-1] }\n"
        "warmup = [0, 2]\nbeta1 = { uniform = [0.8, 0.9] }\n"
        "model.n_layers = { int_uniform = [1, 2] }\n"
    )
    pts = points_of(tmp_path, body)
    assert len(pts) == 12
    assert all(1e-4 <= p.config.lr <= 1e-1 and p.config.warmup in (0, 2) for p in pts)
    assert all(0.8 <= p.config.beta1 <= 0.9 and p.config.model.n_layers in (1, 2) for p in pts)
    assert [p.config.lr for p in pts[:6]] == [p.config.lr for p in pts[6:]]  # the same draws
    assert len({p.config.lr for p in pts[:6]}) == 6
    assert [p.id for p in points_of(tmp_path, body, name="again.toml")] == [p.id for p in pts]
    other = points_of(tmp_path, body.replace("seed = 3", "seed = 4"), name="other.toml")
    assert [p.config.lr for p in other[:6]] != [p.config.lr for p in pts[:6]]
    ints = points_of(
        tmp_path, "[random]\nsamples = 3\nlr = { int_uniform = [1, 2] }\n", name="i.toml"
    )
    assert all(isinstance(p.config.lr, float) for p in ints)  # a float field stays a float
    logs = [math.log10(p.config.lr) for p in points_of(
        tmp_path, body.replace("samples = 6", "samples = 200"), name="many.toml")]
    assert min(logs) < -3.4 and max(logs) > -1.6  # spread over the decades, not uniform in lr


def test_make_points_from_configs_drops_duplicates_and_names_what_varies():
    a, b = TrainConfig(steps=5, lr=1e-3), TrainConfig(steps=5, lr=2e-2)
    pts = make_points([a, b, TrainConfig(steps=5, lr=1e-3)])
    assert [p.config for p in pts] == [a, b]
    assert pts[1].varied == {"lr": 2e-2}
    with pytest.raises(TypeError, match=r"points\[0\]"):
        make_points([{"lr": 1}])


# (spec body after the tiny [base], top-level head, message fragment, field)
BAD = [
    ("[grid]\nlrr = [1e-3]\n", "", "grid: unknown field 'lrr' (did you mean 'lr'?)", "lrr"),
    ("[grid]\nmodel.depth = [2]\n", "", "unknown field 'model.depth'", "model.depth"),
    ("[gird]\nlr = [1e-3]\n", "", "unknown key 'gird' (did you mean 'grid'?)", "gird"),
    ("[grid]\n", "", "[grid] is empty", "grid"),
    ("[grid]\nlr = []\n", "", "grid.lr: the list is empty", "lr"),
    ("[grid]\nlr = 1e-3\n", "", "grid.lr: must be a list of values", "lr"),
    ('[grid]\nlr = ["fast"]\n', "", "grid.lr[0]: lr must be a number; got 'fast' (str)", "lr"),
    ('[grid]\nmodel.bias = ["yes"]\n', "", "model.bias must be true or false", "model.bias"),
    ("[grid]\nsteps = [10.5]\n", "", "grid.steps[0]: steps must be an integer", "steps"),
    ("[grid]\nlr = [1e-3, -1.0]\n", "", "grid.lr[1]: lr must be a finite number > 0", "lr"),
    (
        "[grid]\nmodel.n_heads = [2, 3]\n",
        "",
        "grid.model.n_heads[1]: n_heads (3) must divide d_model (16)",
        "model.n_heads",
    ),
    (
        '[grid]\nmodel.placement = ["pre", "middle"]\n',
        "",
        "placement must be one of",
        "model.placement",
    ),
    ("[grid]\nlr = [1e-3, 1e-3]\n", "", "grid.lr: lists a value twice", "lr"),
    (
        "[grid]\nbeta1 = [0.9, 1.5]\n",
        "",
        "grid.beta1[1]: beta1 must be a finite number in [0, 1)",
        "beta1",
    ),
    ("", "seeds = []\n", "seeds must be a non-empty list", "seeds"),
    ("", "seeds = [0, -1]\n", "seeds[1]: seed must be an integer >= 0", "seed"),
    ("[grid]\nseed = [1, 2]\n", "seeds = [0]\n", "the seed is swept twice", "seed"),
    ("", "", "nothing to sweep", "grid"),
    (
        "[random]\nlr = [1e-3]\n",
        "",
        "random.samples (how many draws) must be an integer >= 1; it is missing",
        "random.samples",
    ),
    ("[random]\nsamples = 2\nlr = { log_uniform = [0.0, 1e-1] }\n", "", "needs 0 < lo", "lr"),
    ("[random]\nsamples = 2\nlr = { log_uniform = [1e-1, 1e-3] }\n", "", "needs lo < hi", "lr"),
    (
        "[random]\nsamples = 2\nlr = { normal = [0, 1] }\n",
        "",
        "a random field is a list of values",
        "lr",
    ),
    (
        "[random]\nsamples = 2\nmodel.norm = { uniform = [0, 1] }\n",
        "",
        "model.norm is a string field",
        "model.norm",
    ),
    (
        "[random]\nsamples = 2\nlr = { log_uniform = [1e-3, 20.0] }\nmin_lr = [50.0]\n",
        "",
        "random.min_lr: min_lr must be in [0, lr = ",
        "min_lr",
    ),
    ("[base]\nlr = 1e-3\n", "", "not valid TOML", None),  # [base] defined twice
    (
        "[grid]\nmodel.d_model = [16, 24]\nmodel.n_heads = [2, 16]\n",
        "",
        "point model.d_model=24, model.n_heads=16: n_heads (16) must divide d_model (24)",
        None,
    ),
]


@pytest.mark.parametrize("body,head,message,field", BAD)
def test_bad_specs_are_refused_with_the_field_named(tmp_path, body, head, message, field):
    path = write_spec(tmp_path, body, head=head)
    with pytest.raises(SpecError) as err:
        load_spec(path).points()
    assert message in str(err.value)
    assert str(path) in str(err.value)
    assert err.value.field == field


def test_bad_base_values_are_refused(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('seeds = [0]\n[base]\nlr = "3e-3"\n')
    with pytest.raises(SpecError, match=r"base.lr: lr must be a number; got '3e-3'"):
        load_spec(path)
    path.write_text('seeds = [0]\n[base]\noptimiser = "sgd"\n')
    with pytest.raises(SpecError, match=r"unknown field 'optimiser' .did you mean 'optimizer'"):
        load_spec(path)
    path.write_text('seeds = [0]\nlr = 0.1\n')
    with pytest.raises(
        SpecError, match=r"unknown key 'lr' \(fields go in \[base\], \[grid\] or \[random\]"
    ):
        load_spec(path)
    path.write_text('seeds = [0]\n[base]\nmodel = "big"\n')
    with pytest.raises(SpecError, match=r"base.model: give model fields as model.<name>"):
        load_spec(path)


def test_unreadable_files_are_refused(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)
    (tmp_path / "bad.toml").write_text("[grid\nlr = [1]\n")
    with pytest.raises(SpecError, match=r"not valid TOML \(.*line 1"):
        load_spec(tmp_path / "bad.toml")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00lr")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(tmp_path / "bin.toml")


def test_cli_refuses_a_bad_spec_before_anything_runs(tmp_path, capsys):
    path = write_spec(tmp_path, '[grid]\nmodel.n_heads = [2, 3]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normlab sweep: ") and "grid.model.n_heads[1]" in err
    assert not out.exists()
    assert main(["sweep", str(tmp_path / "nope.toml"), "--out", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err
