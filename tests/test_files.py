"""normlab._files: atomic writes keep modes and links, refuse non-regular targets, and JSON has one
convention for non-finite numbers."""

import json
import math
import os
import stat

import numpy as np
import pytest

from normlab import _files


def test_new_file_follows_umask_and_replaced_file_keeps_its_mode(tmp_path):
    old = os.umask(0o027)
    try:
        path = _files.atomic_write(tmp_path / "a.txt", "one")
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)
    os.chmod(path, 0o604)
    _files.atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o604
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left


def test_a_symlink_is_written_through(tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _files.write_json(link, {"x": 1})
    assert link.is_symlink()
    assert json.loads(target.read_text()) == {"x": 1}


@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_a_non_regular_target_is_refused_and_kept(tmp_path, kind):
    path = tmp_path / "out"
    if kind == "dir":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(ValueError, match=r"--json.*(directory|FIFO)"):
        _files.atomic_write(path, "x", what="--json")
    assert path.is_dir() if kind == "dir" else stat.S_ISFIFO(path.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "keep.bin"
    path.write_bytes(b"good")

    def boom(f):
        f.write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        _files.atomic_write(path, boom)
    assert path.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.bin"]


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"--out.*does not exist"):
        _files.check_output_path(tmp_path / "nope" / "x.json", what="--out")


def test_json_nonfinite_round_trip(tmp_path):
    path = _files.write_json(
        tmp_path / "r.json",
        {
            "a": np.float32(np.inf),
            "b": [np.nan, -np.inf, 1.5],
            "c": np.arange(2),
            "d": np.bool_(True),
        },
    )
    data = _files.read_json(path)
    assert data == {"a": "inf", "b": ["nan", "-inf", 1.5], "c": [0, 1], "d": True}
    assert _files.number(data["a"]) == math.inf and math.isnan(_files.number(data["b"][0]))
    for bad in ("fast", None, True, {}):
        with pytest.raises(ValueError):
            _files.number(bad)


def test_read_json_refuses_damaged_big_and_odd_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        _files.read_json(bad)
    with pytest.raises(ValueError, match="at most 4 are read"):
        _files.read_json(bad, max_bytes=4)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO"):
        _files.read_json(fifo)  # refused without opening it: reading would block forever
    with pytest.raises(ValueError, match="does not exist"):
        _files.read_json(tmp_path / "missing.json")


def test_outputs_never_name_an_input_or_each_other(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text("abc")
    link = tmp_path / "alias.txt"
    link.symlink_to(data)
    with pytest.raises(ValueError, match="--json and --data-path"):
        _files.check_distinct({"--json": link}, {"--data-path": data})
    with pytest.raises(ValueError, match="--checkpoint and --json"):
        _files.check_distinct({"--json": tmp_path / "x", "--checkpoint": tmp_path / "x"})
    _files.check_distinct({"--json": tmp_path / "x", "--checkpoint": None}, {"--data-path": data})


def test_a_writer_that_takes_a_file_name_gets_the_same_guarantees(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    _files.atomic_write_file(path, lambda name: open(name, "wb").write(b"new"))
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640

    def boom(name):
        open(name, "wb").write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        _files.atomic_write_file(path, boom)
    assert path.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["w.bin"]
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="is a FIFO"):
        _files.atomic_write_file(tmp_path / "fifo", boom)

