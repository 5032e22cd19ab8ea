"""Offline validation of rendered objects: upstream CRD OpenAPI schemas (jsonschema) and core-kind structure.

Where the schemas come from: ``$KAI_CONFORMANCE_CRDS/<component crds dir>`` (the ``crds`` entry of each component
in ``clusters/versions.yaml``, e.g. ``kai-scheduler/v0.17.0``); without the variable, ``<repo>/.crds`` when present
(``scripts/fetch_crds.py`` fills it). No schemas at all → the caller skips, unless
``KAI_CONFORMANCE_REQUIRE_CRDS=1`` (CI), which turns the skip into a failure.

The schemas are made strict the way an API server is: an object schema listing ``properties`` accepts no other
field (a structural schema prunes unknown fields, and kubectl's strict field validation rejects them), unless
it says ``x-kubernetes-preserve-unknown-fields``. CEL rules (``x-kubernetes-validations``) are not evaluated; the
few that concern what cases set (TrainJob names) are mirrored in :func:`metadata_problems`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kai_conformance.clusters.catalog import Combination
from kai_conformance.fixtures.kube import kinds

ROOT = Path(__file__).resolve().parent.parent
CRDS_ENV = "KAI_CONFORMANCE_CRDS"
REQUIRE_ENV = "KAI_CONFORMANCE_REQUIRE_CRDS"
REPO_CRDS = ROOT / ".crds"
FETCH_HINT = "set KAI_CONFORMANCE_CRDS to a directory of upstream CRDs, or run `python scripts/fetch_crds.py`"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def crds_root() -> Path | None:
    """The schema directory to use, or None when there is none."""
    configured = os.environ.get(CRDS_ENV)
    if configured:
        return Path(configured)
    return REPO_CRDS if REPO_CRDS.is_dir() else None


def schemas_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


def strict(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema that rejects fields it does not list (see the module docstring)."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@dataclass
class SchemaSet:
    """jsonschema validators per (apiVersion, kind), from the CRD YAMLs of some directories."""

    validators: dict[tuple[str, str], jsonschema.protocols.Validator] = field(default_factory=dict)
    sources: dict[tuple[str, str], Path] = field(default_factory=dict)

    @classmethod
    def load(cls, directories: Iterable[Path]) -> SchemaSet:
        found = cls()
        for directory in directories:
            for key, (validator, path) in _directory_validators(directory.resolve()).items():
                found.validators[key] = validator
                found.sources[key] = path
        return found

    def covers(self, obj: dict[str, Any]) -> bool:
        return (obj.get("apiVersion"), obj.get("kind")) in self.validators

    def problems(self, obj: dict[str, Any]) -> list[str]:
        key = (obj.get("apiVersion", ""), obj.get("kind", ""))
        validator = self.validators[key]
        return [
            f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
            for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        ]


@functools.cache
def _directory_validators(directory: Path) -> dict[tuple[str, str], tuple[jsonschema.protocols.Validator, Path]]:
    """Validators of every CRD version in ``directory`` (parsed once: the CRDs are megabytes of YAML)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found = {}
    for path in sorted(directory.glob("*.yaml")):
        for crd in yaml.load_all(path.read_text(), Loader=loader):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if not version.get("served"):
                    continue  # the API server refuses objects of a version it does not serve
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if schema is not None:
                    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
                    found[(f"{group}/{version['name']}", kind)] = (validator_cls(strict(schema)), path)
    return found


def component_dirs(combination: Combination, root: Path) -> dict[str, Path]:
    """Component name → its schema directory for ``combination`` under ``root``."""
    return {c.name: root / c.crds for c in (combination.kai, combination.trainer, combination.jobset)}


class MissingSchemas(Exception):
    """A schema root exists but lacks a directory a supported combination needs."""


def schemas_for(combination: Combination, root: Path) -> SchemaSet:
    dirs = component_dirs(combination, root)
    missing = {name: path for name, path in dirs.items() if not any(path.glob("*.yaml"))}
    if missing:
        listed = ", ".join(f"{name}: {path}" for name, path in missing.items())
        raise MissingSchemas(f"no CRD YAMLs for {combination.name} ({listed}); {FETCH_HINT}")
    return SchemaSet.load(dirs.values())


# ------------------------------------------------------------------------------------------ core structure
def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"key {key!r}: prefix is not a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return f"key {key!r}: name must be 1-63 alphanumerics, '-', '_' or '.'"
    return None


def metadata_problems(obj: dict[str, Any]) -> list[str]:
    """What an API server would reject in ``metadata``, for any kind."""
    kind = kinds.known(obj.get("apiVersion", ""), obj.get("kind", ""))
    if kind is None:
        return [f"unknown apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')}"]
    meta = obj.get("metadata") or {}
    problems = []
    name = meta.get("name", "")
    name_rule = _DNS_LABEL if kind in (kinds.NAMESPACE,) else _DNS_SUBDOMAIN
    if kind == kinds.TRAIN_JOB:  # the TrainJob CRD's CEL rules: RFC 1035 and at most 63 characters
        name_rule = _RFC1035
    limit = 63 if kind in (kinds.NAMESPACE, kinds.TRAIN_JOB) else 253
    if not name or len(name) > limit or not name_rule.match(name):
        problems.append(f"metadata.name {name!r} is not a valid {kind.kind} name")
    if kind.namespaced and not meta.get("namespace"):
        problems.append("metadata.namespace missing for a namespaced kind")
    if not kind.namespaced and meta.get("namespace"):
        problems.append("metadata.namespace set on a cluster-scoped kind")
    for key, value in (meta.get("labels") or {}).items():
        problem = _label_key_problem(key)
        if problem:
            problems.append(f"metadata.labels {problem}")
        if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME.match(value)):
            problems.append(f"metadata.labels[{key}] value {value!r} is not a valid label value")
    for key, value in (meta.get("annotations") or {}).items():
        problem = _label_key_problem(key)
        if problem:
            problems.append(f"metadata.annotations {problem}")
        if not isinstance(value, str):
            problems.append(f"metadata.annotations[{key}] must be a string")
    return problems


def _containers_problems(pod_spec: Any, where: str) -> list[str]:
    containers = (pod_spec or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        return [f"{where}.containers must be a non-empty list"]
    return [f"{where}.containers[{i}] needs a name and an image" for i, c in enumerate(containers)
            if not c.get("name") or not c.get("image")]  # fmt: skip


def core_problems(obj: dict[str, Any]) -> list[str]:
    """Structural checks for core kinds that no CRD describes (Namespace, Pod, Job, PriorityClass)."""
    kind = obj.get("kind")
    if kind == "PriorityClass" and not isinstance(obj.get("value"), int):
        return ["PriorityClass.value must be an integer"]
    if kind == "Pod":
        return _containers_problems(obj.get("spec"), "spec")
    if kind == "Job":
        return _containers_problems(((obj.get("spec") or {}).get("template") or {}).get("spec"), "spec.template.spec")
    if kind == "Namespace" and set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
        return [
            f"Namespace has unknown top-level fields {sorted(set(obj) - {'apiVersion', 'kind', 'metadata', 'spec'})}"
        ]
    return []
