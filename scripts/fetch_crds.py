#!/usr/bin/env python3
"""Download the upstream CRD YAMLs the self-tests validate rendered objects against, into ``.crds/``.

For every component version in ``clusters/versions.yaml`` it fetches, from the release tag on GitHub, the CRDs of
the kinds the suites create or read, into ``.crds/<the component's crds dir>/`` (the layout ``tests/crd_schemas.py``
reads when ``KAI_CONFORMANCE_CRDS`` is unset). Needs network access to raw.githubusercontent.com; existing files
are kept unless ``--force``.

    python scripts/fetch_crds.py [--dest .crds] [--force]
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kai_conformance.clusters.catalog import Catalog

ROOT = Path(__file__).resolve().parent.parent


RAW = "https://raw.githubusercontent.com/{repo}/{tag}/{path}"
#: crds dir prefix in versions.yaml → (GitHub repository, directory at the tag, files), per /work/shared/crds/README.md.
SOURCES = {
    "kai-scheduler": (
        "kai-scheduler/KAI-Scheduler",
        "deployments/kai-scheduler/crds",
        (
            "scheduling.run.ai_queues.yaml",
            "scheduling.run.ai_podgroups.yaml",
            "scheduling.run.ai_bindrequests.yaml",
            "kai.scheduler_configs.yaml",
            "kai.scheduler_schedulingshards.yaml",
            "kai.scheduler_topologies.yaml",
        ),
    ),
    "trainer": (
        "kubeflow/trainer",
        "manifests/base/crds",
        (
            "trainer.kubeflow.org_trainjobs.yaml",
            "trainer.kubeflow.org_trainingruntimes.yaml",
            "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        ),
    ),
    "jobset": ("kubernetes-sigs/jobset", "config/components/crd/bases", ("jobset.x-k8s.io_jobsets.yaml",)),
}
TIMEOUT = 60


@dataclass(frozen=True)
class Download:
    url: str
    target: Path


def plan(catalog: Catalog, dest: Path) -> list[Download]:
    """Every file to fetch for every component version the catalog lists."""
    downloads = []
    for versions in catalog.components.values():
        for version, component in versions.items():
            crds_dir = component.crds  # e.g. kai-scheduler/v0.17.0
            project = crds_dir.split("/")[0]
            if project not in SOURCES:
                raise SystemExit(f"clusters/versions.yaml: no CRD source known for {crds_dir!r} (edit SOURCES)")
            repo, directory, files = SOURCES[project]
            downloads += [
                Download(RAW.format(repo=repo, tag=version, path=f"{directory}/{name}"), dest / crds_dir / name)
                for name in files
            ]
    return downloads


def fetch(downloads: list[Download], *, force: bool = False, opener: Callable[[str], bytes] | None = None) -> list[str]:
    """Fetch what is missing (or everything with ``force``); returns one line per problem."""
    read = opener or _read
    problems = []
    for item in downloads:
        if item.target.is_file() and not force:
            continue
        try:
            body = read(item.url)
        except (urllib.error.URLError, OSError) as exc:
            problems.append(f"{item.url}: {exc}")
            continue
        if b"CustomResourceDefinition" not in body:
            problems.append(f"{item.url}: not a CRD document")
            continue
        item.target.parent.mkdir(parents=True, exist_ok=True)
        item.target.write_bytes(body)
    return problems


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        return response.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".crds", help="target directory (default: .crds)")
    parser.add_argument("--force", action="store_true", help="download again even if the file exists")
    args = parser.parse_args(argv)
    downloads = plan(Catalog.load(), args.dest)
    problems = fetch(downloads, force=args.force)
    if problems:
        print("could not fetch:\n  " + "\n  ".join(problems), file=sys.stderr)
        print(
            "check network access to raw.githubusercontent.com, or point KAI_CONFORMANCE_CRDS at a copy",
            file=sys.stderr,
        )
        return 1
    print(f"{len(downloads)} CRD files present under {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
