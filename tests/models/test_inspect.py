"""normlab inspect: the headroom fractions against actual rounding, the per-layer figures against
the model's own metrics, the precision presets against running them directly, and the command."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import numpy as np
import pytest

from normlab.lab.commands import inspect as command
from normlab.models import GPT, GPTConfig, save_hf
from normlab.models.inspect import FORMAT_SCALINGS, HIST_LO, inspect_model, tensor_stats
from normlab.nn.numerics import FULL_PRECISION, PolicyNumerics
from normlab.precision import get_format, mx_dequantize, mx_quantize, quantize
from normlab.train.probes import observe


@pytest.fixture(autouse=True)
def _numba_threads_as_started(monkeypatch):
    """numba re-reads NUMBA_NUM_THREADS when it compiles and refuses a value that differs from
    the running pool's; commands run in-process by other tests (``normlab train``) may have set
    it to 1 after the pool started. The inspect kernels compile on first use: keep them happy."""
    import numba

    monkeypatch.setenv("NUMBA_NUM_THREADS", str(numba.config.NUMBA_NUM_THREADS))


CFG = GPTConfig(vocab_size=23, seq_len=12, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2,
                norm="rmsnorm", positions="rope", activation="swiglu", d_ff=24,
                sliding_window=5, window_layers=(0,))


def _wide(seed: int = 0, n: int = 4096) -> np.ndarray:
    """Values over 2^-30 .. 2^20 with both signs and some zeros: every fraction is non-trivial."""
    rng = np.random.default_rng(seed)
    x = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-30, 20, n)
    x[::97] = 0.0
    return x.astype(np.float32).reshape(-1, 64)


@pytest.mark.parametrize("key,fmt,scaling", [k for k in FORMAT_SCALINGS if k[2] != "mx"])
def test_fractions_match_rounding_the_values(key, fmt, scaling):
    x = _wide()
    delayed = 3.0 * float(np.abs(x).max())  # an earlier step with a larger amax
    stats = tensor_stats(x, delayed_amax=delayed)
    f = get_format(fmt)
    s = {"none": 1.0, "tensor": f.max_finite / np.abs(x).max(),
         "delayed": f.max_finite / delayed}[scaling]
    xs = x.astype(np.float64) * s
    q = quantize(xs.astype(np.float32), fmt,
                 overflow="inf" if f.has_inf else "nan").astype(np.float64)
    nz = x != 0
    expect = {"overflow": np.mean(~np.isfinite(q[nz]) | (np.abs(q[nz]) > f.max_finite)),
              "flush": np.mean(q[nz] == 0),
              "subnormal": np.mean((q[nz] != 0) & (np.abs(q[nz]) < f.min_normal))}
    got = stats["formats"][key]
    for k in expect:  # one value at a boundary may go either way through float32 products
        assert abs(got[k] - expect[k]) <= 1 / nz.sum(), (k, got[k], expect[k])
    if scaling == "none" and fmt.startswith("float8"):
        assert got["overflow"] > 0 and got["flush"] > 0 and got["subnormal"] > 0
    if scaling == "tensor":
        assert got["overflow"] == 0


@pytest.mark.parametrize("key,fmt", [(k, f) for k, f, s in FORMAT_SCALINGS if s == "mx"])
def test_mx_flushes_match_block_quantization(key, fmt):
    x = _wide(1)
    t = mx_quantize(x, fmt, block_size=32, scale_rule="floor")
    y = mx_dequantize(t)
    nz = x != 0
    got = tensor_stats(x)["formats"][key]
    assert got["flush"] == pytest.approx(np.mean(y[nz] == 0), abs=1 / nz.sum())
    assert got["flush"] > 0


def test_histogram_counts_every_nonzero_value_in_its_binade():
    x = np.array([0.0, 1.0, 1.5, -0.75, 2.0 ** -70, 3e38, np.inf], np.float32)
    s = tensor_stats(x)
    counts = np.array(s["hist"]["counts"])
    assert counts.sum() == 5 and s["zeros"] == 1 and s["nonfinite"] == 1
    assert counts[0 - HIST_LO] == 2 and counts[-1 - HIST_LO] == 1  # [1, 2) twice, [0.5, 1) once
    assert counts[0] == 1 and counts[-1] == 1  # clipped into the end bins
    assert s["amax"] == pytest.approx(3e38)


def _model(seed: int = 0, **kw) -> GPT:
    model = GPT(dataclasses.replace(CFG, **kw), rng=np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for p in model.parameters().values():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.3 if p.ndim == 1 else 0.4, p.shape)
    return model


def test_inspect_reports_what_the_model_measures_and_leaves_it_unchanged():
    model = _model()
    before = {k: v.copy() for k, v in model.parameters().items()}
    tokens = np.random.default_rng(2).integers(0, CFG.vocab_size, 40)
    r = inspect_model(model, tokens, seq_len=10, policies=("amp_bf16", "fp8_hybrid"))
    idx, tgt = tokens[None, -11:-1], tokens[None, -10:]
    with observe(model, "residual_stats") as seen:
        parts = model.forward(idx, tgt)
    loss = parts.loss
    assert r["loss"] == pytest.approx(loss, rel=1e-6)
    for i, layer in enumerate(r["layers"]):
        assert layer["residual_rms"] == pytest.approx(seen["residual_rms"][i], rel=1e-5)
        assert max(layer["max_logit"]) == pytest.approx(seen["max_attn_logit"][i], rel=1e-5)
        assert len(layer["max_logit"]) == len(layer["entropy"]) == CFG.n_heads
        limit = np.log(5 if i == 0 else 10)  # layer 0 attends over a window of 5
        assert all(0 < e <= limit + 1e-6 for e in layer["entropy"])
        assert set(layer["norms"]) == {"attn.norm", "mlp.norm"}
    assert r["output"]["log_z"] == pytest.approx(parts.log_z, rel=1e-6)
    assert r["tokens"]["delayed_from"] == "previous window"
    # each preset's loss: what running the model under it gives
    model.set_numerics(PolicyNumerics("amp_bf16", rng=np.random.default_rng(0)))
    bf16 = model.forward(idx, tgt).loss
    model.set_numerics(FULL_PRECISION)
    assert r["policies"]["amp_bf16"]["loss"] == pytest.approx(bf16, rel=1e-7)
    assert r["policies"]["fp32"]["delta"] == 0 and r["policies"]["amp_bf16"]["delta"] != 0
    kinds = {t["kind"] for t in r["tensors"].values()}
    assert kinds == {"weight", "activation", "gradient"}
    assert "grad:blocks.0.attn.branch.qkv.weight" in r["tensors"] and "logits" in r["tensors"]
    assert r["tensors"]["grad:wte.weight"]["amax"] > 0  # the backward ran
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    assert not any(g.any() for g in model.gradients().values())
    json.dumps(r)  # JSON-ready


@pytest.mark.parametrize("kw,message", [
    ({"tokens": np.zeros((2, 3), int)}, "tokens must be a 1-D array"),
    ({"tokens": np.array([1, 99])}, "tokens must lie in"),
    ({"tokens": np.array([1])}, "at least 2 ids"),
    ({"seq_len": 13}, "seq_len must be in"),
    ({"policies": ("fp4_magic",)}, "policies must be preset names"),
])
def test_inspect_refuses_bad_arguments(kw, message):
    args = {"tokens": np.arange(8), **kw}
    with pytest.raises(ValueError, match=message):
        inspect_model(_model(), **args)
    with pytest.raises(TypeError, match="model must be a normlab GPT"):
        inspect_model("gpt2", np.arange(4))


def _args(path, out, **kw) -> argparse.Namespace:
    base = dict(path=str(path), text=None, tokens=None, seq=8, policies=["amp_bf16"], out=out,
                json=False, quiet=True)
    return argparse.Namespace(**{**base, **kw})


def test_command_writes_html_and_json_from_text_or_tokens(tmp_path, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    ckpt = save_hf(_model(sliding_window=None, window_layers=None), tmp_path / "ckpt")  # llama
    vocab = {w: i for i, w in enumerate(["[UNK]"] + [f"w{i}" for i in range(CFG.vocab_size - 1)])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(ckpt / "tokenizer.json"))
    text = tmp_path / "t.txt"
    text.write_text(" ".join(f"w{i % 20}" for i in range(30)))
    assert command.main(_args(ckpt, tmp_path / "a", text=text)) == 0
    page = (tmp_path / "a" / "inspect.html").read_text()
    assert "Loss under each precision policy" in page and "<svg" in page
    result = json.loads((tmp_path / "a" / "inspect.json").read_text())
    assert result["tokens"]["measured"] == 8 and set(result["policies"]) == {"fp32", "amp_bf16"}
    ids = tmp_path / "ids.npy"
    np.save(ids, np.arange(20) % CFG.vocab_size)
    capsys.readouterr()
    assert command.main(_args(ckpt, tmp_path / "b", tokens=ids, json=True)) == 0
    assert json.loads(capsys.readouterr().out)["loss"] > 0


def _cli(capsys, *argv) -> tuple[int, str]:
    from normlab.lab.cli import main as cli

    rc = cli(["inspect", *map(str, argv), "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


def test_command_errors_name_the_problem(tmp_path, capsys):
    ids = tmp_path / "ids.npy"
    np.save(ids, np.arange(20))
    rc, err = _cli(capsys, tmp_path / "nothing", "--tokens", ids, "--out", tmp_path / "o")
    assert rc == 2 and "is not a checkpoint directory" in err
    ckpt = save_hf(_model(qk_norm="rmsnorm"), tmp_path / "ckpt")  # qwen3
    rc, err = _cli(capsys, ckpt, "--text", ids, "--out", tmp_path / "o")
    assert rc == 2 and "has no tokenizer.json" in err


@pytest.mark.parametrize("case", ["out-file", "out-fifo", "json-fifo", "html-dir",
                                  "json-links-tokens", "tokens-fifo", "tokens-dir", "seq",
                                  "policy"])
def test_every_argument_is_checked_before_work_and_no_output_replaces_an_input(tmp_path, capsys,
                                                                                monkeypatch, case):
    ckpt = save_hf(_model(qk_norm="rmsnorm"), tmp_path / "ckpt")
    ids = tmp_path / "ids.npy"
    np.save(ids, np.arange(20) % CFG.vocab_size)
    before = ids.read_bytes()
    out, extra = tmp_path / "o", []
    if case == "out-file":
        out.write_text("x")
    elif case == "out-fifo":
        os.mkfifo(out)
    elif case in ("json-fifo", "html-dir", "json-links-tokens"):
        out.mkdir()
        {"json-fifo": lambda: os.mkfifo(out / "inspect.json"),
         "html-dir": lambda: (out / "inspect.html").mkdir(),
         "json-links-tokens": lambda: (out / "inspect.json").symlink_to(ids)}[case]()
    elif case in ("tokens-fifo", "tokens-dir"):
        ids = tmp_path / "t"
        os.mkfifo(ids) if case == "tokens-fifo" else ids.mkdir()
    else:
        extra = ["--seq", "0"] if case == "seq" else ["--policies", "fp9"]
    monkeypatch.setattr("normlab.models.load_hf", _never)  # refused before any work
    rc, err = _cli(capsys, ckpt, "--tokens", ids, "--out", out, *extra)
    named = {"seq": "--seq", "policy": "--policies", "tokens-fifo": "--tokens",
             "tokens-dir": "--tokens"}.get(case, "--out")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and named in err, err
    if case == "json-links-tokens":
        assert "--tokens" in err and ids.read_bytes() == before
    assert not (out.is_dir() and (out / "inspect.html").is_file())


def _never(*args, **kwargs):
    raise AssertionError("work started before the arguments were checked")


def test_outputs_are_written_atomically(tmp_path, capsys):
    ckpt = save_hf(_model(qk_norm="rmsnorm"), tmp_path / "ckpt")
    ids = tmp_path / "ids.npy"
    np.save(ids, np.arange(20) % CFG.vocab_size)
    out = tmp_path / "o"
    out.mkdir()
    (out / "inspect.json").write_text("old")
    os.chmod(out / "inspect.json", 0o640)
    rc, _ = _cli(capsys, ckpt, "--tokens", ids, "--out", out, "--seq", "8",
                 "--policies", "amp_bf16")
    assert rc == 0 and json.loads((out / "inspect.json").read_text())["loss"] > 0
    assert (out / "inspect.json").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in out.iterdir()) == ["inspect.html", "inspect.json"]


def test_inspect_reports_each_weights_block_statistics():
    """Every weight matrix under every what-if dialect: the figures of block_stats itself, the
    row/column disagreement zero for 2D tiles only, and the page's section."""
    from normlab.lab.inspect_page import render
    from normlab.precision.blockstats import WHAT_IF, block_stats

    model = _model(d_model=32, n_heads=4, d_ff=48)
    r = inspect_model(model, np.arange(30) % CFG.vocab_size, seq_len=8, policies=())
    blocks = r["blocks"]
    assert set(blocks["dialects"]) == set(WHAT_IF)
    mats = {k for k, v in model.parameters().items() if v.ndim == 2}
    assert set(blocks["tensors"]) == mats
    name = "blocks.0.mlp.branch.up.weight" if "blocks.0.mlp.branch.up.weight" in mats else \
        sorted(mats)[0]
    w = model.parameters()[name]
    for dialect, p in WHAT_IF.items():
        want = block_stats(w, p).to_dict()
        got = blocks["tensors"][name][dialect]
        assert got == json.loads(json.dumps(want)), dialect
        if "16x16" in dialect or "128x128" in dialect:
            assert got["rowcol_differ"] == 0
    assert blocks["tensors"][name]["nvfp4"]["rowcol_differ"] > 0
    json.dumps(r)
    page = render(r, "tiny")
    assert "Per-block statistics of the weights" in page and "top band" in page
    r2 = inspect_model(model, np.arange(30) % CFG.vocab_size, seq_len=8, policies=(),
                       blocks=False)
    assert "blocks" not in r2
