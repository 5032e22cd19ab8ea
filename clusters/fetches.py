"""Everything a run would fetch from the network, and the option that supplies each locally.

A mirrored or air-gapped machine must know before anything is created what the run would download: preflight
prints this plan, and with ``--offline`` refuses the run while any entry remains, naming each option to use. The
entries, in the order a run meets them:

* the kind node image, pulled by kind when the local engine lacks it (``--node-image`` of a loaded image);
* the KAI and Trainer charts from their OCI registries (``--kai-chart``/``--trainer-chart`` of a directory), and
  the dependencies of a chart directory whose ``charts/`` lacks them (``helm --dependency-update``);
* manifests read from a URL: JobSet's release ``manifests.yaml`` (``--jobset-manifests``), a kustomize directory
  whose resources name a URL (kustomize fetches them), kwok's release assets (``--kwok-manifests``);
* Trainer's shipped runtimes, read by the ``runtimes`` area alone: listed only when the run may select that area
  (``runtimes`` below), downloaded by its first case (``--trainer-runtimes=DIR``; clusters/trainer_runtimes.py);
* images the kind nodes pull (a node pulls what it lacks): the components' images unless ``--load-image`` gives
  them, and the workload image, pulled into the local engine when absent (``--workload-image``).

On an existing cluster nothing is created and only the manifests it installs (``--install always``) count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from kai_conformance.clusters import trainer_runtimes
from kai_conformance.fixtures.configuration.settings import Settings

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
#: kwok's release assets, as the release publishes them (clusters/versions.yaml ``kwok:``).
KWOK_ASSETS = ("kwok.yaml", "stage-fast.yaml")


@dataclass(frozen=True)
class Fetch:
    what: str  # "the kind node image kindest/node:v1.35.5@sha256:…"
    how: str  # "pulled by kind from Docker Hub"
    instead: str  # the option that supplies it locally, and how to get it there


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "oci://"))


def missing_chart_dependencies(chart_dir: Path) -> list[str]:
    """The dependencies Chart.yaml names that ``charts/`` does not hold (``name-version.tgz`` or ``name/``)."""
    try:
        chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    held = {p.name for p in (chart_dir / "charts").glob("*")} if (chart_dir / "charts").is_dir() else set()
    missing = []
    for dependency in chart.get("dependencies") or []:
        name, version = str(dependency.get("name", "")), str(dependency.get("version", ""))
        if name not in held and f"{name}-{version}.tgz" not in held:
            missing.append(f"{name} {version}".strip())
    return missing


def remote_kustomize_resources(directory: Path, seen: set[Path] | None = None) -> list[str]:
    """URLs among the resources of a kustomize directory and of the local directories it includes."""
    seen = seen if seen is not None else set()
    if directory.resolve() in seen:
        return []
    seen.add(directory.resolve())
    found: list[str] = []
    for name in KUSTOMIZATION_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            kustomization = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            return []
        for resource in [*(kustomization.get("resources") or []), *(kustomization.get("bases") or [])]:
            text = str(resource)
            if is_url(text) or text.startswith(("github.com/", "git::", "ssh://")):
                found.append(text)
            elif (directory / text).is_dir():
                found += remote_kustomize_resources(directory / text, seen)
        break
    return found


def manifest_images(path: Path) -> list[str]:
    """The container images a manifests file's workloads run (Deployments, DaemonSets, StatefulSets, Jobs)."""
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError):
        return []
    images: dict[str, None] = {}
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            continue
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            if container.get("image"):
                images[str(container["image"])] = None
    return list(images)


def _unloaded_images(path: Path, what: str, loaded: tuple[str, ...]) -> list[Fetch]:
    """Real kind, offline: JobSet's kustomize rendering names its image ``us-central1-docker.pkg.dev/…`` while the
    release manifests name ``registry.k8s.io/jobset/jobset``; the image loaded under the other name was pulled."""
    given = set(loaded) | {f"{image}:latest" for image in loaded if ":" not in image.rsplit("/", 1)[-1]}
    missing = [i for i in manifest_images(path) if i not in given and f"{i}:latest" not in given]
    return [Fetch(f"the image {image} of {what}", "pulled by the kind nodes",
                  f"--load-image={image} (an image of that name in the local Docker: `docker tag` yours to it)")
            for image in missing]  # fmt: skip


def _manifests_fetch(source: str, what: str, option: str, loaded: tuple[str, ...] | None = None) -> list[Fetch]:
    """``loaded``: on kind, the images given with --load-image (a manifests file's images not among them are
    pulled by the nodes); None elsewhere."""
    if is_url(source):
        return [Fetch(f"{what} {source}", "downloaded", f"{option}=FILE with the file downloaded elsewhere")]
    path = Path(source)
    if path.is_file() and loaded is not None:
        return _unloaded_images(path, what, loaded)
    remote = remote_kustomize_resources(path) if path.is_dir() else []
    if remote:
        return [Fetch(f"{what}: the kustomize directory {source} includes {', '.join(remote)}",
                      "fetched by kustomize",
                      f"render it where the URLs are reachable (`kubectl kustomize {source} > FILE`) and pass "
                      f"{option}=FILE")]  # fmt: skip
    return []


