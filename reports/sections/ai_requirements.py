"""The Kubernetes AI Conformance requirements, as facts: each one's id, category and level in each checklist.

Source: the checklists of the CNCF "Certified Kubernetes AI Platform" program, ``conformance-versions/
KubernetesAIConformance-1.33.yaml`` … ``-1.36.yaml`` of kubernetes-sigs/ai-conformance (commit af907ca, 2026-06-11;
summarised in ../shared/reference/ai-conformance.md). The checklists themselves are not copied here: the self-tests
(tests/reports/test_ai_conformance_checklist.py) compare this table and every checklist the suite writes against them.

A requirement the suite judges names the KAR that describes it and the parts its test plan asks for; each part is
one test function of suites/test_ai_conformance.py, named ``test_<requirement id>_<part>_…``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SOURCE = "kubernetes-sigs/ai-conformance conformance-versions/KubernetesAIConformance-<minor>.yaml (commit af907ca)"
#: The minors the program publishes a checklist for (no 1.37 checklist was published in the copy read).
CHECKLIST_MINORS = ("1.33", "1.34", "1.35", "1.36")
#: The checklist's categories, in its order.
CATEGORIES = ("accelerators", "networking", "schedulingOrchestration", "observability", "security", "operator")
#: The fields a vendor fills in each requirement (the checklist's own comment names them), and in its metadata.
VENDOR_FIELDS = ("status", "evidence", "notes")
METADATA_FIELDS = (
    "kubernetesVersion",
    "platformName",
    "platformVersion",
    "vendorName",
    "websiteUrl",
    "repoUrl",
    "documentationUrl",
    "productLogoUrl",
    "description",
    "contactEmailAddress",
)
#: The statuses the checklist's comment allows.
IMPLEMENTED, NOT_IMPLEMENTED, PARTIALLY_IMPLEMENTED, NOT_APPLICABLE = (
    "Implemented",
    "Not Implemented",
    "Partially Implemented",
    "N/A",
)

MUST, SHOULD = "MUST", "SHOULD"


@dataclass(frozen=True)
class Requirement:
    id: str
    category: str
    #: minor → level, for each checklist that holds the requirement.
    levels: dict[str, str]
    #: The KAR that describes it (only for the requirements the suite judges).
    kar: str = ""
    #: The parts of its test plan, each a test function ``test_<id>_<part>_…`` that must pass for it to be met.
    parts: tuple[str, ...] = field(default=())

    @property
    def judged(self) -> bool:
        return bool(self.parts)

    def prefix(self, part: str) -> str:
        return f"test_{self.id}_{part}_"


_EARLY = {"1.33": MUST, "1.34": MUST, "1.35": MUST, "1.36": MUST}
_FROM_1_35 = {"1.35": SHOULD, "1.36": SHOULD}

#: Every requirement of every checklist, in checklist order (category by category).
REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("dra_support", "accelerators", {"1.33": SHOULD, "1.34": MUST, "1.35": MUST}),
    Requirement("driver_runtime_management", "accelerators", dict(_FROM_1_35)),
    Requirement("gpu_sharing", "accelerators", dict(_FROM_1_35), kar="KAR-0003", parts=("fractions",)),
    Requirement("virtualized_accelerator", "accelerators", dict(_FROM_1_35)),
    Requirement("ai_inference", "networking", dict(_EARLY)),
    Requirement("advanced_inference_ingress", "networking", {"1.36": SHOULD}),
    Requirement("high_performance_networking", "networking", {"1.36": SHOULD}),
    Requirement("disaggregated_inference", "networking", {"1.36": SHOULD}),
    Requirement(
        "gang_scheduling", "schedulingOrchestration", dict(_EARLY), kar="KAR-0053", parts=("positive", "negative")
    ),
    Requirement("cluster_autoscaling", "schedulingOrchestration", dict(_EARLY)),
    Requirement("pod_autoscaling", "schedulingOrchestration", dict(_EARLY)),
    Requirement("accelerator_metrics", "observability", dict(_EARLY)),
    Requirement("ai_service_metrics", "observability", dict(_EARLY)),
    Requirement("secure_accelerator_access", "security", dict(_EARLY)),
    Requirement(
        "robust_controller", "operator", dict(_EARLY), kar="KAR-0063", parts=("controllers", "webhook", "reconciled")
    ),
)
BY_ID = {r.id: r for r in REQUIREMENTS}


def _minor_key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest or 0)


def checklist_minor(minor: str) -> str:
    """The checklist for a cluster's minor: its own, else the nearest older one (the oldest for an older cluster)."""
    if minor in CHECKLIST_MINORS:
        return minor
    older = [m for m in CHECKLIST_MINORS if _minor_key(m) <= _minor_key(minor)]
    return older[-1] if older else CHECKLIST_MINORS[0]


def in_checklist(minor: str) -> list[Requirement]:
    """The requirements of one checklist, in its order."""
    return [r for r in REQUIREMENTS if minor in r.levels]


def requirement_of(nodeid: str) -> tuple[Requirement, str] | None:
    """The requirement and part a case of suites/test_ai_conformance.py judges, from its test function's name."""
    function = nodeid.split("[", 1)[0].rsplit("::", 1)[-1]
    for requirement in REQUIREMENTS:
        for part in requirement.parts:
            if function.startswith(requirement.prefix(part)):
                return requirement, part
    return None
