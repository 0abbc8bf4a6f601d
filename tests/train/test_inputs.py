"""Inputs the trainer reads are regular files of bounded size: a FIFO, a device or a directory is
refused unread (never a hang), a file over the cap is refused with the cap named."""

import os

import pytest

from normlab.train import TrainConfig
from normlab.train.data import TextSource
from normlab.train.precision import load_policy


def _dir(d):
    (d / "x.json").mkdir()
    return d / "x.json"


def _fifo(d):
    os.mkfifo(d / "x.json")
    return d / "x.json"


@pytest.mark.parametrize("make,message", [
    (_dir, "is a directory; expected a regular file"),
    (_fifo, "is a FIFO; expected a regular file"),
    (lambda d: d / "x.json", "does not exist"),
])
def test_text_and_policy_inputs_that_never_end_are_refused_unread(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(ValueError, match=f"data_path: .*{message}"):
        TextSource.from_file(path)
    with pytest.raises(ValueError, match=f"precision file: .*{message}"):
        load_policy(str(path))


def test_a_device_is_refused_unread():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    with pytest.raises(ValueError, match="is a device"):
        TextSource.from_file("/dev/zero")


def test_a_text_file_over_the_cap_is_refused_with_the_cap(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("ab" * 100)
    with pytest.raises(ValueError, match="has 200 bytes; at most 100 are read"):
        TextSource.from_file(path, max_bytes=100)
    assert TextSource.from_file(path, max_bytes=200).vocab_size == 2


def test_a_data_path_without_data_file_is_refused():
    with pytest.raises(ValueError, match="data_path is read only with data='file'"):
        TrainConfig(data_path="corpus.txt")
