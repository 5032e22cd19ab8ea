"""Shared fixtures of the self-tests: the fake API, fast timeouts and polling, the upstream CRD schemas."""

from __future__ import annotations

import functools
import gc
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from kai_conformance.fixtures import errors, waits
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites.support import shipped_runtimes
from tests import crd_schemas, flows, upstream
from tests.fakes.kube import FakeKube

#: The bytecode cache of the self-tests when the environment writes none (:func:`_cache_bytecode`).
PYCACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kai-conformance" / "pycache"


def pytest_configure(config: pytest.Config) -> None:
    _cache_bytecode()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every module is imported now, and lives as long as the process: out of the garbage collector's sight, a full
    collection (one every few seconds of a run, and two at the end of each in-process pytest run) walks only what the
    tests made, not the hundred thousand objects of the modules."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """mypy's API, run in process (test_api_views.py), thaws every frozen object at the end of its build: frozen
    again at the end of the module that did it."""
    module = getattr(item, "module", None)
    if nextitem is not None and getattr(nextitem, "module", None) is not module and not gc.get_freeze_count():
        gc.collect()
        gc.freeze()


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``-n`` without ``--dist``: xdist's load scheduling, in chunks that end at a module's end (:class:`_WholeModules`)."""
    from xdist.scheduler import LoadScheduling

    if config.getvalue("dist") != "load" or not hasattr(LoadScheduling, "_send_tests"):
        return None

    class _WholeModules(LoadScheduling):
        """Sends each worker whole modules: split between the workers, a module ran its module-scoped fixtures on both,
        among them reports/test_run.py's suite run (three processes, 3 s of CPU) and test_cli.py's collections."""

        @functools.cached_property
        def _module(self) -> list[str]:
            assert self.collection is not None  # sends begin once every worker has collected
            return [nodeid.split("::", 1)[0] for nodeid in self.collection]

        def _send_tests(self, node: object, num: int) -> None:
            module = self._module
            num = min(num, len(self.pending))
            while 0 < num < len(self.pending) and module[self.pending[num]] == module[self.pending[num - 1]]:
                num += 1
            super()._send_tests(node, num)

    return _WholeModules(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The bytecode of the modules the tests wrote into temporary directories is of no use to a later run."""
    if sys.pycache_prefix == str(PYCACHE) and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(PYCACHE / Path(tempfile.gettempdir()).resolve().relative_to("/"), ignore_errors=True)


def _cache_bytecode() -> None:
    """Where bytecode is not written (PYTHONDONTWRITEBYTECODE, ``python -B``), every process of the self-tests compiled
    the repository's modules afresh: each xdist worker (3 s of its collection), and each ``pytest suites`` or
    ``python -c`` subprocess a test starts (about 1 s apiece), a quarter of the self-tests' CPU time. It is written
    outside the clone instead, in :data:`PYCACHE` (``PYTHONPYCACHEPREFIX``: the source tree gets no
    ``__pycache__``), by this process and every one it starts (the xdist workers start after this hook). A prefix
    the environment names already, with writing off, is left as it is."""
    if not sys.dont_write_bytecode or os.environ.get("PYTHONPYCACHEPREFIX") or sys.pycache_prefix:
        return
    try:
        PYCACHE.mkdir(parents=True, exist_ok=True)
    except OSError:  # nowhere to write: compile as before
        return
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(PYCACHE)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


@pytest.fixture(scope="session", autouse=True)
def _loopback_answers_unbatched() -> Iterator[None]:
    """The loopback API servers of the fakes (tests/fakes/apiserver.py) send an answer's headers and its body as two
    writes; with Nagle's algorithm on, the body waited for the client's delayed ACK of the headers, ~20-40 ms a
    request. TCP_NODELAY (``socketserver.StreamRequestHandler.disable_nagle_algorithm``) sends it at once: the same
    bytes, in the same order, without the wait (the burst tests of test_interruption.py went from ~10 s to ~1 s)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseHTTPRequestHandler, "disable_nagle_algorithm", True)
        yield


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


class SimulatedClock(waits.Clock):
    """The waits' clock for a simulated cluster whose controllers act on every API call: a sleep between two looks
    advances it at once and nothing else does, so a wait of T seconds is T / interval looks whatever the machine is
    doing (a hold that must outlast three refusals of the simulated KAI failed with a busy machine's slow polls)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def simulated_waits(monkeypatch: pytest.MonkeyPatch) -> SimulatedClock:
    """The waits run on a :class:`SimulatedClock` (fixtures/waits.py ``CLOCK``); only for flows whose controllers run
    before every API call, not in a thread of their own (a sleep that takes no time would starve that thread)."""
    clock = SimulatedClock()
    monkeypatch.setattr(waits, "CLOCK", clock)
    return clock


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """A SIGINT raises KeyboardInterrupt in the main thread during the test, whatever this process inherited: a shell
    that starts a command in the background (``.ci/run &``, a job runner without job control) hands it SIGINT
    ignored, Python then installs no handler, and a test that sends itself a Ctrl-C would see nothing happen."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


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
