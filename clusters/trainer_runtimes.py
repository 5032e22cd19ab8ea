"""Trainer's shipped ClusterTrainingRuntimes, read at run time from ``--trainer-runtimes=DIR|URL``.

The ``runtimes`` area (suites/test_runtimes.py) runs the runtimes a Trainer release (or a Trainer PR) ships in
``manifests/base/runtimes/``: nothing of them is kept in this repository. The source is

* a directory holding that tree (a checkout of kubeflow/trainer or a PR's): its ``kustomization.yaml`` lists the
  runtime files and the directories with a kustomization of their own (``torchtune/``), read recursively; a
  directory without a kustomization gives every ``*.yaml`` in it;
* a base URL of that tree, by default the tested release's on GitHub (:func:`default_source`): its
  ``kustomization.yaml`` is read, then every file it lists, through the project's fetch function
  (``clusters/install/manifests.py`` ``download``, the one provisioning uses).

Only the area's cases load the runtimes, once per process (suites/support/shipped_runtimes.py): a run that selects
none fetches nothing. The fetch plan (clusters/fetches.py) lists the download when the run may select the area, so
``--offline`` refuses such a run without ``--trainer-runtimes=DIR``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.fixtures import errors

OPTION = "--trainer-runtimes"
UPSTREAM = "kubeflow/trainer"
RUNTIMES_PATH = "manifests/base/runtimes/"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{ref}/{path}"
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KIND = "ClusterTrainingRuntime"
#: Seconds each download may take (a few small YAML files).
FETCH_TIMEOUT = 60.0

Fetch = Callable[[str, float], str]
#: (path relative to the runtimes tree, e.g. ``torchtune/llama3_2/llama3_2_1B.yaml``, the object)
Loaded = list[tuple[str, dict[str, Any]]]


class RuntimesUnavailable(errors.InfrastructureError):
    """The runtimes could not be read: the message names the source and ``--trainer-runtimes``."""

    #: The case's report is this message alone, no traceback (fixtures/plugin/session.py ``pytest_runtest_makereport``).
    explained = True


def default_source(trainer_version: str) -> str:
    """The tested release's runtimes on GitHub: ``…/kubeflow/trainer/<tag>/manifests/base/runtimes/``."""
    return RAW_URL.format(repo=UPSTREAM, ref=trainer_version, path=RUNTIMES_PATH)


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fix_for(source: str) -> str:
    """How to get the runtimes from disk instead."""
    ref = source.split(f"/{UPSTREAM}/", 1)[-1].split("/", 1)[0] if f"/{UPSTREAM}/" in source else "<tag>"
    return (
        f"check network access, or pass {OPTION}=DIR with Trainer's {RUNTIMES_PATH} of the tested release (e.g. "
        f"`git clone --depth 1 --branch {ref} https://github.com/{UPSTREAM}` and {OPTION}=trainer/{RUNTIMES_PATH}); "
        f"a Trainer PR passes its own checkout's"
    )


def load(source: str, fetch: Fetch, timeout: float = FETCH_TIMEOUT) -> Loaded:
    """Every ClusterTrainingRuntime of the tree at ``source`` (a directory or a base URL), in the kustomization's
    order; :class:`RuntimesUnavailable` naming the source and the option when they cannot be read."""
    tree: _Tree = _Remote(source, fetch, timeout) if is_url(source) else _Local(source)
    found = _runtimes(tree, "", set())
    if not found:
        raise RuntimesUnavailable(
            f"no {KIND} in {source} ({OPTION})\nfix: pass {OPTION} with Trainer's {RUNTIMES_PATH} (its "
            "kustomization.yaml lists the runtime files)"
        )
    for rel, obj in found:
        missing = _missing_field(obj)
        if missing:
            raise RuntimesUnavailable(f"{rel} in {source} is a {KIND} without {missing} ({OPTION})")
    return found


