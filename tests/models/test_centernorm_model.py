"""The centering-only norm in the whole model: every placement that takes a norm passes the
model's float64 gradcheck with norm='centernorm', and normlab train runs with it."""

import pytest
from test_gpt import check_gradients, make

from normlab.lab.cli import main as cli


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich"])
def test_gradcheck_with_the_centering_norm(placement):
    model, idx, targets = make({}, placement=placement, norm="centernorm")
    check_gradients(model, idx, targets)


def test_normlab_train_runs_it(tmp_path):
    out = tmp_path / "run.json"
    rc = cli(["train", "--steps", "3", "--depth", "2", "--width", "16", "--heads", "2",
              "--batch", "2", "--seq", "8", "--eval-interval", "3", "--eval-batches", "1",
              "--quiet", "--json", str(out), "--norm", "centernorm"])
    assert rc == 0 and out.exists()
