"""Shared fixtures of the lab's tests."""

import _fake_experiment as fake
import pytest

from normlab.lab import experiments


@pytest.fixture
def with_fake(monkeypatch):
    """The registry with the test-only experiment ``fake`` added (counts its runs; can
    simulate an interruption)."""
    reg = dict(experiments.EXPERIMENTS)
    reg["fake"] = "_fake_experiment"
    monkeypatch.setattr(experiments, "EXPERIMENTS", reg)
    fake.CALLS["n"] = 0
    fake.INTERRUPT["on"] = False
    yield fake
    fake.INTERRUPT["on"] = False
