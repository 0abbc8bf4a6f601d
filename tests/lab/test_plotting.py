"""normlab.lab.plotting: figures are files like any other normlab writes (normlab._files)."""

import os

import pytest


def test_figures_are_written_atomically_and_never_into_a_fifo(tmp_path):
    pytest.importorskip("matplotlib")
    from normlab.lab import plotting

    fig, (ax,) = plotting.figure()
    ax.plot([0, 1], [1, 0])
    os.mkfifo(tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"figure: .* is a FIFO"):
        plotting.save(fig, tmp_path, "a.png")  # refused, never opened: opening a FIFO blocks
    assert plotting.save(fig, tmp_path, "b.png") == "b.png"
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
