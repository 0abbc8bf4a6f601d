"""``normlab inspect`` on damaged inputs (issue 28): a broken tokenizer.json, a damaged header or
config, non-finite weights: one line naming the file and the problem, exit status 2, no
traceback and no output written."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from normlab.lab.cli import main as cli
from normlab.models import GPT, GPTConfig, save_hf

tokenizers = pytest.importorskip("tokenizers")

CFG = GPTConfig(vocab_size=23, seq_len=12, n_layers=1, d_model=8, n_heads=2, norm="rmsnorm",
                positions="rope", activation="swiglu", bias=False)


def _checkpoint(tmp_path):
    path = save_hf(GPT(CFG, rng=np.random.default_rng(0)), tmp_path / "ck")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {w: i for i, w in enumerate(["<unk>", "the", "a", "cat", "sat", "on", "mat"])}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path / "tokenizer.json"))
    (tmp_path / "t.txt").write_text("the cat sat on the mat")
    return path


def _run(capsys, path, tmp_path):
    rc = cli(["inspect", str(path), "--text", str(tmp_path / "t.txt"), "--out",
              str(tmp_path / "o"), "--quiet", "--policies", "amp_bf16"])
    err = capsys.readouterr().err
    return rc, err


def test_a_sound_checkpoint_and_tokenizer_inspect(tmp_path, capsys):
    assert _run(capsys, _checkpoint(tmp_path), tmp_path)[0] == 0


def _truncate(p):
    p.write_text(p.read_text()[:40])


def _model_gone(p):
    doc = json.loads(p.read_text())
    del doc["model"]
    p.write_text(json.dumps(doc))


TOKENIZERS = {
    "not JSON": lambda p: p.write_text("{not json"),
    "a JSON list": lambda p: p.write_text("[1, 2, 3]"),
    "truncated": _truncate,
    "without its model": _model_gone,
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "empty": lambda p: p.write_text(""),
}


@pytest.mark.parametrize("case", sorted(TOKENIZERS))
def test_a_broken_tokenizer_is_one_line(case, tmp_path, capsys):
    path = _checkpoint(tmp_path)
    TOKENIZERS[case](path / "tokenizer.json")
    rc, err = _run(capsys, path, tmp_path)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "tokenizer.json: not a tokenizer the tokenizers library reads" in err


def _header_list(path):
    raw = b"[1, 2]"
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)


def _nan(path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(path / "model.safetensors"))
    t["model.norm.weight"][0] = np.nan
    save_file(t, str(path / "model.safetensors"))


def _config(**edit):
    def apply(path):
        hf = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**hf, **edit}))

    return apply


CHECKPOINTS = {
    "header a JSON list": (_header_list, "the header is not a JSON object"),
    "NaN weights": (_nan, "holds a non-finite value"),
    "hidden_size a string": (_config(hidden_size="16"), "hidden_size = '16' must be an integer"),
    "vocab_size 10^12": (_config(vocab_size=10**12), "vocab_size = 1000000000000 must be"),
    "no vocab_size": (_config(vocab_size=None), "lacks vocab_size"),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINTS))
def test_a_damaged_checkpoint_is_one_line(case, tmp_path, capsys):
    damage, message = CHECKPOINTS[case]
    path = _checkpoint(tmp_path)
    damage(path)
    rc, err = _run(capsys, path, tmp_path)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert not (tmp_path / "o" / "inspect.html").exists()
