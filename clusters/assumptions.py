"""Versions the expectation tables do not know: run them, assuming the expectations of the nearest lower known one.

A platform team qualifies the release it is about to roll out, and a KAI pull request gates its own build; neither
can wait for this suite to add a row. So a version that is not in ``clusters/versions.yaml`` is not refused:

* a release newer than a known one (``v0.18.1``, Trainer ``v2.4.0``) is installed by its tag (the chart or the
  release manifests of that version, from the same place as the known ones) and takes every expectation from the
  nearest lower known version (``v0.17.0``);
* a release between two known ones (``v0.16.9``) takes the lower one's expectations;
* a build that is no release (``main``, a commit, ``pr-42``) takes the newest known version's expectations, and
  needs its chart or manifests given (``--kai-chart`` …): there is no released artifact to install;
* a Kubernetes minor newer than the catalog's (``1.38``) takes the newest known minor's; kind needs
  ``--node-image`` when the catalog pins no image for it.

Only what cannot work is refused: a version older than the oldest supported (its APIs predate what the suite
reads), a build without its chart. Every assumption is named, in the run's progress, in the report's first line
("KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0"), in each case's expectations,
and in the verdict code (``conformant-assumed``), so a CI job can tell the two apart.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from kai_conformance.clusters.builds import build_of
from kai_conformance.fixtures.errors import UsageError

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
#: Where each component's CRD schemas live under $KAI_CONFORMANCE_CRDS (``crds`` of versions.yaml).
CRD_FOLDERS = {"kai": "kai-scheduler", "trainer": "trainer", "jobset": "jobset"}


def release_key(version: str) -> tuple[int, int, int] | None:
    """``v0.18.1`` / ``0.18.1`` → (0, 18, 1); ``None`` for a build that is no release (``main``)."""
    match = _RELEASE.match(version.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def normalized(version: str) -> str:
    """``0.18.1`` → ``v0.18.1`` (the catalog's spelling); builds unchanged."""
    return f"v{version.strip().removeprefix('v')}" if release_key(version) else version.strip()


def nearest_known(component: str, version: str, known: Mapping[str, object]) -> str:
    """The known version whose expectations ``version`` assumes; refuses one older than every known version."""
    releases = sorted((release_key(v), v) for v in known if release_key(v))
    key = release_key(version)
    if key is None:
        return releases[-1][1]
    lower = [v for k, v in releases if k <= key]
    if not lower:
        raise UsageError(
            f"{component} {version} is older than the oldest version the suite supports ({releases[0][1]}); the "
            f"suite reads APIs that version may not have. Supported: {', '.join(v for _, v in releases)} and newer"
        )
    return lower[-1]


def assumed_fields(component: str, version: str, base_version: str, base: Mapping[str, object]) -> dict:
    """The artifacts of ``version``, where the known version ``base_version`` has them: the same chart or release
    manifests at the new version, and the CRD-schema folder of that version (absent until provided; for a branch
    head that was read, its dated folder: clusters/builds.py)."""
    fields = dict(base)
    build = build_of(component, version)
    fields["crds"] = build.crds if build else f"{CRD_FOLDERS[component]}/{version}"
    if "chart_version" in fields:
        plain = str(fields["chart_version"]).startswith("v")
        fields["chart_version"] = version if plain else version.removeprefix("v")
    if "manifests" in fields:
        fields["manifests"] = str(fields["manifests"]).replace(base_version, version)
    return fields


def assume_component(component_class: type, kind: str, version: str, known: Mapping[str, object]) -> object:
    """A component of an unknown ``version`` that assumes the expectations of the nearest lower known one."""
    version = normalized(version)
    base_version = nearest_known(kind, version, known)
    base = known[base_version]
    fields = assumed_fields(kind, version, base_version, base.fields)  # type: ignore[attr-defined]
    return dataclasses.replace(base, version=version, fields=fields, assumed_from=base_version)  # type: ignore[call-arg]


def kubernetes_minor_of(version: str) -> str:
    """``v1.36.4`` / ``1.36.4`` / ``1.36`` → ``1.36``; anything else comes back without its ``v``."""
    plain = version.strip().removeprefix("v")
    return ".".join(plain.split(".")[:2]) if plain.count(".") == 2 else plain


def kubernetes_key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest or 0)


def nearest_minor(minor: str, known: tuple[str, ...], combination: str) -> str:
    """The known Kubernetes minor whose expectations ``minor`` assumes; refuses one older than every known one."""
    ordered = sorted(known, key=kubernetes_key)
    lower = [m for m in ordered if kubernetes_key(m) <= kubernetes_key(minor)]
    if not lower:
        raise UsageError(
            f"Kubernetes {minor} is not supported with {combination}: older than the oldest supported minor; "
            f"supported: {', '.join(ordered)} and newer"
        )
    return lower[-1]
