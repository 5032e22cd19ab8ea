"""The API layer's contract, exercised through the fake: guard, selectors, errors, cascade, status, SAR."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import error_for, kinds, label_selector
from kai_conformance.fixtures.ownership import stamp
from tests.fakes.kube import FakeKube


def owned(obj: dict, run: str = "r1") -> dict:
    return stamp(obj, run, "tests/x.py::test_y")


def ns(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def pod(name: str, namespace: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


def test_apply_creates_then_updates_with_uid_and_resource_version(fake: FakeKube) -> None:
    first = fake.apply(owned(ns("a")))
    second = fake.apply(owned({**ns("a"), "metadata": {"name": "a", "labels": {"extra": "1"}}}))
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["labels"]["extra"] == "1"


def test_apply_refuses_objects_without_the_suite_label(fake: FakeKube) -> None:
    with pytest.raises(errors.ForeignObject, match="managed-by label"):
        fake.apply(ns("a"))


def test_modifying_a_foreign_object_is_refused_unless_explicitly_allowed(fake: FakeKube) -> None:
    fake.put(ns("theirs"))
    with pytest.raises(errors.ForeignObject, match="not labelled as the suite's own"):
        fake.patch(kinds.NAMESPACE, "theirs", {"metadata": {"labels": {"x": "y"}}})
    with pytest.raises(errors.ForeignObject):
        fake.delete(kinds.NAMESPACE, "theirs")
    with pytest.raises(errors.ForeignObject):
        fake.apply(owned(ns("theirs")))
    assert fake.find(kinds.NAMESPACE, "theirs") is not None
    fake.patch(kinds.NAMESPACE, "theirs", {"metadata": {"labels": {"x": "y"}}}, allow_foreign=True)
    assert fake.get(kinds.NAMESPACE, "theirs")["metadata"]["labels"] == {"x": "y"}


def test_label_selectors_equality_set_and_existence(fake: FakeKube) -> None:
    fake.apply(owned(ns("a")))
    fake.put(pod("p1", "a", app="x", tier="gpu"))
    fake.put(pod("p2", "a", app="y"))
    fake.put(pod("p3", "a"))
    names = lambda sel: sorted(p["metadata"]["name"] for p in fake.list(kinds.POD, "a", labels=sel))  # noqa: E731
    assert names({"app": "x"}) == ["p1"]
    assert names("app in (x,y)") == ["p1", "p2"]
    assert names("app notin (x)") == ["p2", "p3"]
    assert names("tier") == ["p1"]
    assert names("!app") == ["p3"]
    assert names("app!=x") == ["p2", "p3"]
    assert label_selector({"b": "2", "a": "1"}) == "a=1,b=2"


def test_delete_cascades_along_owner_references_and_namespaces(fake: FakeKube) -> None:
    fake.apply(owned(ns("a")))
    owner = fake.put(owned(pod("owner", "a")))
    child = pod("child", "a")
    child["metadata"]["ownerReferences"] = [{"uid": owner["metadata"]["uid"], "kind": "Pod", "name": "owner"}]
    fake.put(child)
    fake.put(pod("bystander", "a"))
    assert fake.delete(kinds.POD, "owner", "a")
    assert fake.find(kinds.POD, "child", "a") is None
    assert fake.find(kinds.POD, "bystander", "a") is not None
    assert fake.delete(kinds.NAMESPACE, "a")
    assert fake.objects(kinds.POD) == []


def test_delete_of_an_absent_object_reports_false(fake: FakeKube) -> None:
    assert fake.delete(kinds.NAMESPACE, "never-there") is False


def test_finalizers_hold_an_object_in_terminating_until_removed(fake: FakeKube) -> None:
    obj = owned(ns("held"))
    obj["metadata"]["finalizers"] = ["example.com/wait"]
    fake.apply(obj)
    fake.delete(kinds.NAMESPACE, "held")
    assert fake.get(kinds.NAMESPACE, "held")["metadata"]["deletionTimestamp"]
    fake.patch(kinds.NAMESPACE, "held", [{"op": "remove", "path": "/metadata/finalizers"}], patch_type="json")
    assert fake.find(kinds.NAMESPACE, "held") is None


def test_status_patch_changes_only_status(fake: FakeKube) -> None:
    node = fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {}}})
    assert node["status"] == {"capacity": {}}
    fake.patch(
        kinds.NODE,
        "n1",
        [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "4"}],
        patch_type="json",
        subresource="status",
        allow_foreign=True,
    )
    assert fake.get(kinds.NODE, "n1")["status"]["capacity"] == {"nvidia.com/gpu": "4"}


def test_missing_crd_is_reported_as_kind_not_served(fake: FakeKube) -> None:
    fake.unserve(kinds.TRAIN_JOB)
    with pytest.raises(errors.KindNotServed) as missing:
        fake.list(kinds.TRAIN_JOB, "a")
    assert str(missing.value) == (
        "list TrainJob objects in a → 404 NotFound: TrainJob (trainer.kubeflow.org/v1alpha1) is not served by this "
        "cluster; is its CRD installed? (server: the server could not find the requested resource)"
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [(403, errors.Forbidden), (404, errors.NotFound), (409, errors.Conflict), (500, errors.ServerError),
     (422, errors.Invalid), (0, errors.Unreachable)],
)  # fmt: skip
def test_injected_failures_surface_as_typed_errors(fake: FakeKube, status: int, expected: type) -> None:
    fake.fail("get", status, kind="Namespace", message="boom")
    with pytest.raises(expected, match="boom"):
        fake.get(kinds.NAMESPACE, "x")
    assert fake.find(kinds.NAMESPACE, "x") is None  # the failure was used up


def test_error_mapping_keeps_the_servers_message() -> None:
    body = '{"kind":"Status","reason":"Forbidden","message":"admission webhook \\"q\\" denied","details":{}}'
    err = error_for("create Queue q", 403, body)
    assert isinstance(err, errors.Forbidden)
    assert str(err) == 'create Queue q → 403 Forbidden: admission webhook "q" denied'
    assert isinstance(error_for("get x", 404, "404 page not found"), errors.KindNotServed)
    assert isinstance(error_for("get x", 503, ""), errors.ServerError)
    assert error_for("get x", 503, "").transient


def test_events_are_sorted_and_filtered_by_involved_object(fake: FakeKube) -> None:
    fake.apply(owned(ns("a")))
    p1, p2 = fake.put(pod("p1", "a")), fake.put(pod("p2", "a"))
    second = fake.record_event(p1, "Scheduled", "bound")
    fake.record_event(p2, "Unschedulable", "no")
    first = fake.record_event(p1, "Created", "first")
    first["lastTimestamp"] = "2000-01-01T00:00:00Z"
    fake.put(first)
    assert [e["reason"] for e in fake.events("a", involving=p1)] == ["Created", "Scheduled"]
    assert second["involvedObject"]["uid"] == p1["metadata"]["uid"]


def test_access_review_answers_from_rules(fake: FakeKube) -> None:
    user = "system:serviceaccount:kai-scheduler:pod-grouper"
    fake.allow(user, "list", "trainjobs", "trainer.kubeflow.org")
    assert fake.access_review(user, "list", "trainjobs", "trainer.kubeflow.org").allowed
    assert not fake.access_review(user, "delete", "trainjobs", "trainer.kubeflow.org").allowed


def test_kind_names_resolve_and_unknown_names_are_a_usage_error(fake: FakeKube) -> None:
    assert fake.kind_of("TrainJob") is kinds.TRAIN_JOB
    with pytest.raises(errors.UsageError):
        fake.kind_of("Gadget")
    with pytest.raises(errors.UsageError, match="namespaced"):
        fake.get(kinds.POD, "p")
