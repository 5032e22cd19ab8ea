"""What an existing cluster shows of a component besides its behaviour: Deployments that look like it (found in any
namespace by their labels or their images, never by fixed names), and the version an image tag names.

Deployments are optional evidence. Installs differ (another namespace or release name, KAI's operands made by
another product's operator, Trainer from kustomize, components run as plain processes), so where none is found
the component is judged by behaviour alone (``clusters/install/behaviour.py``) and its version is the one the
run declares. A version is *detected* only when the tag of an image of a found Deployment names it.

Labels and image names, from upstream at the supported tags:

* KAI: the chart's operator Deployment is labelled ``app: kai-operator``; the operator labels every operand
  Deployment ``app.kubernetes.io/managed-by: kai-operator`` (pkg/operator/operands/common/common.go, v0.16.8 and
  v0.17.0). Images are ``<registry>/<name>:<tag>`` with names operator, scheduler, binder, podgrouper,
  podgroupcontroller, queuecontroller, admission under ``ghcr.io/kai-scheduler/kai-scheduler`` (earlier
  ``ghcr.io/nvidia/kai-scheduler``), ``-fips`` tags since v0.16.4 (reference kai-scheduler.md §7).
* JobSet: ``app.kubernetes.io/name: jobset`` (release manifests' commonLabels, and the chart named jobset);
  image ``registry.k8s.io/jobset/jobset``.
* Trainer: ``app.kubernetes.io/name: trainer`` (kustomize) or ``kubeflow-trainer`` (chart) with
  ``app.kubernetes.io/component: manager``; image ``ghcr.io/kubeflow/trainer/trainer-controller-manager``
  (mirrored as ``docker.io/kubeflow/trainer-controller-manager``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds

Ref = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class Signature:
    """How a component's Deployments are recognised wherever they run."""

    label_sets: tuple[dict[str, str], ...]  # a Deployment carrying every label of one set is the component's
    image_names: tuple[str, ...]  # last segment of the image repository
    image_project: str = ""  # a path segment the repository must also contain ("" = any)

    def matches(self, deployment: dict[str, Any]) -> bool:
        labels = deployment["metadata"].get("labels") or {}
        if any(all(labels.get(k) == v for k, v in wanted.items()) for wanted in self.label_sets):
            return True
        return any(self.names_image(image) for image in template_images(deployment))

    def names_image(self, image: str) -> bool:
        *path, name = repository(image).split("/")
        return name in self.image_names and (not self.image_project or self.image_project in path)


SIGNATURES: dict[str, Signature] = {
    "kai": Signature(
        label_sets=({"app.kubernetes.io/managed-by": "kai-operator"}, {"app": "kai-operator"}),
        image_names=("operator", "scheduler", "binder", "podgrouper", "podgroupcontroller", "queuecontroller",
                     "admission"),
        image_project="kai-scheduler",
    ),
    "jobset": Signature(label_sets=({"app.kubernetes.io/name": "jobset"},), image_names=("jobset",),
                        image_project="jobset"),
    "trainer": Signature(
        label_sets=({"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager"},
                    {"app.kubernetes.io/name": "kubeflow-trainer", "app.kubernetes.io/component": "manager"}),
        image_names=("trainer-controller-manager",),
    ),
}  # fmt: skip


def repository(image: str) -> str:
    """``ghcr.io/x/operator:v0.17.0@sha256:…`` → ``ghcr.io/x/operator`` (a registry port is not a tag)."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def canonical_repository(image: str) -> str:
    """The repository as a container runtime reports it: ``nginx`` → ``docker.io/library/nginx``."""
    repo = repository(image)
    first, _, rest = repo.partition("/")
    if not rest:
        return f"docker.io/library/{repo}"
    return repo if "." in first or ":" in first or first == "localhost" else f"docker.io/{repo}"


def image_tag(image: str) -> str:
    """``ghcr.io/x/operator:v0.17.0@sha256:…`` → ``v0.17.0`` (``""`` without a tag)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def template_images(deployment: dict[str, Any]) -> list[str]:
    pod = deployment.get("spec", {}).get("template", {}).get("spec", {})
    return [c["image"] for c in pod.get("containers", []) if c.get("image")]


@dataclass
class Found:
    """The Deployments found for a component, and the images their pod templates name."""

    refs: list[Ref] = field(default_factory=list)
    images: dict[str, Ref] = field(default_factory=dict)  # image → the Deployment naming it
    note: str = ""  # why nothing could be looked for (e.g. listing Deployments is forbidden)


def find_deployments(kube: KubeApi, component: str, label: str) -> Found:
    """The Deployments of ``component`` in any namespace, by :data:`SIGNATURES`; none is not an error."""
    try:
        deployments = kube.list(kinds.DEPLOYMENT)
    except errors.Forbidden as exc:
        note = f"Deployments not searched: listing them is forbidden ({exc.message})"
        progress.report(f"{label}: {note}; the stack is judged by behaviour alone")
        return Found(note=note)
    found = Found()
    for deployment in sorted(deployments, key=lambda d: (d["metadata"]["namespace"], d["metadata"]["name"])):
        if SIGNATURES[component].matches(deployment):
            ref = (deployment["metadata"]["namespace"], deployment["metadata"]["name"])
            found.refs.append(ref)
            for image in template_images(deployment):
                found.images.setdefault(image, ref)
    if found.refs:
        progress.report(f"{label}: found Deployments {', '.join(f'{ns}/{n}' for ns, n in found.refs)}")
    else:
        progress.report(f"{label}: no Deployment of it found (labels or images); judged by behaviour alone")
    return found


def _version_of(tag: str) -> str:
    return tag.removesuffix("-fips")  # KAI's FIPS images carry the release tag plus -fips


def establish_version(
    label: str, option: str, expected: str, declared_by: str, images: dict[str, Ref], known: Iterable[str]
) -> dict[str, str]:
    """The version a verified component is taken to run, and how that was established.

    ``detected`` when the tag of a found image names the expected version; a known *different* version is a usage
    error naming ``option``; otherwise ``declared`` by ``declared_by`` (the option or combination that chose it),
    never a detection without an image.
    """
    known = set(known)
    tagged = {image: _version_of(image_tag(image)) for image in images}
    versions = sorted({v for v in tagged.values() if v in known})
    if versions and expected not in versions:
        raise errors.UsageError(
            f"the cluster runs {label} {versions[0]} but this run expects {expected}; pass "
            f"{option} {versions[0]} (or a --versions combination with it) so the expectations match"
        )
    if expected in versions:
        image = next(i for i, v in tagged.items() if v == expected)
        namespace, name = images[image]
        return {"version": expected, "version_source": "detected",
                "established": f"detected from image {image} of Deployment {namespace}/{name}"}  # fmt: skip
    tags = sorted({image_tag(i) for i in images} - {""})
    note = f"; the image tags found ({', '.join(tags)}) name no known version" if tags else ""
    return {"version": expected, "version_source": "declared", "established": f"declared by {declared_by}{note}"}
