"""The suite's own cost, reported beside the run: the API requests it sent (by verb and resource, per process),
each process's peak memory and CPU time, and, when the API server lets the suite read ``/metrics``, all the
requests the API server served during the run, so the suite's share of the load is a measured fraction.

Each pytest process (the main one and every xdist worker) writes ``<state dir>/apiload/<process>.json`` at the
end of its session (:func:`write_process`); the main process merges them (:func:`read_processes`) with its two
readings of the API server's ``apiserver_request_total`` into one :class:`ApiLoad`, which the run's
``RunInfo.api_load`` carries into ``run.json``, ``summary.json`` and the HTML and Markdown reports.

The server's count is the sum of every ``apiserver_request_total`` series (all verbs, resources, codes and
clients), leaving out requests to ``/metrics`` itself (a non-resource request is labelled ``resource=""``,
``subresource="<path>"``: k8s.io/apiserver ``pkg/server/healthz/healthz_test.go`` ``TestMetrics``). The API
server counts a request when it completes: a watch still open at the end reading is not in it yet, while the
suite counts a watch when it opens it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

APILOAD_DIR = "apiload"
SERVER_START_FILE = "server-start.json"
METRICS_PATH = "/metrics"
#: The counter the API server keeps of the requests it served (``k8s.io/apiserver/pkg/endpoints/metrics``).
REQUEST_COUNTER = "apiserver_request_total"
VERBS = ("get", "list", "watch", "create", "update", "patch", "apply", "delete")


class MetricsUnreadable(ValueError):
    """The ``/metrics`` text is not Prometheus text, or has no ``apiserver_request_total``."""


def server_request_total(text: str) -> int:
    """The requests the API server counted, from its ``/metrics`` text, leaving out reads of ``/metrics``."""
    from prometheus_client.parser import text_string_to_metric_families

    total, found = 0.0, False
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != REQUEST_COUNTER:
                    continue
                found = True
                labels = sample.labels
                if not labels.get("resource") and labels.get("subresource") == METRICS_PATH:
                    continue
                total += sample.value
    except ValueError as exc:
        raise MetricsUnreadable(f"the API server's /metrics is not Prometheus text: {exc}") from exc
    if not found:
        raise MetricsUnreadable(f"the API server's /metrics has no {REQUEST_COUNTER}")
    return round(total)


@dataclass
class ServerReading:
    """One reading of the API server's request count, or why there is none."""

    requests: int | None = None
    at: float | None = None
    unavailable: str = ""  # the reason, when requests is None
    note: str = ""  # how the reading was obtained, when not read at that moment (e.g. a server started by the run)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ServerReading:
        data = data or {}
        return cls(data.get("requests"), data.get("at"), str(data.get("unavailable", "")), str(data.get("note", "")))


@dataclass
class ProcessLoad:
    """What one pytest process cost: its API requests, peak resident memory and CPU time."""

    process: str  # "main", "gw0", ...
    requests: dict[str, dict[str, int]] = field(default_factory=dict)  # verb → resource → count
    peak_rss_bytes: int = 0
    cpu_seconds: float = 0.0  # user + system of the process itself
    children_cpu_seconds: float = 0.0  # of the CLIs it ran and waited for (kubectl, helm, kind)

    @classmethod
    def from_counts(cls, process: str, counts: Mapping[tuple[str, str], int], **usage: Any) -> ProcessLoad:
        requests: dict[str, dict[str, int]] = {}
        for (verb, resource), count in sorted(counts.items()):
            if count:
                requests.setdefault(verb, {})[resource] = count
        return cls(process, requests, **usage)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessLoad:
        requests = {str(v): {str(r): int(n) for r, n in by.items()} for v, by in (data.get("requests") or {}).items()}
        return cls(str(data.get("process", "")), requests, int(data.get("peak_rss_bytes") or 0),
                   float(data.get("cpu_seconds") or 0.0), float(data.get("children_cpu_seconds") or 0.0))  # fmt: skip

    def total(self) -> int:
        return sum(n for by in self.requests.values() for r, n in by.items() if r != METRICS_PATH)


@dataclass
class ApiLoad:
    """The run's API load and overhead (see the module docstring)."""

    processes: list[ProcessLoad] = field(default_factory=list)
    server_start: ServerReading = field(default_factory=ServerReading)
    server_end: ServerReading = field(default_factory=ServerReading)

    # ------------------------------------------------------------------------------------------ the suite
    @property
    def suite_requests(self) -> int:
        """Every request the suite's processes sent, except their own reads of ``/metrics``."""
        return sum(p.total() for p in self.processes)

    def by_verb(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for process in self.processes:
            for verb, by in process.requests.items():
                counts[verb] += sum(n for r, n in by.items() if r != METRICS_PATH)
        order = {verb: index for index, verb in enumerate(VERBS)}
        return {v: counts[v] for v in sorted(counts, key=lambda v: (order.get(v, len(VERBS)), v)) if counts[v]}

    def by_resource(self, limit: int | None = None) -> list[tuple[str, str, int]]:
        """``(verb, resource, count)``, most requested first."""
        counts: Counter[tuple[str, str]] = Counter()
        for process in self.processes:
            for verb, by in process.requests.items():
                for resource, count in by.items():
                    if resource != METRICS_PATH:
                        counts[(verb, resource)] += count
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(verb, resource, count) for (verb, resource), count in ranked[:limit]]

    @property
    def peak_rss_bytes(self) -> int:
        return max((p.peak_rss_bytes for p in self.processes), default=0)

    @property
    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds for p in self.processes)

    # ------------------------------------------------------------------------------------------ the server
    @property
    def server_requests(self) -> int | None:
        start, end = self.server_start.requests, self.server_end.requests
        return None if start is None or end is None else max(0, end - start)

    @property
    def server_unavailable(self) -> str:
        """Why the run's total is not known ("" when it is)."""
        if self.server_requests is not None:
            return ""
        return self.server_end.unavailable or self.server_start.unavailable or "no reading of /metrics was taken"

    @property
    def fraction(self) -> float | None:
        """The suite's requests as a fraction of all the requests the API server served during the run."""
        total = self.server_requests
        return None if not total else self.suite_requests / total

    # -------------------------------------------------------------------------------------------- words
    def overhead_text(self) -> str:
        """``412 of 20,318 requests (2.0 %)`` or ``412 requests; share of the run: not available: <reason>``."""
        if self.fraction is None:
            total = self.server_requests
            reason = "the API server counted no request" if total == 0 else self.server_unavailable
            return f"{self.suite_requests:,} requests; the run's total: not available: {reason}"
        return f"{self.suite_requests:,} of {self.server_requests:,} requests ({self.fraction:.1%})"

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "suite_requests": self.suite_requests,
            "server_requests": self.server_requests,
            "server_unavailable": self.server_unavailable,
            "fraction": self.fraction,
            "by_verb": self.by_verb(),
            "peak_rss_bytes": self.peak_rss_bytes,
            "cpu_seconds": self.cpu_seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ApiLoad | None:
        if not data:
            return None
        return cls(
            [ProcessLoad.from_json(p) for p in data.get("processes") or []],
            ServerReading.from_json(data.get("server_start")),
            ServerReading.from_json(data.get("server_end")),
        )


