"""Damaged and hostile checkpoints (issue 28): a table of files built from a valid tiny one, each
refused with its reason before anything is mapped; the header rules against the safetensors
library's own verdict on the same bytes; saves killed or failing at every file boundary."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy")

from normlab.models import GPT, GPTConfig, load_hf, save_hf  # noqa: E402 - after the importorskip
from normlab.models.hf import SafetensorsError, read_header  # noqa: E402 - after the importorskip
from normlab.models.hf import checkpoint as ckpt  # noqa: E402 - after the importorskip

# ---- the header rules, against the safetensors library -------------------------------------
A = np.arange(4, dtype=np.float32).reshape(2, 2)
B = np.arange(4, 8, dtype=np.float32)
DATA = A.tobytes() + B.tobytes()  # 32 bytes


def _entry(dtype="F32", shape=(2, 2), offsets=(0, 16)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


GOOD = {"__metadata__": {"format": "pt"}, "a": _entry(), "b": _entry(shape=(4,), offsets=(16, 32))}


def _raw(header, data=DATA, length=None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def _with(name, **kw):
    return {**GOOD, name: {**GOOD[name], **kw}}


# (case, file bytes, the class of issue 28 it belongs to)
HEADER_CASES = [
    ("valid", _raw(GOOD), None),
    ("valid, trailing spaces in the header", _raw(json.dumps(GOOD).encode() + b"   "), None),
    ("valid, an empty tensor", _raw({**GOOD, "c": _entry(shape=(0,), offsets=(32, 32))}), None),
    ("truncated data", _raw(GOOD, DATA[:-4]), "unclear error"),
    ("bytes past the last tensor", _raw(GOOD, DATA + b"\0" * 4), "silently wrong"),
    ("shorter than 8 bytes", b"\x10\0\0", "unclear error"),
    ("header length past the file", _raw(GOOD, length=10**6), "unclear error"),
    ("header length over the format's limit", _raw(GOOD, length=2**40), "unbounded memory"),
    ("header not UTF-8", _raw(b"{\xff\xfe}"), "unclear error"),
    ("header garbage", _raw(b"{not json at all"), "unclear error"),
    ("header a JSON list", _raw(b"[1, 2]"), "traceback"),
    ("valid, a space before the header", _raw(b" " + json.dumps(GOOD).encode()), None),
    ("entry without dtype", _raw({**GOOD, "a": {"shape": [2, 2], "data_offsets": [0, 16]}}),
     "traceback"),
    ("entry without data_offsets", _raw({**GOOD, "a": {"dtype": "F32", "shape": [2, 2]}}),
     "traceback"),
    ("entry not an object", _raw({**GOOD, "a": [1]}), "traceback"),
    ("unknown dtype", _raw(_with("a", dtype="X9")), "unclear error"),
    ("negative start", _raw(_with("a", data_offsets=[-4, 16])), "silently wrong"),
    ("start > stop", _raw(_with("b", data_offsets=[32, 16])), "silently wrong"),
    ("two tensors on the same bytes", _raw(_with("b", data_offsets=[0, 16]), DATA[:16]),
     "silently wrong"),
    ("a range shifted 4 bytes into its neighbour",
     _raw(_with("b", data_offsets=[12, 28]), DATA[:28]), "silently wrong"),
    ("F32 bytes labelled F16", _raw(_with("a", dtype="F16")), "silently wrong"),
    ("F32 bytes labelled F64", _raw(_with("a", dtype="F64")), "silently wrong"),
    ("a negative dimension", _raw(_with("a", shape=[-2, -2])), "silently wrong"),
    ("a float dimension", _raw(_with("a", shape=[2.0, 2])), "traceback"),
    ("offsets of three numbers", _raw(_with("a", data_offsets=[0, 8, 16])), "traceback"),
    ("metadata not strings", _raw({**GOOD, "__metadata__": {"format": 1}}), "unclear error"),
    ("metadata a list", _raw({**GOOD, "__metadata__": ["pt"]}), "unclear error"),
    ("a key twice", _raw(json.dumps(GOOD).encode()[:-1] + b', "a": '
                         + json.dumps(_entry()).encode() + b"}"), "silently wrong"),
    ("an unknown field in an entry", _raw(_with("a", extra=1)), "silently wrong"),
]
# what normlab refuses although the library reads it (stricter, with the reason)
STRICTER = {"a key twice", "an unknown field in an entry"}


def _oracle(path):
    """The safetensors library's verdict: the tensors it reads, or None when it refuses."""
    try:
        return safetensors_numpy.load_file(str(path))
    except Exception:
        return None


