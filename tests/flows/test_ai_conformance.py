"""The AI conformance suite end to end on the simulated cluster (harness: tests/flows/__init__.py), and what the report makes
of it: on a sound stack every case passes and its requirement is met; a KAI that places gangs partially fails the
negative gang case and a webhook that admits everything fails the webhook cases, and each turns its requirement
"not met", naming the case that saw it (reports/sections/ai_conformance.py)."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionViolated
from kai_conformance.reports.categories import PRODUCT
from kai_conformance.reports.model import RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import ai_conformance
from kai_conformance.suites import test_ai_conformance as suite
from kai_conformance.suites.support.cases.ai_conformance import WEBHOOKS
from tests.fakes.controllers import Faults
from tests.fakes.webhooks import Webhooks
from tests.flows import Harness
from tests.flows.test_lifecycle import lifecycle

MODULE = "suites/test_ai_conformance.py"


def record_of(h: Harness, function: str, param: str, outcome: str, message: str = "") -> CaseRecord:
    """The record the plugin would write for the case just run (its verdicts, the outcome it ended with)."""
    record = h.record.record
    record.nodeid, record.area, record.markers = f"{MODULE}::{function}[{param}]", "ai_conformance", ["ai_conformance"]
    record.outcome, record.failure_kind, record.message, record.run_id = (
        outcome,
        PRODUCT if outcome == "failed" else "",
        message,
        "r1",
    )
    record.versions = {"kai": "v0.17.0", "kubernetes_server": "v1.35.5"}
    return record


def rows_of(*records: CaseRecord) -> dict[str, ai_conformance.Row]:
    report = build([RunRecords(RunInfo(run_id="r1", kubernetes_server="v1.35.5"), list(records))])
    [section] = ai_conformance.of_report(report)
    return {row.requirement.id: row for row in section.rows}


def test_the_gang_cases_pass_and_clean_up_on_a_sound_kai(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    suite.test_gang_scheduling_positive_n_co_scheduled_pods_all_run_and_the_trainjob_completes(
        suite.POSITIVE[0], **h.args()
    )
    seen = h.verdicts()
    for detector in ("gang-bound", "running", "trainjob-complete", "pods-ended", "queue-released", "nothing-left"):
        assert seen.get(detector) is True, (detector, seen)
    h2 = lifecycle(flow, monkeypatch)
    suite.test_gang_scheduling_negative_room_for_fewer_than_n_pods_runs_no_pod(suite.NEGATIVE[0], **h2.args())
    assert h2.verdicts()["gang-held"] is True and h2.verdicts()["nothing-left"] is True


def test_a_kai_that_places_gangs_partially_fails_the_negative_case_and_gang_scheduling_is_not_met(
    flow, monkeypatch
) -> None:
    h = lifecycle(flow, monkeypatch, Faults(partial_gangs=True))
    test = suite.test_gang_scheduling_negative_room_for_fewer_than_n_pods_runs_no_pod
    with pytest.raises(ConditionViolated) as raised:
        test(suite.NEGATIVE[0], **h.args())
    assert "although the gang must not be placed" in str(raised.value)
    message = "\n".join(f"E   {line}" for line in str(raised.value).splitlines())
    failed = record_of(h, test.__name__, suite.NEGATIVE[0].id, "failed", message)
    positive = record_of(
        lifecycle(flow, monkeypatch),
        suite.test_gang_scheduling_positive_n_co_scheduled_pods_all_run_and_the_trainjob_completes.__name__,
        "p",
        "passed",
    )
    row = rows_of(failed, positive)["gang_scheduling"]
    assert row.status == ai_conformance.NOT_MET
    assert [c.record.nodeid for c in row.deciding] == [failed.nodeid]
    assert "bound or Running: violated after" in row.reason


def test_the_robust_controller_cases_pass_on_a_sound_stack(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    hooks = Webhooks(h.fake).install()
    for component in suite.CONTROLLERS:
        suite.test_robust_controller_controllers_run_and_their_crds_are_registered(
            component, h.fake, h.timeouts, h.record
        )
    for case in WEBHOOKS:
        suite.test_robust_controller_webhook_refuses_an_invalid_object(case, h.fake, h.record)
    suite.test_robust_controller_reconciled_a_valid_trainjob_into_jobset_jobs_and_pods(suite.RECONCILED[0], **h.args())
    hooks.remove()
    verdicts = [(v.detector, v.ok) for v in h.record.record.verdicts]
    assert verdicts.count(("controllers-running", True)) == 2
    assert verdicts.count(("webhook-rejects-invalid", True)) == 3
    assert ("trainjob-reconciled+running", True) in verdicts and ("nothing-left", True) in verdicts


def test_a_webhook_that_admits_everything_fails_its_case_and_robust_controller_is_not_met(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    hooks = Webhooks(h.fake, admit_everything=True).install()
    test = suite.test_robust_controller_webhook_refuses_an_invalid_object
    with pytest.raises(AssertionError, match=r"must refuse an invalid PodGroup .* an invalid PodGroup was admitted"):
        test(WEBHOOKS[2], h.fake, h.record)
    hooks.remove()
    failed = record_of(h, test.__name__, "podgroup", "failed", "E   AssertionError: webhook-rejects-invalid")
    row = rows_of(failed)["robust_controller"]
    assert row.status == ai_conformance.NOT_MET and [c.record.nodeid for c in row.deciding] == [failed.nodeid]


def test_a_controller_pod_that_is_not_running_fails_its_case(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    hooks = Webhooks(h.fake).install()
    trainer = h.fake.get(kinds.DEPLOYMENT, "kubeflow-trainer-controller-manager", "kubeflow-system")
    h.fake.store.pop(hooks.pod_key(trainer))  # its pod gone: the Deployment still says Available
    with pytest.raises(AssertionError, match="Available but no pod of it Running"):
        suite.test_robust_controller_controllers_run_and_their_crds_are_registered(
            "trainer", h.fake, h.timeouts, h.record
        )
    hooks.remove()


def test_the_gpu_sharing_case_is_the_sharing_areas_step() -> None:
    assert suite.sharing is suite.sharing_area.sharing
    assert suite.FRACTIONS == suite.sharing_area.SHARING