# -------------------------------------------------------------------------------------------- state files
def write_process(state_dir: Path, load: ProcessLoad) -> Path:
    directory = state_dir / APILOAD_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{load.process}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(load), indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def read_processes(state_dir: Path) -> list[ProcessLoad]:
    """Every process's load; the main process first, then the workers in order."""
    directory = state_dir / APILOAD_DIR
    found = [
        ProcessLoad.from_json(json.loads(p.read_text()))
        for p in sorted(directory.glob("*.json"))
        if p.name != SERVER_START_FILE
    ]
    return sorted(found, key=lambda p: (p.process != "main", _worker_number(p.process), p.process))


def _worker_number(process: str) -> int:
    digits = process.removeprefix("gw")
    return int(digits) if digits.isdigit() else -1


def write_server_start(state_dir: Path, reading: ServerReading, main_counts: Mapping[tuple[str, str], int]) -> None:
    """The start reading, with what the main process had sent by then (preflight), which the run does not count."""
    directory = state_dir / APILOAD_DIR
    directory.mkdir(parents=True, exist_ok=True)
    before = [[verb, resource, count] for (verb, resource), count in sorted(main_counts.items())]
    (directory / SERVER_START_FILE).write_text(json.dumps({"reading": asdict(reading), "main_before": before}))


def read_server_start(state_dir: Path) -> tuple[ServerReading | None, dict[tuple[str, str], int]]:
    path = state_dir / APILOAD_DIR / SERVER_START_FILE
    if not path.is_file():
        return None, {}
    data = json.loads(path.read_text())
    before = {(str(verb), str(resource)): int(count) for verb, resource, count in data.get("main_before") or []}
    return ServerReading.from_json(data.get("reading")), before


# ------------------------------------------------------------------------------------------------- words
def of_run(api_load: Mapping[str, Any] | None) -> ApiLoad | None:
    """A run's load from its ``RunInfo.api_load`` (None for a run that recorded none, e.g. an older one)."""
    return ApiLoad.from_json(api_load)


def mebibytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def _counts(pairs: list[tuple[str, int]]) -> str:
    return " · ".join(f"{name} {count:,}" for name, count in pairs) or "none"


def rows(load: ApiLoad, top: int = 6) -> list[tuple[str, str]]:
    """The report's "API load and overhead" table: (label, text)."""
    server = load.server_requests
    if server is None:
        served = f"not available: {load.server_unavailable}"
    else:
        start, end = load.server_start, load.server_end
        began = start.note or f"{start.requests:,} at the start"
        served = f"{server:,} ({began}; {end.requests:,} at the end; reads of /metrics left out)"
    largest = max(load.processes, key=lambda p: p.peak_rss_bytes, default=None)
    children = sum(p.children_cpu_seconds for p in load.processes)
    out = [
        ("The suite's requests", load.overhead_text()),
        ("By verb", _counts(list(load.by_verb().items()))),
        ("Most requested", _counts([(f"{verb} {resource}", n) for verb, resource, n in load.by_resource(top)])),
        ("All requests the API server served during the run", served),
    ]
    if largest is not None:
        out.append(("Peak RSS", f"{mebibytes(largest.peak_rss_bytes)} (largest process: {largest.process})"))
        cpu = f"{load.cpu_seconds:,.1f} s in {len(load.processes)} process{'es' if len(load.processes) != 1 else ''}"
        out.append(("CPU time", cpu + (f" (and {children:,.1f} s in the CLIs they ran)" if children else "")))
    if len(load.processes) > 1:
        out.append(("Per process", " · ".join(
            f"{p.process}: {p.total():,} requests, {mebibytes(p.peak_rss_bytes)}, {p.cpu_seconds:,.1f} s CPU"
            for p in load.processes
        )))  # fmt: skip
    return out


def markdown_line(load: ApiLoad) -> str:
    """One line for the Markdown summary."""
    parts = [load.overhead_text(), _counts(list(load.by_verb().items()))]
    if load.processes:
        parts.append(f"peak RSS {mebibytes(load.peak_rss_bytes)}, CPU {load.cpu_seconds:,.1f} s")
    return " · ".join(parts)
