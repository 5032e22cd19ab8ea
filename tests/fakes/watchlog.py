"""The in-memory API server's watch support: :class:`ChangeLog` (what etcd's history and the watch cache give a
real API server) and :class:`FakeWatch` (one watch request's stream).

Every change to the store (create/update as ADDED/MODIFIED, removal as DELETED) gets the next resourceVersion and
is kept with the object before and after it. A watch yields the changes after its resourceVersion, in order, and
waits for new ones until its timeout, as the API server does. The log keeps the last ``window`` changes (etcd
compaction): a watch from an older resourceVersion fails with 410 Gone, and so does a watch that falls that far
behind. Recording starts with the first versioned list or watch, so the ~800 self-tests that never watch pay
nothing; a watch from before that point is Gone.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube.watch import Watch, WatchEvent
from tests.fakes.served import as_served

Obj = dict[str, Any]
Key = tuple[str, str, str | None, str]


def clone(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), a few times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


@dataclass(frozen=True)
class Change:
    resource_version: int
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    obj: Obj  # after the change (for DELETED: the last state, at the deletion's resourceVersion)
    prev: Obj | None  # before it (None for ADDED)


class ChangeLog:
    """The changes a watch can still start from. ``lock`` is the fake API server's lock: a watch waits on it."""

    def __init__(self, lock: threading.RLock, window: int) -> None:
        self.window = window
        self.recording = False
        #: A watch from a resourceVersion below this has missed changes the log no longer holds: 410 Gone.
        self.compacted = 0
        #: Bumped by :meth:`compact`: a watch opened before it is told Gone, as by an API server that restarted.
        self.epoch = 0
        self.changed = threading.Condition(lock)
        self._changes: list[Change] = []
        self._versions: list[int] = []

    def start(self, current: int) -> None:
        if not self.recording:
            self.recording, self.compacted = True, current

    def record(self, version: int, type_: str, key: Key, obj: Obj, prev: Obj | None) -> None:
        if not self.recording:
            return
        # ``prev`` is no longer the stored object (replaced or removed), so nothing changes it any more: kept as is.
        self._changes.append(Change(version, type_, key, clone(obj), prev))
        self._versions.append(version)
        excess = len(self._changes) - self.window
        if excess > 0:
            self.compacted = self._versions[excess - 1]
            del self._changes[:excess], self._versions[:excess]
        with self.changed:
            self.changed.notify_all()

    def compact(self, current: int) -> None:
        """Forget every change so far (as etcd compaction and a restarted watch cache do): open watches and watches
        from an older resourceVersion get Gone; a watch from ``current`` (a list's after this) still works."""
        self._changes.clear()
        self._versions.clear()
        self.compacted = current
        self.epoch += 1
        with self.changed:
            self.changed.notify_all()

    def after(self, version: int) -> list[Change]:
        return self._changes[bisect.bisect_right(self._versions, version) :]


class FakeWatch(Watch):
    """One watch: the changes after ``resource_version`` that ``matches`` (key, object) selects, translated as the
    API server's cacher does (``staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go``,
    ``convertToWatchEvent``): an object that starts matching arrives as ADDED, one that stops matching as DELETED
    with its previous state at the change's resourceVersion."""

    def __init__(
        self,
        log: ChangeLog,
        matches: Callable[[Key, Obj], bool],
        resource_version: str,
        timeout_seconds: float,
        operation: str,
    ) -> None:
        super().__init__(resource_version)
        try:
            self._position = int(resource_version)
        except ValueError:
            raise errors.Invalid(
                operation, 400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
            ) from None
        self._log, self._matches, self._operation = log, matches, operation
        self._deadline = time.monotonic() + timeout_seconds
        self._epoch = log.epoch
        self._pending: deque[WatchEvent] = deque()
        self._closed = False

    def _next_event(self) -> WatchEvent:
        while not self._pending:
            with self._log.changed:
                if self._closed:
                    raise StopIteration
                if self._position < self._log.compacted or self._epoch != self._log.epoch:
                    raise errors.Gone(self._operation, 410, "Expired",
                                      f"too old resource version: {self._position} ({self._log.compacted})")  # fmt: skip
                changes = self._log.after(self._position)
                if not changes:
                    remaining = self._deadline - time.monotonic()
                    if remaining <= 0:
                        raise StopIteration
                    self._log.changed.wait(remaining)
                    continue
                for change in changes:
                    event = self._translate(change)
                    if event is not None:
                        self._pending.append(event)
                self._position = changes[-1].resource_version
                self.resource_version = str(self._position)
        event = self._pending.popleft()
        return WatchEvent(event.type, as_served(event.obj))

    def _translate(self, change: Change) -> WatchEvent | None:
        now = self._matches(change.key, change.obj)
        before = change.prev is not None and self._matches(change.key, change.prev)
        if change.type == "DELETED":
            return WatchEvent("DELETED", clone(change.obj)) if now else None
        if now:
            return WatchEvent("MODIFIED" if before else "ADDED", clone(change.obj))
        if before:
            assert change.prev is not None
            gone = clone(change.prev)
            gone["metadata"]["resourceVersion"] = str(change.resource_version)
            return WatchEvent("DELETED", gone)
        return None

    def close(self) -> None:
        with self._log.changed:
            self._closed = True
            self._log.changed.notify_all()