def _chart_fetch(ref: str | None, released: str, version: str, what: str, option: str) -> list[Fetch]:
    if ref is None:
        return [Fetch(f"the {what} chart {released} {version}", "pulled by helm",
                      f"{option}=DIR with the chart pulled elsewhere (`helm pull {released} --version {version} "
                      "--untar`)")]  # fmt: skip
    if is_url(ref):
        return [Fetch(f"the {what} chart {ref}", "pulled by helm", f"{option}=DIR with the chart pulled elsewhere")]
    missing = missing_chart_dependencies(Path(ref)) if Path(ref).is_dir() else []
    if missing:
        return [Fetch(f"the dependencies of the {what} chart {ref}: {', '.join(missing)}",
                      "fetched by `helm --dependency-update` (they are not in its charts/)",
                      f"run `helm dependency build {ref}` where they are reachable, or copy their archives into "
                      f"{ref}/charts/")]  # fmt: skip
    return []


def runtimes_fetch(settings: Settings) -> list[Fetch]:
    """Trainer's shipped runtimes from a URL (``--trainer-runtimes`` unset: the tested release's on GitHub)."""
    source = settings.trainer_runtimes
    if source is not None and not trainer_runtimes.is_url(source):
        return []
    url = source or trainer_runtimes.default_source(settings.combination.trainer.version)
    return [Fetch(f"Trainer's shipped runtimes {url}",
                  "downloaded by the runtimes area (kustomization.yaml and the files it lists)",
                  f"{trainer_runtimes.OPTION}=DIR with Trainer's {trainer_runtimes.RUNTIMES_PATH} of that release "
                  f"(a checkout of {trainer_runtimes.UPSTREAM}), or deselect the area (-m \"not runtimes\")")]  # fmt: skip


def planned_fetches(settings: Settings, image_present: Callable[[str], bool], *, runtimes: bool = False) -> list[Fetch]:
    """What this run would fetch; ``image_present(image)`` says whether the local engine holds an image;
    ``runtimes``: the run may select cases of the runtimes area (fixtures/configuration/preflight.py ``area_may_run``)."""
    kind = settings.cluster == "kind"
    fetches: list[Fetch] = []
    if kind and not settings.reuse_cluster and not image_present(settings.node_image):
        fetches.append(Fetch(f"the kind node image {settings.node_image}", "pulled by kind (Docker Hub)",
                             "--node-image=IMAGE naming a node image in the local Docker (`docker load` it, or "
                             "build one with `kind build node-image`)"))  # fmt: skip
    if settings.install:
        combo, sources = settings.combination, settings.sources
        fetches += _chart_fetch(sources.kai_chart, combo.kai.fields["chart"], str(combo.kai.fields["chart_version"]),
                                "KAI Scheduler", "--kai-chart")  # fmt: skip
        # Without any --load-image one entry below says the nodes pull every image; with some, each image of a local
        # manifests file that none of them gives is named.
        loaded = sources.load_images if kind and sources.load_images else None
        if sources.trainer_manifests:
            fetches += _manifests_fetch(
                sources.trainer_manifests, "the Trainer manifests", "--trainer-manifests", loaded
            )
        else:
            trainer = combo.trainer.fields
            fetches += _chart_fetch(sources.trainer_chart, trainer["chart"], str(trainer["chart_version"]),
                                    "Kubeflow Trainer", "--trainer-chart")  # fmt: skip
        jobset = sources.jobset_manifests or combo.jobset.fields["manifests"]
        fetches += _manifests_fetch(jobset, "the JobSet manifests", "--jobset-manifests", loaded)
        if kind and not sources.load_images:
            fetches.append(Fetch("the images of KAI Scheduler, JobSet and Trainer", "pulled by the kind nodes",
                                 "--load-image=IMAGE for each image, already in the local Docker (with "
                                 "--kai-image-registry/--kai-image-tag when they are named otherwise)"))  # fmt: skip
    kwok_dir = settings.kwok_manifests
    if kind and settings.topology.fake_nodes.count and kwok_dir is not None:
        fetches += _unloaded_images(Path(kwok_dir) / KWOK_ASSETS[0], "kwok", settings.sources.load_images)
    elif kind and settings.topology.fake_nodes.count:
        fetches.append(Fetch(f"kwok {settings.catalog.kwok.get('version', '')} release assets "
                             f"({', '.join(KWOK_ASSETS)})", "downloaded from its release",
                             f"--kwok-manifests=DIR holding {' and '.join(KWOK_ASSETS)} of that release, and "
                             "--load-image of the kwok image its kwok.yaml names"))  # fmt: skip
    if runtimes:
        fetches += runtimes_fetch(settings)
    if kind and not image_present(settings.workload_image):
        fetches.append(Fetch(f"the workload image {settings.workload_image}", "pulled into the local Docker",
                             "`docker load` it, or pass --workload-image=IMAGE naming an image in the local Docker "
                             "with a POSIX sh and sleep"))  # fmt: skip
    return fetches


def describe(fetches: list[Fetch]) -> str:
    lines = [f"this run would fetch {len(fetches)} thing(s) from the network:"]
    lines += [f"  - {f.what} ({f.how}); locally: {f.instead}" for f in fetches]
    return "\n".join(lines)
