"""The readiness probes' invalid objects pass the upstream CRD schemas of every supported version, so a real
API server hands them to the webhook (whose rejection is the proof) instead of refusing them itself."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jsonschema
import pytest
import yaml

from clusters.install.readiness import jobset_probe, queue_probe, trainer_probe
from fixtures import kinds
from fixtures.options import CATALOG

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Trainer CRDs are large
CRDS = os.environ.get("KAI_CONFORMANCE_CRDS")


@functools.lru_cache
def _crd(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=LOADER)


def schema_for(folder: Path, obj: dict) -> dict:
    kind = kinds.known(obj["apiVersion"], obj["kind"])
    assert kind is not None
    crd = _crd(folder / f"{kind.group}_{kind.plural}.yaml")
    assert crd["spec"]["names"]["kind"] == obj["kind"]
    return next(v for v in crd["spec"]["versions"] if v["name"] == kind.version)["schema"]["openAPIV3Schema"]


def probes_by_component() -> list[tuple[str, dict]]:
    return [("kai", queue_probe().invalid), ("jobset", jobset_probe("registry.k8s.io/pause:3.10").invalid),
            ("trainer", trainer_probe().invalid)]  # fmt: skip


@pytest.mark.skipif(
    not CRDS and not os.environ.get("KAI_CONFORMANCE_REQUIRE_CRDS"), reason="KAI_CONFORMANCE_CRDS unset"
)
@pytest.mark.parametrize(("component", "invalid"), probes_by_component(), ids=["queue", "jobset", "trainjob"])
def test_probe_objects_are_schema_valid_for_every_supported_version(component: str, invalid: dict) -> None:
    assert CRDS, "KAI_CONFORMANCE_CRDS must point at the upstream CRD schemas"
    versions = {c.fields["crds"] for c in CATALOG.components[component].values()}
    for folder in sorted(versions):
        jsonschema.Draft7Validator(schema_for(Path(CRDS) / folder, invalid)).validate(invalid)


@pytest.mark.skipif(not CRDS, reason="KAI_CONFORMANCE_CRDS unset")
def test_the_schema_check_rejects_what_the_api_server_would() -> None:
    invalid = jobset_probe("registry.k8s.io/pause:3.10").invalid
    invalid["spec"]["replicatedJobs"][0]["dependsOn"][0]["status"] = "Started"  # not Ready|Complete
    with pytest.raises(jsonschema.ValidationError, match="'Started' is not one of"):
        jsonschema.Draft7Validator(schema_for(Path(CRDS) / "jobset/v0.12.0", invalid)).validate(invalid)