@pytest.mark.parametrize("case,raw,kind", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_header_rules_match_the_safetensors_library(case, raw, kind, tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(raw)
    theirs = _oracle(path)
    try:
        ours = read_header(path)
    except SafetensorsError as exc:
        assert str(path) in str(exc)  # the refusal names the file
        assert theirs is None or case in STRICTER, f"refused what safetensors reads: {exc}"
        assert kind is not None
        return
    assert theirs is not None and kind is None, "read what safetensors refuses"
    maps = ckpt.MappedFiles([path])
    assert sorted(ours) == sorted(theirs)
    for name, t in ours.items():
        np.testing.assert_array_equal(maps.view(t), theirs[name])


def test_every_refusal_names_the_tensor_and_the_rule(tmp_path):
    path = tmp_path / "x.safetensors"
    for edit, words in ((_with("a", dtype="F16"), ("'a'", "span 16 bytes", "8 bytes")),
                        (_with("b", data_offsets=[12, 28]), ("'b'", "overlaps")),
                        (_with("b", data_offsets=[32, 16]), ("'b'", "start 32 > stop 16"))):
        path.write_bytes(_raw(edit))
        with pytest.raises(SafetensorsError) as info:
            read_header(path)
        assert all(w in str(info.value) for w in words), str(info.value)


# ---- checkpoints: shards, config fields, sizes, values ---------------------------------------
SHARD = 3600  # three shards of the tiny model
BASE = {"vocab_size": 11, "seq_len": 8, "n_layers": 2, "d_model": 8, "n_heads": 2,
        "norm": "rmsnorm", "positions": "rope", "activation": "swiglu", "bias": False}


def _model(**kw):
    return GPT(GPTConfig(**{**BASE, **kw}), rng=np.random.default_rng(0))


def _edit_config(path, **edit):
    hf = json.loads((path / "config.json").read_text())
    hf.update(edit)
    (path / "config.json").write_text(json.dumps(hf))


def _edit_index(path, edit):
    index = json.loads((path / "model.safetensors.index.json").read_text())
    edit(index["weight_map"])
    (path / "model.safetensors.index.json").write_text(json.dumps(index))


def _first(wmap):
    return next(iter(wmap))


CONFIG_CASES = [  # (edit of config.json, what the refusal says)
    ({"hidden_size": "16"}, "hidden_size = '16' must be an integer"),
    ({"hidden_size": 16.0}, "hidden_size = 16.0 must be an integer"),
    ({"hidden_size": True}, "hidden_size = True must be an integer"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings = 'false' must be true or false"),
    ({"num_hidden_layers": None}, "lacks num_hidden_layers"),
    ({"vocab_size": None}, "lacks vocab_size"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}}, "lacks factor"),
    ({"num_hidden_layers": 10**4}, "num_hidden_layers = 10000 but the checkpoint stores"),
    # sizes beyond any memory: refused naming the field before anything grows with them
    ({"num_hidden_layers": 10**9}, "num_hidden_layers = 1000000000: the model needs about"),
    ({"vocab_size": 10**12}, "vocab_size = 1000000000000 must be an integer in"),
    ({"vocab_size": 12}, "embed_tokens.weight has shape"),
    ({"vocab_size": 2**31 - 1}, "vocab_size = 2147483647: the model needs about"),
    ({"intermediate_size": 10**11}, "intermediate_size = 100000000000 must be an integer"),
    ({"intermediate_size": 2**31 - 1}, "intermediate_size = 2147483647: the model needs about"),
    ({"hidden_size": 2**31 - 1}, "hidden_size = 2147483647: the model needs about"),
    ({"rms_norm_eps": "1e-6"}, "rms_norm_eps = '1e-6' must be a finite number"),
    ({"head_dim": "4"}, "head_dim = '4' must be an integer"),
    ({"model_type": ["llama"]}, "model_type not supported"),
]


@pytest.mark.parametrize("edit,message", CONFIG_CASES, ids=[str(c[0]) for c in CONFIG_CASES])
def test_config_fields_are_typed_and_bounded_before_allocating(edit, message, tmp_path,
                                                               monkeypatch):
    # the same verdicts on a machine of any size: 16 GB available
    monkeypatch.setattr("normlab._memory.available_memory", lambda: 16 * 10**9)
    path = save_hf(_model(), tmp_path / "ck")
    _edit_config(path, **edit)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_hf(path)


def test_gpt2_without_n_positions_and_broken_json_are_named(tmp_path):
    gpt2 = GPT(GPTConfig(vocab_size=11, seq_len=8, n_layers=1, d_model=8, n_heads=2, bias=True),
               rng=np.random.default_rng(0))
    path = save_hf(gpt2, tmp_path / "g")
    hf = json.loads((path / "config.json").read_text())
    del hf["n_positions"]
    (path / "config.json").write_text(json.dumps(hf))
    with pytest.raises(ValueError, match=r"gpt2: config.json lacks n_positions"):
        load_hf(path)
    (path / "config.json").write_text("{broken")
    with pytest.raises(ValueError, match=r"config.json.*is not valid JSON"):
        load_hf(path)
    (path / "config.json").write_text("[1]")
    with pytest.raises(ValueError, match="must hold a JSON object; got list"):
        load_hf(path)


SHARD_CASES = [  # (edit of the weight map or the folder, what the refusal says)
    (lambda w, p: w.update({_first(w): "/etc/passwd"}), "plain file name"),
    (lambda w, p: w.update({_first(w): "../outside/w.safetensors"}), "plain file name"),
    (lambda w, p: (os.symlink(p.parent / "other" / "model-00001-of-00003.safetensors",
                              p / "link.safetensors"), w.update({_first(w): "link.safetensors"})),
     "outside the checkpoint folder"),
    (lambda w, p: w.pop(_first(w)), "weight_map puts tensor"),
    (lambda w, p: w.update({"model.extra": "model-00001-of-00003.safetensors"}),
     "weight_map puts tensor 'model.extra'"),
    (lambda w, p: w.update({_first(w): "model-00002-of-00003.safetensors"}),
     "weight_map puts tensor"),
]


@pytest.mark.parametrize("edit,message", SHARD_CASES)
def test_shards_stay_inside_the_checkpoint_and_agree_with_the_index(edit, message, tmp_path):
    model = _model()
    save_hf(model, tmp_path / "other", max_shard_bytes=SHARD)
    path = save_hf(model, tmp_path / "ck", max_shard_bytes=SHARD)
    assert len(list(path.glob("*.safetensors"))) == 3
    _edit_index(path, lambda w: edit(w, path))
    with pytest.raises(ValueError, match=message):
        load_hf(path)


def test_a_list_weight_map_and_a_tensor_in_two_shards_are_refused(tmp_path):
    path = save_hf(_model(), tmp_path / "ck", max_shard_bytes=SHARD)
    index = path / "model.safetensors.index.json"
    good = index.read_text()
    index.write_text(json.dumps({"weight_map": ["a"]}))
    with pytest.raises(ValueError, match="weight_map must be an object"):
        load_hf(path)
    index.write_text(good)
    first = path / "model-00001-of-00003.safetensors"
    tensors = safetensors_numpy.load_file(str(first))
    name = next(iter(tensors))
    second = path / "model-00002-of-00003.safetensors"
    safetensors_numpy.save_file({**safetensors_numpy.load_file(str(second)),
                                 name: tensors[name]}, str(second))
    with pytest.raises(ValueError, match=f"tensor '{name}' is stored twice"):
        load_hf(path)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused_unless_asked_for(value, tmp_path):
    model = _model()
    model.parameters()["blocks.1.mlp.branch.proj.weight"][0, 3] = value
    path = save_hf(model, tmp_path / "ck")
    with pytest.raises(ValueError, match=r"down_proj.weight' in model.safetensors holds a "
                                         r"non-finite value \(element 3"):
        load_hf(path)
    loaded = load_hf(path, allow_nonfinite=True)
    got = loaded.parameters()["blocks.1.mlp.branch.proj.weight"][0, 3]
    assert np.isnan(got) if np.isnan(value) else got == value


# ---- saves: the family, kills and full disks -------------------------------------------------
def test_save_hf_refuses_a_family_the_model_cannot_be_written_as(tmp_path):
    with pytest.raises(ValueError, match="cannot be written as gpt2"):
        save_hf(_model(), tmp_path / "a", family="gpt2")
    with pytest.raises(ValueError, match="cannot be written as qwen3: its qk_norm is 'none'"):
        save_hf(_model(), tmp_path / "b", family="qwen3")
    with pytest.raises(ValueError, match="family must be one of"):
        save_hf(_model(), tmp_path / "c", family="gemma9")
    assert not any(tmp_path.iterdir())  # nothing written
    save_hf(_model(sliding_window=3), tmp_path / "m", family="mistral")  # expressible: written
    assert load_hf(tmp_path / "m").config.sliding_window == 3


def _state(path):
    """What a reader sees: the folder's names and every loaded parameter."""
    names = sorted(p.name for p in path.iterdir())
    return names, {k: np.array(v) for k, v in load_hf(path).parameters().items()}


def _same(a, b) -> bool:
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        np.array_equal(a[1][k], b[1][k]) for k in a[1])


