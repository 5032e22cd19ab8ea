"""A field the API server sends as ``null`` reads as absent, through every read of the API layer.

On real kind, a CustomResourceDefinition read right after its creation answered ``status.conditions: null`` and
the first install of a fresh cluster died on it (2 of 2 fresh clusters). The fake now answers with the nulls the
real server sends (``tests/fakes/served.py``) and establishes CRDs a few calls late, as the apiextensions
controllers do; these tests fail when the API layer hands a null to its readers.
"""

from __future__ import annotations

import pytest

from kai_conformance.clusters.install.manifests import wait_established
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.kube.wire import without_nulls
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.fakes.installation import SimulatedStack, crd
from tests.fakes.kube import FakeKube

NEW_CRD = crd(kinds.JOB_SET)


def test_without_nulls_drops_null_keys_at_every_depth_and_keeps_everything_else() -> None:
    served = {"status": {"conditions": None, "list": [{"a": None, "b": 0}, None]}, "empty": {}, "flag": False}
    assert without_nulls(served) == {"status": {"list": [{"b": 0}, None]}, "empty": {}, "flag": False}


def test_the_fake_serves_a_new_crd_with_null_conditions_as_the_real_server_does(fake: FakeKube) -> None:
    fake.put(NEW_CRD)
    assert fake._get(kinds.CRD, None, NEW_CRD["metadata"]["name"])["status"]["conditions"] is None


def test_get_list_and_watch_read_a_served_null_as_an_absent_field(fake: FakeKube) -> None:
    name = NEW_CRD["metadata"]["name"]
    _, version = fake.list_versioned(kinds.CRD)
    fake.put(NEW_CRD)
    assert "conditions" not in fake.get(kinds.CRD, name)["status"]
    assert all("conditions" not in c["status"] for c in fake.list(kinds.CRD))
    with fake.watch(kinds.CRD, resource_version=version, timeout_seconds=1) as watch:
        event = next(watch)
    assert "conditions" not in event.obj["status"]


def test_pod_templates_and_events_come_without_their_null_timestamps(fake: FakeKube) -> None:
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"template": {"spec": {"containers": []}}}}  # fmt: skip
    fake.put(job)
    assert fake._get(kinds.JOB, "ns", "j")["spec"]["template"]["metadata"]["creationTimestamp"] is None
    assert fake.get(kinds.JOB, "j", "ns")["spec"]["template"]["metadata"] == {}
    fake.record_event(fake.get(kinds.JOB, "j", "ns"), "Created", "made")
    assert all("eventTime" not in e for e in fake.events("ns"))


@pytest.mark.usefixtures("fast_polling")
def test_a_crd_read_before_it_is_established_is_waited_for_not_a_crash(fake: FakeKube) -> None:
    stack = SimulatedStack(fake, crd_establish_calls=3)
    fake.put(NEW_CRD)
    wait_established(fake, [NEW_CRD["metadata"]["name"]], TimeoutPolicy(0.05), "JobSet")
    assert stack.fake.get(kinds.CRD, NEW_CRD["metadata"]["name"])["status"]["conditions"][0]["type"] == "Established"


@pytest.mark.usefixtures("fast_polling")
def test_a_crd_never_established_ends_in_a_timeout_naming_it(fake: FakeKube) -> None:
    fake.put(NEW_CRD)
    with pytest.raises(errors.WaitTimeout, match="not yet Established: jobsets"):
        wait_established(fake, [NEW_CRD["metadata"]["name"]], TimeoutPolicy(0.01), "JobSet")
