"""Shared fixtures of the self-tests: the fake API, fast timeouts and polling, the upstream CRD schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.fixtures import errors, waits
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites.support import shipped_runtimes
from tests import crd_schemas, flows, upstream
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


def _no_network(url: str, timeout: float) -> str:
    raise errors.InfrastructureError(f"the self-tests fetch nothing: {url}")


@pytest.fixture(autouse=True)
def _runtimes_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trainer's runtimes come from the shared upstream copies or the tests' own files, never from GitHub."""
    monkeypatch.setattr(shipped_runtimes, "FETCH", _no_network)


@pytest.fixture(scope="session")
def upstream_runtimes() -> Path:
    """Trainer v2.3.0's shipped runtime files (the shared upstream copy); skips (fails under
    KAI_CONFORMANCE_REQUIRE_CRDS=1) when absent."""
    return upstream.required(upstream.TRAINER_RUNTIMES)


@pytest.fixture
def flow(fast_timeouts: TimeoutPolicy, monkeypatch: pytest.MonkeyPatch):
    """``flow(faults=None, layout=...)`` → a :class:`tests.flows.Harness` on its own simulated cluster; at the end
    every workspace must have cleaned up everything it made."""
    yield from flows.flow_fixture(fast_timeouts, monkeypatch)
