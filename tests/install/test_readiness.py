"""The readiness probes' invalid objects pass the upstream CRD schemas of every supported version, so a real
API server hands them to the webhook (whose rejection is the proof) instead of refusing them itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters.install.readiness import jobset_probe, podgroup_probe, queue_probe, trainer_probe
from kai_conformance.fixtures.plugin.options import CATALOG
from tests import crd_schemas


def probes_by_component() -> list[tuple[str, dict]]:
    return [("kai", queue_probe().invalid), ("jobset", jobset_probe("registry.k8s.io/pause:3.10").invalid),
            ("trainer", trainer_probe().invalid), ("kai", podgroup_probe().invalid)]  # fmt: skip


@pytest.mark.parametrize(
    ("component", "invalid"), probes_by_component(), ids=["queue", "jobset", "trainjob", "podgroup"]
)
def test_probe_objects_are_schema_valid_for_every_supported_version(
    component: str, invalid: dict, schema_root: Path
) -> None:
    folders = sorted({c.fields["crds"] for c in CATALOG.components[component].values()})
    for folder in folders:
        schemas = crd_schemas.SchemaSet.load([schema_root / folder])
        assert schemas.covers(invalid), f"no schema for {invalid['kind']} in {schema_root / folder}"
        assert schemas.problems(invalid) == [], folder


def test_the_schema_check_rejects_what_the_api_server_would(schema_root: Path) -> None:
    invalid = jobset_probe("registry.k8s.io/pause:3.10").invalid
    invalid["spec"]["replicatedJobs"][0]["dependsOn"][0]["status"] = "Started"  # not Ready|Complete
    problems = crd_schemas.SchemaSet.load([schema_root / "jobset/v0.12.0"]).problems(invalid)
    assert any("'Started' is not one of" in problem for problem in problems)