@pytest.mark.parametrize("shard", [None, SHARD])
def test_a_save_failing_at_every_file_boundary_leaves_the_old_checkpoint(shard, tmp_path,
                                                                        monkeypatch):
    path = save_hf(_model(), tmp_path / "ck", max_shard_bytes=shard)
    (path / "tokenizer.json").write_text("{}")
    before = _state(path)
    new = GPT(GPTConfig(**BASE), rng=np.random.default_rng(1))
    n_files = 2 if shard is None else 5
    real = ckpt._write_durably
    for k in range(n_files + 1):  # a failure at file k; k = n_files: the switch itself fails
        calls = []

        def write(target, w, old, k=k, calls=calls):
            if len(calls) == k:
                raise OSError(28, "No space left on device")
            calls.append(target)
            real(target, w, old)

        monkeypatch.setattr(ckpt, "_write_durably", write)
        if k == n_files:
            monkeypatch.setattr(ckpt, "_switch", lambda a, b: (_ for _ in ()).throw(
                OSError(28, "No space left on device")))
        with pytest.raises(OSError, match="No space left"):
            save_hf(new, path, max_shard_bytes=shard)
        assert _same(_state(path), before), k
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]  # nothing left beside
    monkeypatch.undo()
    save_hf(new, path, max_shard_bytes=shard)
    after = _state(path)
    assert "tokenizer.json" in after[0] and not _same(after, before)


