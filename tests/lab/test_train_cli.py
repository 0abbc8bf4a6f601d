"""``normlab train``: flags over the config fields, refusals before work, --json, the last line."""

import json

import pytest

from normlab.lab.cli import main

TINY = ["--depth", "1", "--width", "16", "--heads", "2", "--seq", "8", "--batch", "4",
        "--steps", "6", "--warmup", "1", "--eval-interval", "3", "--eval-batches", "1", "--quiet"]


def test_train_writes_json_and_ends_with_the_floor_line(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = main(["train", *TINY, "--placement", "sandwich", "--norm", "rmsnorm", "--qk-norm",
                 "rmsnorm", "--attn-softcap", "50", "--final-softcap", "30", "--z-loss", "1e-4",
                 "--json", str(out)])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("validation loss ") and "entropy floor" in lines[-1]
    d = json.loads(out.read_text())
    assert list(d)[:2] == ["final_val_loss", "entropy_floor"]
    assert d["config"]["model"]["placement"] == "sandwich" and d["config"]["model"]["n_layers"] == 1
    assert d["config"]["model"]["attn_softcap"] == 50.0 and d["config"]["steps"] == 6
    assert len(d["history"]) == 6 and "layer_grad_norm" in d["history"][0]
    assert f"{d['final_val_loss']:.4f}" in lines[-1]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


@pytest.mark.parametrize("flags,message", [
    (["--heads", "3"], "n_heads (3) must divide d_model (16)"),
    (["--placement", "middle"], "placement must be one of"),
    (["--norm", "groupnorm"], "norm must be one of"),
    (["--precision", "fp7"], "precision must be one of"),
    (["--lr", "0"], "lr must be a finite number > 0"),
    (["--steps", "0"], "steps must be an integer >= 1"),
])
def test_inconsistent_flags_are_refused_before_work(tmp_path, capsys, flags, message):
    out = tmp_path / "run.json"
    assert main(["train", *TINY, *flags, "--json", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_unwritable_json_is_refused_before_work(tmp_path, capsys):
    assert main(["train", *TINY, "--json", str(tmp_path / "no" / "run.json")]) == 2
    assert "directory does not exist" in capsys.readouterr().err


def test_checkpoint_and_resume(tmp_path, capsys):
    ck = tmp_path / "run.npz"
    assert main(["train", *TINY, "--checkpoint", str(ck)]) == 0
    assert main(["train", *TINY, "--resume", str(ck), "--steps", "8"]) == 0
    assert main(["train", *TINY, "--resume", str(ck), "--width", "32"]) == 2
    assert "model.d_model differ" in capsys.readouterr().err
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert main(["train", *TINY, "--resume", str(tmp_path / "bad.npz")]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_keep_freed_memory_stops_page_faults_on_reused_temporaries():
    # temporaries of a few sizes made and freed in turn, as in a training step: by default
    # glibc returns the freed blocks to the kernel and each new one faults its pages in again
    # (about 50,000 faults for this loop); kept for reuse, none
    import resource
    import sys

    import numpy as np

    from normlab.lab.commands.train import keep_freed_memory

    if not sys.platform.startswith("linux") or not keep_freed_memory():
        pytest.skip("glibc's mallopt is not available")
    arrays = [np.ones(n, np.float32) for n in (1 << 18, 1 << 20, 1 << 19, 3 << 18, 1 << 21)]

    def step():
        live = []
        for a in arrays:
            live.append(a * 2.0)
            if len(live) > 2:
                live.pop(0)

    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        step()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 500
