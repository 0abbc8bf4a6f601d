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
    (["--heads", "3"], "--n-heads (3) must divide d_model (16)"),
    (["--placement", "middle"], "placement must be one of"),
    (["--norm", "groupnorm"], "norm must be one of"),
    (["--precision", "fp7"], "precision must be one of"),
    (["--lr", "0"], "--lr must be a finite number > 0"),
    (["--steps", "0"], "steps must be an integer >= 1"),
])
def test_inconsistent_flags_are_refused_before_work(tmp_path, capsys, flags, message):
    out = tmp_path / "run.json"
    assert main(["train", *TINY, *flags, "--json", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_unwritable_json_is_refused_before_work(tmp_path, capsys):
    assert main(["train", *TINY, "--json", str(tmp_path / "no" / "run.json")]) == 2
    assert "--json: folder" in capsys.readouterr().err


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

    from normlab.lab.allocator import keep_freed_memory

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


def test_every_measuring_process_keeps_freed_memory(tmp_path):
    """The measuring commands (run, report, train) and every pool worker, the report's second
    process included, set the allocator before they measure; a command that measures nothing
    leaves it alone. In a fresh interpreter, so that nothing else has set it."""
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "import normlab.lab.allocator as a\n"
        "calls = []\n"
        "a.keep_freed_memory = lambda: calls.append(1) or True\n"
        "from normlab.lab.cli import main\n"
        "from normlab.lab.sweep.task import worker_init\n"
        "main(['list']); listed = len(calls)\n"
        "main(['run', 'dropout', '--tiny', '--out', sys.argv[1]]); ran = len(calls)\n"
        "worker_init(os.getppid())\n"
        "print(listed, ran, len(calls))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[-3:] == ["0", "1", "2"]


# ---- nothing lost: outputs, inputs, existing checkpoints ------------------------------------
WILD = ["--optimizer", "sgd", "--lr", "500", "--momentum", "0", "--grad-clip", "none",
        "--warmup", "0", "--schedule", "constant", "--weight-decay", "0"]


def test_a_diverging_run_never_replaces_a_good_checkpoint(tmp_path, capsys):
    ck = tmp_path / "good.npz"
    assert main(["train", *TINY, "--checkpoint", str(ck)]) == 0
    good = ck.read_bytes()
    assert main(["train", *TINY, *WILD, "--steps", "30", "--checkpoint", str(ck)]) == 2
    assert "--checkpoint" in capsys.readouterr().err and ck.read_bytes() == good
    code = main(["train", *TINY, *WILD, "--steps", "30", "--checkpoint", str(ck), "--overwrite"])
    assert code == 1
    assert "was not written" in capsys.readouterr().err
    assert ck.read_bytes() == good  # the run stopped: the file keeps what it held


def test_a_fresh_run_replaces_an_existing_checkpoint_only_with_overwrite(tmp_path, capsys):
    ck = tmp_path / "run.npz"
    assert main(["train", *TINY, "--checkpoint", str(ck)]) == 0
    before = ck.read_bytes()
    capsys.readouterr()
    assert main(["train", *TINY, "--seed", "3", "--checkpoint", str(ck)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normlab train: error: --checkpoint") and "--overwrite" in err
    assert ck.read_bytes() == before
    assert main(["train", *TINY, "--resume", str(ck), "--steps", "8", "--checkpoint", str(ck)]) == 0
    assert ck.read_bytes() != before  # its own run continues it
    assert main(["train", *TINY, "--seed", "3", "--checkpoint", str(ck), "--overwrite"]) == 0


@pytest.mark.parametrize("make_flags", [
    lambda d: ["--json", str(d / "run.npz"), "--checkpoint", str(d / "run.npz")],
    lambda d: ["--data-path", str(d / "corpus.txt"), "--json", str(d / "corpus.txt")],
    lambda d: ["--data-path", str(d / "corpus.txt"), "--checkpoint", str(d / "link.txt")],
])
def test_an_output_naming_an_input_or_the_other_output_is_refused(tmp_path, capsys, make_flags):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    (tmp_path / "link.txt").symlink_to(corpus)
    before = corpus.read_bytes()
    capsys.readouterr()
    assert main(["train", *TINY, *make_flags(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "name the same file" in err and err.count("\n") == 1
    assert corpus.read_bytes() == before and not (tmp_path / "run.npz").exists()


def test_json_of_a_resume_may_not_name_the_checkpoint(tmp_path, capsys):
    ck = tmp_path / "run.npz"
    assert main(["train", *TINY, "--checkpoint", str(ck)]) == 0
    before = ck.read_bytes()
    assert main(["train", *TINY, "--resume", str(ck), "--steps", "8", "--json", str(ck)]) == 2
    assert "--json and --resume name the same file" in capsys.readouterr().err
    assert ck.read_bytes() == before


@pytest.mark.parametrize("flag", ["--json", "--checkpoint", "--data-path"])
def test_a_directory_or_fifo_is_refused_before_training(tmp_path, capsys, flag):
    extra = ["--data", "file"] if flag == "--data-path" else []
    assert main(["train", *TINY, *extra, flag, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: " in err and "is a directory" in err and "validation loss" not in err
    import os

    os.mkfifo(tmp_path / "fifo")
    assert main(["train", *TINY, *extra, flag, str(tmp_path / "fifo")]) == 2  # never blocks
    assert "is a FIFO" in capsys.readouterr().err


def test_data_flags_that_would_be_ignored_are_refused_or_implied(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    assert main(["train", *TINY, "--data", "markov", "--data-path", str(corpus)]) == 2
    assert "--data-path is read only with --data file" in capsys.readouterr().err
    assert main(["train", *TINY, "--data", "pydoc", "--vocab-size", "30"]) == 2
    assert ("--vocab-size: with --data pydoc the corpus sets the vocabulary"
            in capsys.readouterr().err)
    out = tmp_path / "r.json"
    assert main(["train", *TINY, "--data-path", str(corpus), "--json", str(out)]) == 0
    assert "--data-path implies --data file" in capsys.readouterr().err
    assert json.loads(out.read_text())["config"]["data"] == "file"


@pytest.mark.parametrize("flags,named,reader", [
    (["--data", "pydoc", "--markov-order", "3"], "--markov-order", "--data markov"),
    (["--data", "copy", "--markov-alpha", "0.5"], "--markov-alpha", "--data markov"),
    (["--data", "pydoc", "--data-seed", "3"], "--data-seed", "--data markov or copy or reverse"),
    (["--momentum", "0.5"], "--momentum", "--optimizer sgd"),
    (["--optimizer", "sgd", "--beta2", "0.9"], "--beta2", "--optimizer adamw"),
    (["--optimizer", "sgd", "--adam-eps", "1e-6"], "--adam-eps", "--optimizer adamw"),
    (["--schedule", "constant", "--min-lr", "1e-4"], "--min-lr", "--schedule cosine"),
])
def test_a_flag_the_run_would_not_read_is_refused(tmp_path, capsys, flags, named, reader):
    out = tmp_path / "r.json"
    assert main(["train", *TINY, *flags, "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{named} is read only with {reader}" in err, err
    assert not out.exists()
    reading = {"--markov-order": ["--data", "markov"], "--markov-alpha": ["--data", "markov"],
               "--data-seed": ["--data", "copy"], "--momentum": ["--optimizer", "sgd"],
               "--beta2": ["--optimizer", "adamw"], "--adam-eps": ["--optimizer", "adamw"],
               "--min-lr": ["--schedule", "cosine"]}[named]
    given = flags[flags.index(named):flags.index(named) + 2]
    assert main(["train", *TINY, "--steps", "1", *reading, *given]) == 0  # read: accepted


def test_resume_semantics(tmp_path, capsys):
    ck = tmp_path / "run.npz"
    assert main(["train", *TINY, "--checkpoint", str(ck)]) == 0
    before = ck.read_bytes()
    capsys.readouterr()
    assert main(["train", *TINY, "--resume", str(ck), "--checkpoint", str(ck)]) == 0
    err = capsys.readouterr().err
    assert "nothing to do: the run in" in err and "finished its 6 steps" in err
    assert main(["train", *TINY, "--resume", str(ck), "--steps", "4"]) == 2
    assert "--steps 4: the run in" in capsys.readouterr().err
    assert ck.read_bytes() == before
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros(3))
    assert main(["train", *TINY, "--resume", str(tmp_path / "x.npy")]) == 2
    assert "--resume: checkpoint" in capsys.readouterr().err
    assert main(["train", *TINY, "--resume", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("flag,value", [("--n-layers", "1000000000"), ("--d-model", "1000000000"),
                                        ("--seq-len", "1000000000"), ("--batch-size", "1000000000"),
                                        ("--eval-batches", "1000000000"),
                                        ("--markov-order", "1000000000")])
def test_sizes_that_cannot_fit_are_refused_with_the_flag_named(tmp_path, capsys, flag, value):
    args = ["train", *TINY, flag, value]
    if flag == "--d-model":
        args += ["--heads", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"normlab train: error: {flag} {value}: ") and err.count("\n") == 1


def test_a_disk_that_refuses_the_outputs_after_training_is_one_line_not_a_traceback(
        tmp_path, capsys, monkeypatch):
    import errno

    from normlab.train import checkpoint as ckpt

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    good = tmp_path / "good.npz"
    assert main(["train", *TINY, "--checkpoint", str(good)]) == 0
    before = good.read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(ckpt, "atomic_write", full)
    assert main(["train", *TINY, "--checkpoint", str(good), "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "--checkpoint" in err and "No space left on device" in err and "Traceback" not in err
    assert good.read_bytes() == before
    import normlab._files as files

    monkeypatch.setattr(files, "write_json", full)
    assert main(["train", *TINY, "--json", str(tmp_path / "r.json")]) == 1
    captured = capsys.readouterr()
    assert "--json" in captured.err and "No space left on device" in captured.err
    assert captured.out.strip().splitlines()[-1].startswith("validation loss")  # the run is shown