def test_a_full_disk_inside_the_library_write_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    path = save_hf(_model(), tmp_path / "ck", max_shard_bytes=SHARD)
    before = _state(path)
    import safetensors.numpy as stn

    real = stn.save_file

    def half(tensors, name, metadata=None):
        real(tensors, name, metadata=metadata)
        with open(name, "r+b") as f:
            f.truncate(os.path.getsize(name) // 2)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stn, "save_file", half)
    with pytest.raises(OSError, match="No space left"):
        save_hf(_model(n_layers=2, d_model=16), path)
    assert _same(_state(path), before)


KILL = """
import os, signal, sys
import numpy as np
from normlab.models import GPT, GPTConfig, save_hf
from normlab.models.hf import checkpoint as ckpt
k, shard = int(sys.argv[2]), None if sys.argv[3] == "none" else int(sys.argv[3])
real, calls = ckpt._write_durably, []
def write(target, w, old):
    if len(calls) == k:
        os.kill(os.getpid(), signal.SIGKILL)
    calls.append(target)
    real(target, w, old)
ckpt._write_durably = write
cfg = GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=8, n_heads=2, norm="rmsnorm",
                positions="rope", activation="swiglu", bias=False)
save_hf(GPT(cfg, rng=np.random.default_rng(1)), sys.argv[1], max_shard_bytes=shard)
"""


@pytest.mark.parametrize("shard", [None, SHARD])
def test_a_save_killed_at_every_file_boundary_leaves_the_old_checkpoint(shard, tmp_path):
    path = save_hf(_model(), tmp_path / "ck", max_shard_bytes=shard)
    before = _state(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for k in range(2 if shard is None else 5):
        run = subprocess.run([sys.executable, "-c", KILL, str(path), str(k), str(shard).lower()],
                             env=env, capture_output=True, text=True, timeout=120,
                             check=False)
        assert run.returncode == -9, run.stderr
        assert _same(_state(path), before), k
