"""The files allure-pytest does not write itself: ``environment.properties``, ``categories.json`` and, on
GitHub Actions, ``executor.json`` (allurereport.org: how-it-works-environment-file / -executor-file)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kai_conformance.reports import categories
from kai_conformance.reports.runinfo import RunInfo, flatten, gpu_topology

ENVIRONMENT = "environment.properties"
CATEGORIES = "categories.json"
EXECUTOR = "executor.json"
OWN_FILES = (ENVIRONMENT, CATEGORIES, EXECUTOR)


def _escape(text: str, key: bool = False) -> str:
    """Java properties escaping (keys also escape spaces, '=' and ':')."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        for char in " =:#!":
            text = text.replace(char, "\\" + char)
    return text


def environment(runs: list[RunInfo]) -> dict[str, str]:
    """What Allure's Environment widget shows: versions, Kubernetes, cluster, GPU topology, what was installed."""
    env: dict[str, str] = {}

    def put(key: str, values: list[str]) -> None:
        shown = sorted({v for v in values if v}, key=values.index)
        if shown:
            env[key] = " | ".join(shown)

    put("combination", [r.combination for r in runs])
    for key, name in (("kai", "KAI.Scheduler"), ("trainer", "Kubeflow.Trainer"), ("jobset", "JobSet")):
        put(name, [r.versions.get(key, "") for r in runs])
    put("Kubernetes.server", [r.kubernetes_server for r in runs])
    put("Kubernetes.requested", [r.versions.get("kubernetes", "") for r in runs])
    put("cluster", [" ".join(str(r.cluster.get(k, "")) for k in ("provider", "name")).strip() for r in runs])
    put("topology", [r.topology for r in runs])
    put("GPU.topology", [gpu_topology(r.gpus) for r in runs if r.gpus])
    put("run", [r.run_id for r in runs])
    for run in runs[:1] if len(runs) == 1 else ():
        for key, value in run.sources.items():
            env[f"source.{key}"] = value
        for key, value in flatten(run.stack).items():
            env[f"installed.{key}"] = value
    return env


def environment_text(runs: list[RunInfo]) -> str:
    return "".join(f"{_escape(k, key=True)}={_escape(v)}\n" for k, v in environment(runs).items())


def executor() -> dict | None:
    """Where the run happened, when that is GitHub Actions."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return None
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    repository, run_id = os.environ.get("GITHUB_REPOSITORY", ""), os.environ.get("GITHUB_RUN_ID", "")
    return {
        "name": "GitHub Actions",
        "type": "github",
        "reportName": "KAI conformance",
        "buildName": f"{os.environ.get('GITHUB_WORKFLOW', 'workflow')} #{os.environ.get('GITHUB_RUN_NUMBER', '')}",
        "buildUrl": f"{server}/{repository}/actions/runs/{run_id}" if repository and run_id else None,
    }


def write(results_dir: Path, runs: list[RunInfo]) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / ENVIRONMENT).write_text(environment_text(runs))
    (results_dir / CATEGORIES).write_text(json.dumps(categories.allure_categories(), indent=2))
    where = executor()
    if where is not None:
        (results_dir / EXECUTOR).write_text(json.dumps({k: v for k, v in where.items() if v}, indent=2))
