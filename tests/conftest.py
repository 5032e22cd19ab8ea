"""Shared fixtures of the self-tests: the fake API, a fast timeout policy, a frozen clock."""

from __future__ import annotations

import pytest

from fixtures import waits
from fixtures.waits import TimeoutPolicy
from tests.fakes.kube import FakeKube


@pytest.fixture
def fake() -> FakeKube:
    return FakeKube()


@pytest.fixture
def fast_timeouts() -> TimeoutPolicy:
    """Every budget shrunk so that waits which must time out do so in well under a second."""
    return TimeoutPolicy(scale=0.002)


@pytest.fixture
def fast_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits poll every 10 ms instead of 250 ms: tests of retries and timeouts take milliseconds."""
    monkeypatch.setattr(waits, "POLL_INTERVAL", 0.01)
