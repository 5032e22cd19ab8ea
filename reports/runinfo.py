"""What one run was: versions, cluster, GPU topology, what was installed, how it ended.

The main process writes it at the end of the run (``<report dir>/.state/run.json``); the reports show it in
their environment sections and merging uses it to tell runs apart.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
COMPONENTS = (("kai", "KAI Scheduler"), ("trainer", "Kubeflow Trainer"), ("jobset", "JobSet"))
#: What :meth:`RunInfo.component_versions` and the environment's own rows already say of the stack record.
_SHOWN_PER_COMPONENT = ("version", "version_source", "established")
_SHOWN_IN_OWN_ROWS = ("nodes", "topology", "node_image_pin", "node_image_requested")


@dataclass(frozen=True)
class ComponentVersion:
    """A component's version as the run knew it, and how: ``detected`` (from an image tag), ``declared`` (by an
    option or the default combination, when nothing on the cluster names it) or ``installed`` (by this run);
    ``source`` is empty when the run did not record it (it never provisioned, or predates the record)."""

    component: str
    name: str
    version: str
    source: str = ""
    established: str = ""  # in words: "detected from image …", "declared by --kai-version v0.17.0", …

    @property
    def text(self) -> str:
        """``v0.17.0 (declared by --kai-version v0.17.0)``."""
        return f"{self.version} ({self.established})" if self.established else self.version

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class RunInfo:
    run_id: str
    started: float | None = None  # seconds since the epoch
    finished: float | None = None
    combination: str = ""
    versions: dict[str, str] = field(default_factory=dict)  # kai, trainer, jobset, kubernetes (as requested)
    kubernetes_server: str = ""  # gitVersion the API server reported, when a case saw it
    cluster: dict[str, Any] = field(default_factory=dict)  # provider, name, created_by_run, kept
    topology: str = ""
    gpus: dict[str, int] = field(default_factory=dict)  # node → GPUs
    stack: dict[str, Any] = field(default_factory=dict)  # what was installed (ClusterState.stack)
    sources: dict[str, str] = field(default_factory=dict)  # PR sources the stack was installed from
    command: list[str] = field(default_factory=list)
    exit_status: int | None = None
    interrupted: bool = False
    #: Why the run's cluster could not be provisioned (the one message that names the cause and the fix); "" when it
    #: was, or when provisioning was only interrupted (then the run is ``interrupted``).
    not_provisioned: str = ""
    #: Cases of an interrupted run that finished on an xdist worker after pytest stopped counting: their records
    #: exist but the report leaves them out of its counts, so they agree with pytest's summary line.
    uncounted: list[str] = field(default_factory=list)
    collection_errors: int = 0
    leftovers: list[str] = field(default_factory=list)
    #: The suite's API requests, memory and CPU, and its share of the API server's requests (reports/sections/apiload.py).
    api_load: dict[str, Any] = field(default_factory=dict)
    #: Versions the expectation tables do not know, each with the version whose expectations it assumed.
    assumptions: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return max(0.0, self.finished - self.started)

    def component_versions(self) -> list[ComponentVersion]:
        """Each component's version and how it was established, from the stack record (else as requested)."""
        components = (self.stack or {}).get("components") or {}
        found = []
        for key, name in COMPONENTS:
            record = components.get(key) if isinstance(components.get(key), dict) else {}
            version = str(record.get("version") or self.versions.get(key, ""))
            if version:
                found.append(ComponentVersion(key, name, version, str(record.get("version_source", "")),
                                              str(record.get("established", ""))))  # fmt: skip
        return found

    def installed_details(self) -> list[tuple[str, str]]:
        """The stack record's other facts as readable rows (``KAI Scheduler chart``, ``Install mode``); what the
        environment section shows in rows of its own (component versions, nodes, topology) is left out."""
        names = dict(COMPONENTS)
        rows = []
        for key, value in flatten(self.stack or {}).items():
            parts = key.split(".")
            if parts[0] == "components" and len(parts) > 2:
                if len(parts) == 3 and parts[2] in _SHOWN_PER_COMPONENT:
                    continue
                label = f"{names.get(parts[1], parts[1])} " + " ".join(parts[2:])
            elif parts[0] in _SHOWN_IN_OWN_ROWS:
                continue
            else:
                label = {"mode": "install mode"}.get(key, " ".join(parts))
            label = label.replace("_", " ")
            rows.append((label[:1].upper() + label[1:], value))
        return rows

    @property
    def nodes(self) -> str:
        """What the cluster's nodes run, read from the cluster (``kindest/node:v1.34.12 · kubelet v1.34.12 ·
        containerd://1.6.20 · 4 nodes``), with the suite's pin named only when it is not what runs; "" when the
        run did not read them."""
        running = (self.stack or {}).get("nodes") or {}
        if not running:
            return ""
        parts = [running.get("image", ""), f"kubelet {running['kubelet']}" if running.get("kubelet") else "",
                 running.get("container_runtime", ""), f"{running['count']} nodes" if running.get("count") else ""]  # fmt: skip
        text = " · ".join(str(p) for p in parts if p) or "unknown"
        pin, requested = (self.stack or {}).get("node_image_pin"), (self.stack or {}).get("node_image_requested")
        if requested and running.get("image") == requested:
            text += f" (--node-image; the suite's pin for this minor is {pin})"
        elif pin and running.get("image") and pin != running["image"]:
            text += f" (the suite's pin for this minor, {pin}, is not what runs)"
        overrides = (self.stack or {}).get("kubelet_overrides") or {}
        if overrides:
            text += " · kubelet configuration changed by the suite: " + ", ".join(
                f"{key}: {str(value).lower()}" for key, value in sorted(overrides.items())
            )
        return text

    @property
    def kubernetes(self) -> str:
        """The server's version when known, else the requested minor."""
        return self.kubernetes_server or self.versions.get("kubernetes", "")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunInfo:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})

    def save(self, state_dir: Path) -> Path:
        state_dir.mkdir(parents=True, exist_ok=True)
        path = state_dir / RUN_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, state_dir: Path) -> RunInfo | None:
        path = state_dir / RUN_FILE
        if not path.is_file():
            return None
        return cls.from_json(json.loads(path.read_text()))


def gpu_topology(gpus: dict[str, int]) -> str:
    """``8 GPUs on 2 nodes (w1: 4, w2: 4)``."""
    if not gpus:
        return "unknown"
    total = sum(gpus.values())
    nodes = ", ".join(f"{node}: {count}" for node, count in sorted(gpus.items()))
    return f"{total} GPU{'s' if total != 1 else ''} on {len(gpus)} node{'s' if len(gpus) != 1 else ''} ({nodes})"


def flatten(data: Any, prefix: str = "", limit: int = 240) -> dict[str, str]:
    """Nested dicts/lists as dotted keys → short strings (for environment tables)."""
    out: dict[str, str] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key), limit))
    elif isinstance(data, list) and all(not isinstance(v, (dict, list)) for v in data):
        text = ", ".join(str(v) for v in data)
        out[prefix] = text if len(text) <= limit else text[: limit - 1] + "…"
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out.update(flatten(value, f"{prefix}[{index}]", limit))
    else:
        text = "" if data is None else str(data)
        out[prefix] = text if len(text) <= limit else text[: limit - 1] + "…"
    return out