def _missing_field(obj: dict[str, Any]) -> str | None:
    """The first field the runtimes area reads that ``obj`` lacks (suites/support/shipped_runtimes.py), or None."""
    if not isinstance((obj.get("metadata") or {}).get("name"), str):
        return "metadata.name"
    jobs = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        return "spec.template.spec.replicatedJobs"
    for job in jobs:
        if not isinstance(job, dict) or not isinstance(job.get("name"), str):
            return "a name in each of spec.template.spec.replicatedJobs"
        if not isinstance((job.get("template") or {}).get("spec"), dict):
            return f"replicatedJobs[{job['name']}].template.spec"
    return None


class _Tree:
    kustomizations: tuple[str, ...] = KUSTOMIZATION_FILES

    def read(self, rel: str) -> str | None:
        """The file's text; None when it does not exist."""
        raise NotImplementedError

    def yaml_files(self, prefix: str) -> list[str]:
        """Without a kustomization: the YAML files under ``prefix`` (none can be listed over HTTP)."""
        return []


class _Local(_Tree):
    def __init__(self, source: str) -> None:
        self.root = Path(source)
        if not self.root.is_dir():
            raise RuntimesUnavailable(
                f"{OPTION} {source} is not a directory\nfix: pass {OPTION}=DIR of Trainer's {RUNTIMES_PATH} (or a "
                "URL of it)"
            )

    def read(self, rel: str) -> str | None:
        path = self.root / rel
        return path.read_text() if path.is_file() else None

    def yaml_files(self, prefix: str) -> list[str]:
        return sorted(prefix + p.name for p in (self.root / prefix).glob("*.y*ml") if p.is_file())


class _Remote(_Tree):
    kustomizations = KUSTOMIZATION_FILES[:1]  # kubeflow/trainer names them kustomization.yaml

    def __init__(self, source: str, fetch: Fetch, timeout: float) -> None:
        self.source, self.base, self.fetch, self.timeout = source, source.rstrip("/") + "/", fetch, timeout

    def read(self, rel: str) -> str | None:
        try:
            return self.fetch(self.base + rel, self.timeout)
        except errors.InfrastructureError as exc:
            raise RuntimesUnavailable(
                f"cannot read Trainer's shipped runtimes from {self.source} ({OPTION}): {str(exc).splitlines()[0]}\n"
                f"fix: {fix_for(self.source)}"
            ) from exc


def _runtimes(tree: _Tree, prefix: str, seen: set[str]) -> Loaded:
    """The runtimes under ``prefix`` (``""`` or ``torchtune/``): the files its kustomization lists, recursively."""
    if prefix in seen:
        return []
    seen.add(prefix)
    listed: list[str] | None = None
    for name in tree.kustomizations:
        text = tree.read(prefix + name)
        if text is not None:
            kustomization = next(iter(_parse(text, prefix + name)), {})
            listed = [str(r) for r in kustomization.get("resources") or []]
            break
    found: Loaded = []
    if listed is None:
        for rel in tree.yaml_files(prefix):
            found += [(rel, doc) for doc in _parse(tree.read(rel) or "", rel) if doc.get("kind") == KIND]
        return found
    for resource in listed:
        rel = posixpath.normpath(prefix + resource)
        if is_url(resource) or rel.startswith(".."):
            continue  # not part of this tree
        if not rel.endswith((".yaml", ".yml")):
            found += _runtimes(tree, rel + "/", seen)
            continue
        body = tree.read(rel)
        if body is None:
            raise RuntimesUnavailable(
                f"{prefix}kustomization.yaml of {RUNTIMES_PATH} lists {resource}, which is missing"
            )
        found += [(rel, doc) for doc in _parse(body, rel) if doc.get("kind") == KIND]
    return found


def _parse(text: str, where: str) -> list[dict[str, Any]]:
    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        raise RuntimesUnavailable(f"{where} of Trainer's runtimes is not valid YAML ({OPTION}): {exc}") from exc
