"""PodGroups at the API: what KAI's PodGroup CRD (and its validating webhook) lets a workload ask for.

KAI's podgrouper writes every PodGroup a TrainJob gets, and KAI's JobSet grouper refuses
``kai.scheduler/batch-min-member`` below 1, so no TrainJob reaches what is judged here: the case asks the API server
with PodGroups of its own, server-side dry-run in its namespace (nothing is stored, nothing scheduled). Specification:

* The API server judges PodGroups by the CRD at all: ``minMember: -1``, below every version's floor, is refused
  (``podgroup-floor-enforced``); without that an accepted 0 would prove nothing.
* "No gang" is accepted: a flat PodGroup with ``minMember: 0`` and one whose SubGroup sits under ``minSubGroup: 0``
  (``no-gang-podgroup-accepted``, quoting any refusal). A strict xfail where the known-bugs table says KAI has #1944
  (the CRD's ``minimum: 1`` at v0.16.8 and v0.17.0; ``minimum: 0`` from v0.16.9, v0.17.1, and on the read ``main``
  and ``v0.17`` builds), applied only after the floor check held, so the xfail covers only the refusal of 0.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param
from kai_conformance.suites.support.cases.podgrouper import NoGangPodGroupCase
from kai_conformance.suites.support.confirm import confirm
from kai_conformance.suites.support.detectors.podgrouper import no_gang_podgroup_accepted, podgroup_floor_enforced
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.known_bugs import gap

pytestmark = pytest.mark.podgrouper

NO_GANG = [NoGangPodGroupCase()]


@pytest.mark.parametrize("case", [param(c) for c in NO_GANG])
def test_a_podgroup_without_a_gang_is_accepted(
    case: NoGangPodGroupCase,
    request: pytest.FixtureRequest,
    ctx: RenderContext,
    workspace: Workspace,
    expect: Expectations,
    record: CaseRecorder,
) -> None:
    """Dry-run: ``minMember: -1`` refused, then ``minMember: 0`` and ``minSubGroup: 0`` accepted (KAI #1944)."""
    below, asked = case.below_every_floor()
    enforced = podgroup_floor_enforced((below["metadata"]["name"], asked, workspace.dry_run(below)))
    record.verdict(enforced)
    confirm(enforced, f"[{expect.kai.name}] a PodGroup below every floor was accepted: an accepted minMember 0 would "
            "prove nothing. fix: check KAI's PodGroup CRD (`kubectl get crd podgroups.scheduling.run.ai -o yaml`)")  # fmt: skip
    reason = gap("KAI #1944", ctx.combination.kai.version)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, raises=AssertionError, strict=True))
    answers = [(obj["metadata"]["name"], what, workspace.dry_run(obj)) for obj, what in case.no_gang()]
    accepted = no_gang_podgroup_accepted(answers)
    record.verdict(accepted)
    confirm(accepted, f"[{expect.kai.name}] a PodGroup asking for no gang is refused")
