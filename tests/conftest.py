"""Shared fixtures of the self-tests: the fake API, fast timeouts and polling, the upstream CRD schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.fixtures import waits
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests import crd_schemas, flows
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


@pytest.fixture(scope="session")
def schema_root() -> Path:
    """Where the upstream CRD schemas are; skips (fails under KAI_CONFORMANCE_REQUIRE_CRDS=1) when there are none."""
    root = crd_schemas.crds_root()
    if root is None or not root.is_dir():
        reason = f"no upstream CRD schemas found ({crd_schemas.FETCH_HINT})"
        if crd_schemas.schemas_required():
            pytest.fail(f"{crd_schemas.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    return root


@pytest.fixture
def flow(fast_timeouts: TimeoutPolicy, monkeypatch: pytest.MonkeyPatch):
    """``flow(faults=None, layout=...)`` → a :class:`tests.flows.Harness` on its own simulated cluster; at the end
    every workspace must have cleaned up everything it made."""
    yield from flows.flow_fixture(fast_timeouts, monkeypatch)
