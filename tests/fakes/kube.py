"""An in-memory fake of :class:`fixtures.kube.KubeApi` for the self-tests and the benchmark.

It implements the same public interface as the real client (it subclasses ``KubeApi`` and fills in the I/O
methods), so the ownership guard, selector formatting and error types are the production code. It keeps an
object store with uids and resourceVersions, evaluates label and field selectors, cascades deletion along
ownerReferences (and namespaces), honours finalizers, separates status patches from spec patches, records
events and logs, answers SubjectAccessReviews from a rule table, and can be told to fail (any status, any
operation, N times), to stop serving a kind (CRD missing), to run admission checks (webhooks), and to run
"reactors" on every call (simulated controllers). Every change gets the next resourceVersion and, once a versioned
list or a watch asked for them, goes into a change log that watches read (``tests/fakes/watchlog.py``); objects
changed in place in ``store`` (by a simulated controller or a test) bypass it, as they would bypass an API server.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import itertools
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, Obj, Watch, describe, kinds
from kai_conformance.fixtures.kube.kinds import Kind
from tests.fakes import apimetrics
from tests.fakes.objectdata import deep_merge, field_values, json_patch, merge_patch, parse_selector
from tests.fakes.served import as_served
from tests.fakes.watchlog import ChangeLog, FakeWatch, clone

Key = tuple[str, str, str | None, str]  # apiVersion, kind, namespace, name


@dataclass
class Failure:
    operation: str  # get | list | apply | create | patch | delete | logs | version | any
    status: int
    kind: str | None = None
    name: str | None = None
    times: int = 1
    message: str = "injected failure"


@dataclass
class Call:
    operation: str
    kind: str
    namespace: str | None
    name: str | None
    detail: Any = None


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """One API operation at a time, as an API server serializes writes to one object: the installers run in threads
    (``in_parallel``) and their reactors write while others read. Re-entrant, since reactors call back in."""

    @functools.wraps(method)
    def serialized(self: FakeKube, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return serialized


@dataclass
class FakeKube(KubeApi):
    """See the module docstring. ``clock`` returns the current time (tests may freeze or advance it)."""

    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.timezone.utc))
    git_version: str = "v1.35.0"
    #: Changes a watch can start from (etcd keeps ~5 minutes of history; the fake a number of changes).
    watch_window: int = 10_000
    #: Requests of clients the fake does not simulate, in its /metrics (``tests/fakes/apimetrics.py``).
    other_requests: int = 0

    def __post_init__(self) -> None:
        super().__init__()
        self.lock = threading.RLock()
        self.store: dict[Key, Obj] = {}
        self.served: dict[tuple[str, str], Kind] = dict(kinds.KNOWN)
        self.failures: list[Failure] = []
        self.calls: list[Call] = []
        self.logs: dict[tuple[str, str, str | None], str] = {}
        self.access_rules: set[tuple[str, str, str, str]] = set()  # user, verb, group, resource
        self.admission: list[Callable[[str, Obj, bool], None]] = []
        self.reactors: list[Callable[[FakeKube, Call], None]] = []
        self.resource_version = 0  # the last one given to a change
        self.changes = ChangeLog(self.lock, self.watch_window)
        #: Bumped by every API call, write and removal: readers may keep what they derived from the store until then.
        self.generation = 0
        #: Finer: bumped by every API call (which may change stored objects in place), and per kind by every write
        #: and removal of that kind. What a reader derived from one kind stays valid while both are unchanged.
        self.call_generation = 0
        self.kind_generations: dict[tuple[str, str], int] = {}
        #: The keys stored per kind, and per owner uid the keys of what it owns (a key popped from ``store`` directly
        #: is skipped on read), and the keys of a kind in key order as of a kind generation.
        self._keys_by_kind: dict[tuple[str, str], dict[Key, None]] = {}
        self._keys_by_owner: dict[str, dict[Key, None]] = {}
        self._keys_by_namespace: dict[str, dict[Key, None]] = {}
        #: Where each stored key stands in the store's (insertion) order: a cascade removes dependents in that order.
        self._position: dict[Key, int] = {}
        self._positions = itertools.count()
        self._sorted_keys: dict[tuple[str, str], tuple[int, list[Key]]] = {}

    # ------------------------------------------------------------------------------------------- test API
    def fail(self, operation: str, status: int, *, kind: str | None = None, name: str | None = None,
             times: int = 1, message: str = "injected failure") -> None:  # fmt: skip
        self.failures.append(Failure(operation, status, kind, name, times, message))

    def unserve(self, kind: Kind) -> None:
        """Simulate a missing CRD: every request for ``kind`` answers 404 "resource not found"."""
        self.served.pop((kind.api_version, kind.kind), None)

    def serve(self, kind: Kind) -> None:
        self.served[(kind.api_version, kind.kind)] = kind

    def allow(self, user: str, verb: str, resource: str, group: str = "") -> None:
        self.access_rules.add((user, verb, group, resource))

    def set_logs(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        self.logs[(namespace, pod, container)] = text

    @_serialized
    def record_event(self, involved: Obj, reason: str, message: str, type_: str = "Normal") -> Obj:
        meta = involved["metadata"]
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:8]}", "namespace": meta.get("namespace") or "default"},
            "involvedObject": {"kind": involved["kind"], "name": meta["name"], "namespace": meta.get("namespace"),
                               "uid": meta["uid"], "apiVersion": involved["apiVersion"]},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": self._now(), "lastTimestamp": self._now(),
        }  # fmt: skip
        return self._store(kinds.EVENT, event)

    @_serialized
    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` as is (status included), as a controller would: no guard, no admission."""
        return self._store(self.kind_of(obj), clone(obj))

    @_serialized
    def write(self, obj: Obj) -> None:
        """:meth:`put` without the copy of what was stored (simulated controllers write thousands of objects)."""
        self._store(self.kind_of(obj), clone(obj), answer=False)

    @_serialized
    def objects(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of ``kind`` (in ``namespace``), in key order. Filtered before sorted and
        copied: the simulated controllers list pods many times per API call."""
        return [clone(o) for o in self.stored(kind, namespace)]

    @_serialized
    def stored(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """The stored objects of ``kind`` themselves (in ``namespace``), in key order, for readers that only read
        them (a simulated controller deriving counts): change one and the store changes unseen."""
        wanted = (kind.api_version, kind.kind)
        generation = self.kind_generations.get(wanted, 0)
        cached = self._sorted_keys.get(wanted)
        if cached is None or cached[0] != generation:
            # list() takes the keys in one step under the GIL: installers reconcile from other threads.
            cached = (generation, sorted(list(self._keys_by_kind.get(wanted, ())), key=str))
            self._sorted_keys[wanted] = cached
        return [o for key in cached[1] if (namespace is None or key[2] == namespace)
                and (o := self.store.get(key)) is not None]  # fmt: skip

    @_serialized
    def owned_by(self, kind: Kind, uid: str) -> list[Obj]:
        """The stored objects of ``kind`` whose ownerReferences name ``uid``, in key order (read them only)."""
        keys = [key for key in self._keys_by_owner.get(uid, ()) if key[:2] == (kind.api_version, kind.kind)]
        return [o for key in sorted(keys, key=str) if (o := self.store.get(key)) is not None
                and any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])]  # fmt: skip

    def kind_generation(self, kind: Kind) -> int:
        return self.kind_generations.get((kind.api_version, kind.kind), 0)

    def _changed(self, key: Key) -> None:
        self.generation += 1
        self.kind_generations[key[:2]] = self.kind_generations.get(key[:2], 0) + 1

    @_serialized
    def compact(self) -> None:
        """Forget the change history, as etcd compaction does: watches from any resourceVersion so far get 410 Gone."""
        self.changes.compact(self.resource_version)

    def operations(self, operation: str | None = None) -> list[Call]:
        return [c for c in self.calls if operation is None or c.operation == operation]

    # --------------------------------------------------------------------------------------------- internals
    def _now(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _enter(self, operation: str, kind: Kind | None, namespace: str | None, name: str | None,
               detail: Any = None) -> None:  # fmt: skip
        call = Call(operation, kind.kind if kind else "", namespace, name, detail)
        self.calls.append(call)
        self.generation += 1  # the call may change stored objects in place
        self.call_generation += 1
        for reactor in list(self.reactors):
            reactor(self, call)
        what = describe(kind, name, namespace) if kind else operation
        for failure in self.failures:
            if failure.times <= 0 or failure.operation not in (operation, "any"):
                continue
            if (failure.kind and (kind is None or failure.kind != kind.kind)) or (
                failure.name and failure.name != name
            ):
                continue
            failure.times -= 1
            if failure.status == 0:
                raise errors.Unreachable(f"{operation} {what}", 0, "Unreachable", failure.message)
            from kai_conformance.fixtures.kube import error_for

            details = {"name": name} if failure.status == 404 else {}
            body = {"kind": "Status", "reason": "", "message": failure.message, "details": details}
            import json

            raise error_for(f"{operation} {what}", failure.status, json.dumps(body))
        if kind is not None and (kind.api_version, kind.kind) not in self.served:
            raise errors.KindNotServed(f"{operation} {what}", 404, "NotFound",
                                       "the server could not find the requested resource")  # fmt: skip

    def _key(self, kind: Kind, namespace: str | None, name: str) -> Key:
        return (kind.api_version, kind.kind, namespace if kind.namespaced else None, name)

    def _store(self, kind: Kind, obj: Obj, *, answer: bool = True) -> Obj:
        meta = obj.setdefault("metadata", {})
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", self._now())
        meta["resourceVersion"] = self._next_version()
        key = self._key(kind, meta.get("namespace"), meta["name"])
        self._changed(key)
        prev = self.store.get(key)
        self.store[key] = obj
        self._keys_by_kind.setdefault(key[:2], {})[key] = None
        for ref in meta.get("ownerReferences") or []:
            self._keys_by_owner.setdefault(ref.get("uid"), {})[key] = None
        if prev is None:
            self._position[key] = next(self._positions)
            if key[2] is not None:
                self._keys_by_namespace.setdefault(key[2], {})[key] = None
        self.changes.record(self.resource_version, "MODIFIED" if prev else "ADDED", key, obj, prev)
        return clone(obj) if answer else obj

    def _next_version(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    def _existing(self, kind: Kind, namespace: str | None, name: str, operation: str) -> Obj:
        obj = self.store.get(self._key(kind, namespace, name))
        if obj is None:
            raise errors.NotFound(f"{operation} {describe(kind, name, namespace)}", 404, "NotFound",
                                  f'{kind.resource} "{name}" not found')  # fmt: skip
        return obj

    def _admit(self, operation: str, obj: Obj, dry_run: bool) -> None:
        for check in self.admission:
            check(operation, copy.deepcopy(obj), dry_run)

    # ------------------------------------------------------------------------------------------------ I/O
    @_serialized
    def _get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        self._enter("get", kind, namespace, name)
        return as_served(copy.deepcopy(self._existing(kind, namespace, name, "get")))

    @_serialized
    def _list(self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None) -> list[Obj]:
        self._enter("list", kind, namespace, None, (labels, fields))
        label_match = parse_selector(labels)
        field_match = parse_selector(fields)
        return [
            as_served(o) for o in self.objects(kind, namespace)
            if label_match(o.get("metadata", {}).get("labels") or {}) and field_match(field_values(o))
        ]  # fmt: skip

    @_serialized
    def _list_versioned(
        self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None
    ) -> tuple[list[Obj], str]:
        items = self._list(kind, namespace, labels, fields)
        self.changes.start(self.resource_version)
        return items, str(self.resource_version)

    @_serialized
    def _watch(self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None,
               resource_version: str, timeout_seconds: int) -> Watch:  # fmt: skip
        self._enter("watch", kind, namespace, None, (labels, fields, resource_version))
        self.changes.start(self.resource_version)
        label_match, field_match = parse_selector(labels), parse_selector(fields)
        wanted = (kind.api_version, kind.kind)

        def matches(key: Key, obj: Obj) -> bool:
            return (
                key[:2] == wanted
                and (namespace is None or key[2] == namespace)
                and label_match(obj.get("metadata", {}).get("labels") or {})
                and field_match(field_values(obj))
            )

        return FakeWatch(
            self.changes, matches, resource_version, timeout_seconds, f"watch {describe(kind, None, namespace)}"
        )

    @_serialized
    def _apply(self, kind: Kind, obj: Obj, *, dry_run: bool, force: bool) -> Obj:
        meta = obj["metadata"]
        self._enter("apply", kind, meta.get("namespace"), meta["name"], copy.deepcopy(obj))
        self._check_namespace(kind, meta.get("namespace"))
        current = self.store.get(self._key(kind, meta.get("namespace"), meta["name"]))
        incoming = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
        merged = deep_merge(copy.deepcopy(current), incoming) if current else incoming
        self._admit("apply", merged, dry_run)
        if dry_run:
            return as_served(merged)
        if current is not None and current["metadata"].get("deletionTimestamp"):
            raise errors.Conflict(f"apply {describe(kind, meta['name'], meta.get('namespace'))}", 409, "Conflict",
                                  "object is being deleted")  # fmt: skip
        return as_served(self._store(kind, merged))

    @_serialized
    def _create(self, kind: Kind, obj: Obj, *, dry_run: bool) -> Obj:
        meta = obj.setdefault("metadata", {})
        if kind == kinds.SUBJECT_ACCESS_REVIEW:
            self._enter("create", kind, None, None, copy.deepcopy(obj))
            spec = obj["spec"]
            attrs = spec["resourceAttributes"]
            allowed = (
                spec["user"],
                attrs["verb"],
                attrs.get("group", ""),
                attrs["resource"],
            ) in self.access_rules
            return {**obj, "status": {"allowed": allowed, "reason": "rule table" if allowed else ""}}
        self._enter("create", kind, meta.get("namespace"), meta.get("name"), copy.deepcopy(obj))
        self._check_namespace(kind, meta.get("namespace"))
        if self._key(kind, meta.get("namespace"), meta["name"]) in self.store:
            raise errors.Conflict(f"create {describe(kind, meta['name'], meta.get('namespace'))}", 409,
                                  "AlreadyExists", f'{kind.resource} "{meta["name"]}" already exists')  # fmt: skip
        self._admit("create", obj, dry_run)
        return as_served(copy.deepcopy(obj) if dry_run else self._store(kind, copy.deepcopy(obj)))

    def _check_namespace(self, kind: Kind, namespace: str | None) -> None:
        if kind.namespaced and self._key(kinds.NAMESPACE, None, namespace or "") not in self.store:
            raise errors.NotFound(f"write {kind.kind} in {namespace}", 404, "NotFound",
                                  f'namespaces "{namespace}" not found')  # fmt: skip

    @_serialized
    def _patch(self, kind: Kind, namespace: str | None, name: str, body: Any, content_type: str,
               subresource: str | None) -> Obj:  # fmt: skip
        self._enter("patch", kind, namespace, name, (content_type, subresource, copy.deepcopy(body)))
        current = copy.deepcopy(self._existing(kind, namespace, name, "patch"))
        patched = (
            json_patch(current, body) if content_type == "application/json-patch+json" else merge_patch(current, body)
        )
        if subresource == "status":
            current["status"] = patched.get("status", {})
            result = current
        elif subresource is None:
            patched["status"] = current.get("status", {}) if kind != kinds.NODE else patched.get("status", {})
            result = patched
        else:
            raise errors.KindNotServed(f"patch {name}/{subresource}", 404, "NotFound", "no such subresource")
        result["metadata"]["uid"] = current["metadata"]["uid"]
        stored = self._store(kind, result)
        if not (stored["metadata"].get("finalizers")) and stored["metadata"].get("deletionTimestamp"):
            self._remove(kind, namespace, name)
        return as_served(stored)

    @_serialized
    def _delete(self, kind: Kind, namespace: str | None, name: str, propagation: str) -> None:
        self._enter("delete", kind, namespace, name, propagation)
        obj = self._existing(kind, namespace, name, "delete")
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                prev = clone(obj) if self.changes.recording else None
                obj["metadata"]["deletionTimestamp"] = self._now()
                obj["metadata"]["resourceVersion"] = self._next_version()
                self._changed(self._key(kind, namespace, name))
                self.changes.record(self.resource_version, "MODIFIED", self._key(kind, namespace, name), obj, prev)
            return
        self._remove(kind, namespace, name)

    @_serialized
    def _delete_collection(self, kind: Kind, namespace: str, labels: str | None, propagation: str) -> None:
        """One call, then each match as :meth:`_delete` treats it (a finalized one stays, marked for deletion)."""
        self._enter("deletecollection", kind, namespace, None, (labels, propagation))
        label_match = parse_selector(labels)
        for obj in list(self.stored(kind, namespace)):
            if not label_match(obj["metadata"].get("labels") or {}):
                continue
            key = self._key(kind, namespace, obj["metadata"]["name"])
            stored = self.store.get(key)
            if stored is None:
                continue
            if not stored["metadata"].get("finalizers"):
                self._remove(kind, namespace, obj["metadata"]["name"])
            elif not stored["metadata"].get("deletionTimestamp"):
                prev = clone(stored) if self.changes.recording else None
                stored["metadata"]["deletionTimestamp"] = self._now()
                stored["metadata"]["resourceVersion"] = self._next_version()
                self._changed(key)
                self.changes.record(self.resource_version, "MODIFIED", key, stored, prev)

    @_serialized
    def _remove(self, kind: Kind, namespace: str | None, name: str) -> None:
        """Remove one object and, depth first in store order, everything it owns (and a namespace's objects)."""
        self._cascade(kind, namespace, name)

    def _cascade(self, kind: Kind, namespace: str | None, name: str) -> None:
        key = self._key(kind, namespace, name)
        obj = self.store.pop(key, None)
        if obj is None:
            return
        self._changed(key)
        self._keys_by_kind.get(key[:2], {}).pop(key, None)
        self._keys_by_namespace.get(key[2] or "", {}).pop(key, None)
        self._position.pop(key, None)
        if self.changes.recording:
            gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._next_version()}}
            self.changes.record(self.resource_version, "DELETED", key, gone, obj)
        for dependent in self._dependents(obj["metadata"]["uid"], name if kind == kinds.NAMESPACE else None):
            dep_kind = self.served.get((dependent[0], dependent[1])) or kinds.known(dependent[0], dependent[1])
            if dep_kind is not None and dependent in self.store:
                self._cascade(dep_kind, dependent[2], dependent[3])

    def _dependents(self, uid: str, namespace: str | None) -> list[Key]:
        """What ``uid`` owns and, for a namespace's removal, what is in it, in store order (as a scan meets them)."""
        owned = [key for key in self._keys_by_owner.pop(uid, ()) if (o := self.store.get(key)) is not None
                 and any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])]  # fmt: skip
        if namespace is not None:
            owned = list({*owned, *(k for k in self._keys_by_namespace.pop(namespace, ()) if k in self.store)})
        return sorted(owned, key=lambda key: self._position.get(key, -1))

    @_serialized
    def _pod_logs(self, namespace: str, name: str, container: str | None, since_seconds: int | None,
                  tail_lines: int | None) -> str:  # fmt: skip
        self._enter("logs", kinds.POD, namespace, name, (container, since_seconds, tail_lines))
        self._existing(kinds.POD, namespace, name, "logs")
        text = self.logs.get((namespace, name, container), self.logs.get((namespace, name, None), ""))
        return "\n".join(text.splitlines()[-tail_lines:]) if tail_lines else text

    @_serialized
    def _discover(self, api_version: str, kind: str) -> Kind:
        self._enter("discover", None, None, kind)
        found = self.served.get((api_version, kind))
        if found is None:
            raise errors.KindNotServed(f"discover {kind} ({api_version})", 404, "NotFound", "not served")
        return found

    @_serialized
    def _version(self) -> Obj:
        self._enter("version", None, None, None)
        return {"gitVersion": self.git_version}

    @_serialized
    def _metrics(self) -> str:
        self._enter("metrics", None, None, None)
        plurals = {kind.kind: kind.plural for kind in self.served.values()}
        return apimetrics.render(self.calls, self.other_requests, plurals)
