"""The typed views of API objects (fixtures/kube/api_views.py) give the type checker of .ci/run a place to catch a field
read as if it were always there, the defect that killed the first install on real kind (``status.conditions`` of a
new CRD, tests/kube/test_api_nulls.py); and they name fields the upstream PodGroup schema has.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest
import yaml
from mypy import api as mypy_api

from kai_conformance.fixtures.kube import api_views

REPO = Path(__file__).resolve().parents[2]

#: Reads of views; each line marked ``# error`` assumes a field is there and must fail the type check, the others
#: are the suite's ways of reading and must pass.
READS = """
from typing import Any

from kai_conformance.fixtures.kube import api_views


def established(obj: dict[str, Any]) -> bool:
    crd = api_views.crd(obj)
    conditions = crd.get("status", {}).get("conditions")
    ok = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions or [])
    return ok or any(c.get("type") == "Established" for c in conditions)  # error


def phase(obj: dict[str, Any]) -> str:
    status = api_views.pod(obj).get("status", {})
    started = [s.get("state", {}).get("running", {}).get("startedAt") for s in status.get("containerStatuses") or []]
    first = status.get("containerStatuses")[0]  # error
    return (status.get("phase") or "not started") + str(started) + status.get("phase").lower()  # error


def minimum(obj: dict[str, Any]) -> int:
    spec = api_views.podgroup(obj).get("spec", {})
    leaves = [g.get("minMember", 1) for g in spec.get("subGroups", [])]
    return (spec.get("minMember") or sum(leaves)) + spec.get("minMember")  # error


def unschedulable(obj: dict[str, Any]) -> bool:
    status = api_views.podgroup(obj).get("status", {})
    return any(c.get("status") == True for c in status.get("schedulingConditions", []))  # error


def typo(obj: dict[str, Any]) -> str:
    return api_views.pod(obj).get("status", {}).get("phases") or "not started"  # error
"""


def test_the_type_checker_catches_a_field_read_as_if_it_were_always_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = tmp_path / "reads.py"
    reads.write_text(READS)
    monkeypatch.chdir(REPO)  # the configuration's mypy_path (src/) is relative to the clone
    stdout, stderr, _ = mypy_api.run([str(reads), "--config-file", str(REPO / "pyproject.toml"), "--no-pretty"])
    # by file name: mypy's cache replays an unchanged module's errors under the path it first had
    flagged = {int(m.group(1)) for m in re.finditer(r"^\S*\breads\.py:(\d+): error:", stdout, re.M)}
    marked = {number for number, line in enumerate(READS.splitlines(), 1) if line.endswith("# error")}
    assert marked, "the marked reads"
    assert flagged == marked, stdout + stderr


def _typeddict_fields(view: Any) -> dict[str, Any]:
    return get_type_hints(view) if typing.is_typeddict(view) else {}


def _unknown_fields(view: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Fields of ``view`` (recursively, through lists) that ``schema`` does not list."""
    unknown = []
    properties = schema.get("properties", {})
    for name, annotation in _typeddict_fields(view).items():
        if name not in properties:
            unknown.append(f"{path}.{name}")
            continue
        field_schema, inner = properties[name], annotation
        if get_origin(annotation) is list:
            field_schema, inner = field_schema.get("items", {}), get_args(annotation)[0]
        if typing.is_typeddict(inner):
            unknown += _unknown_fields(inner, field_schema, f"{path}.{name}")
    return unknown


def test_the_podgroup_view_names_only_fields_of_the_upstream_schema(schema_root: Path) -> None:
    crds = sorted(schema_root.glob("kai-scheduler/*/scheduling.run.ai_podgroups.yaml"))
    assert crds, f"no PodGroup CRD under {schema_root}/kai-scheduler"
    for path in crds:
        crd = yaml.safe_load(path.read_text())
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2alpha2")
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        for part, view in (("spec", api_views.PodGroupSpec), ("status", api_views.PodGroupStatus)):
            assert _unknown_fields(view, schema[part], part) == [], path
