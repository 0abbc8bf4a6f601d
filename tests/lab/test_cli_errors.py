"""The command line's last line of defence (issue 28): Ctrl-C, a closed pipe and an exhausted
memory end with one line and the status of the cause, never a traceback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from normlab.lab import cli


def _raising(exc: BaseException):
    def main(args: argparse.Namespace) -> int:
        raise exc

    return main


@pytest.mark.parametrize("exc,status,words", [
    (KeyboardInterrupt(), 130, ["normlab list: interrupted (Ctrl-C) in ", "test_cli_errors",
                                "run the same command again"]),
    (MemoryError(), 1, ["normlab list: error: out of memory", "lower the size flags"]),
])
def test_an_interrupt_or_memory_error_is_one_line_with_a_status(exc, status, words, capsys,
                                                                 monkeypatch):
    import normlab.lab.commands.list as command

    monkeypatch.setattr(command, "main", _raising(exc))
    assert cli.main(["list"]) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert all(w in err for w in words[:1] + words[2:]), err


def test_ctrl_c_during_train_says_where_the_run_can_resume(tmp_path):
    ckpt = tmp_path / "run.npz"
    args = argparse.Namespace(command="train", checkpoint=str(ckpt))
    assert "no checkpoint was written yet" in cli._resume(args)
    ckpt.write_bytes(b"x")
    assert f"normlab train --resume {ckpt} --checkpoint {ckpt}" in cli._resume(args)
    assert "run the same command again to resume" in cli._resume(
        argparse.Namespace(command="report"))


def test_a_closed_pipe_ends_quietly_with_sigpipes_status():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "normlab.lab.cli", "list", "-v"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141), err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
