"""Label cases: a label and an annotation set at one source, what the controllers themselves mark, and where a
priority class label comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.expectations import DEFAULT_PRIORITY_CLASS, PRIORITY_LABEL
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    case_queue,
    case_runtime,
    case_train_job,
    metadata,
    runtime_patch,
)

#: Prefix of the label and annotation keys the propagation cases set (one key per source, as label and annotation).
PROPAGATION_PREFIX = "propagation.kai-conformance.io"


@dataclass(frozen=True)
class PropagationCase(SideBySide):
    """A label and an annotation set at one ``source``; the test looks for both at every level."""

    source: str  # a key of expectations.ARRIVALS

    @property
    def id(self) -> str:
        return self.source

    @property
    def key(self) -> str:
        return f"{PROPAGATION_PREFIX}/{self.source}"

    @property
    def marker(self) -> Manifest:
        return metadata({self.key: "set"}, {self.key: "set"})

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "labels", gpu_quota=1, gpu_limit=1)

    def runtime(self, ctx: RenderContext) -> list[Manifest]:
        place = {
            "runtime-jobset-template": "jobset",
            "runtime-job-template": "job",
            "runtime-pod-template": "pod",
        }.get(self.source)
        return [case_runtime(ctx, "labels", **{place: self.marker})] if place else []

    def trainjob(self, ctx: RenderContext) -> Manifest:
        kwargs: dict[str, Any] = {}
        if self.runtime(ctx):
            kwargs.update(runtime="labels", runtime_kind=NAMESPACED_RUNTIME_KIND)
        if self.source.startswith("patch-"):
            kwargs["runtime_patches"] = [runtime_patch(**{self.source.split("-")[1]: self.marker})]
        if self.source == "trainjob-metadata":
            kwargs.update(labels=self.marker["labels"], annotations=self.marker["annotations"])
        return case_train_job(ctx, "labels", 1, 1, "labels", **kwargs)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)


@dataclass(frozen=True)
class ControllerMarksCase(SideBySide):
    """A plain TrainJob on the suite's runtime: what the controllers themselves put on Jobs and pods."""

    id: str = "controllers"
    pods: int = 2

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [
            case_queue(ctx, "marks", gpu_quota=self.pods, gpu_limit=self.pods),
            case_train_job(ctx, "marks", self.pods, 1, "marks"),
        ]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class PriorityCase(SideBySide):
    """A ``priorityClassName`` label at ``source`` (or none) and the PodGroup's ``spec.priorityClassName``."""

    source: str  # trainjob-label | runtime-jobset-template | runtime-pod-template | none
    priority_class: str = "build"

    @property
    def id(self) -> str:
        return self.source

    @property
    def expected(self) -> str:
        return DEFAULT_PRIORITY_CLASS if self.source == "none" else self.priority_class

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        # A non-preemptible class only runs within quota (KAI §6), so the quota covers the pod.
        objs = [case_queue(ctx, "priority", gpu_quota=1, gpu_limit=1)]
        label = metadata({PRIORITY_LABEL: self.priority_class})
        kwargs: dict[str, Any] = {}
        if self.source in ("runtime-jobset-template", "runtime-pod-template"):
            place = "jobset" if self.source == "runtime-jobset-template" else "pod"
            objs.append(case_runtime(ctx, "priority", **{place: label}))
            kwargs.update(runtime="priority", runtime_kind=NAMESPACED_RUNTIME_KIND)
        if self.source == "trainjob-label":
            kwargs["priority_class"] = self.priority_class
        return [*objs, case_train_job(ctx, "prio", 1, 1, "priority", **kwargs)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)
