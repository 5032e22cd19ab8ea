"""The bounds of KAI's PodGroup CRD as an API server enforces them, before any webhook: a PodGroup whose
``spec.minMember`` or ``spec.minSubGroup`` (or a SubGroup's) is below the schema's ``minimum`` is refused with 422
and the API server's own message. The minima per KAI CRD folder are the schemas' (``../shared/crds``);
tests/support/test_known_bugs.py checks this table against those schemas where they are present."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from tests.fakes.kube import FakeKube

#: ``spec.minMember`` and ``spec.minSubGroup``'s ``minimum`` per KAI CRD folder (``Combination.kai.crds``): 1 where
#: KAI #1944 is, 0 where #1989 (or its backport) is.
ROOT_MINIMUM = {
    "kai-scheduler/v0.16.8": 1,
    "kai-scheduler/v0.17.0": 1,
    "kai-scheduler/main-2026-08-07": 0,
    "kai-scheduler/v0.17-branch-2026-08-07": 0,
}
#: A SubGroup's ``minMember`` and ``minSubGroup``: 0 in every folder above.
SUBGROUP_MINIMUM = 0
FIELDS = ("minMember", "minSubGroup")


@dataclass
class PodGroupBounds:
    crds: str  # a key of ROOT_MINIMUM

    def install(self, fake: FakeKube) -> PodGroupBounds:
        fake.admission.append(self.admit)
        return self

    def admit(self, operation: str, obj: dict, dry_run: bool) -> None:
        if obj.get("kind") != kinds.POD_GROUP.kind:
            return
        spec = obj.get("spec") or {}
        below = [(f"spec.{f}", spec[f], ROOT_MINIMUM[self.crds]) for f in FIELDS if spec.get(f) is not None]
        for i, sub in enumerate(spec.get("subGroups") or []):
            below += [(f"spec.subGroups[{i}].{f}", sub[f], SUBGROUP_MINIMUM) for f in FIELDS if sub.get(f) is not None]
        found = [
            f"{path}: Invalid value: {value}: {path} in body should be greater than or equal to {floor}"
            for path, value, floor in below
            if value < floor
        ]
        if found:
            listed = found[0] if len(found) == 1 else f"[{', '.join(found)}]"
            name = obj["metadata"]["name"]
            raise errors.Invalid(f"{operation} PodGroup {name}", 422, "Invalid",
                                 f'PodGroup.scheduling.run.ai "{name}" is invalid: {listed}')  # fmt: skip
