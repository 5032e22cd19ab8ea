"""Fixtures the five suites share: the render context of the running case, the expectation rows, an observer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.configuration.settings import Settings
from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.partition import partition_of
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.run import RunContext
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.expectations import Expectations, expectations_for
from kai_conformance.suites.support.observe import Observer


@pytest.fixture(scope="session")
def expect(settings: Settings) -> Expectations:
    """The expectation rows for the versions under test, or for the known versions an unknown one assumes."""
    return expectations_for(settings.combination, settings.kubernetes_assumption)


@pytest.fixture(autouse=True)
def _name_the_expectations(expect: Expectations, record: CaseRecorder) -> None:
    """Every case's record names the expectation rows it assumed."""
    record.expectations(expect.describe())


@pytest.fixture
def ctx(
    request: pytest.FixtureRequest, workspace: Workspace, settings: Settings, gpu_layout: GpuLayout, run: RunContext
) -> RenderContext:
    """What a case builds its objects from: the same values render mode uses, but of the real cluster (of the
    case's slice, when it runs in one: fixtures/partition.py)."""
    partition = partition_of(request.node)
    layout = partition.layout if partition else gpu_layout
    return RenderContext(
        workspace.namespace, settings.combination, layout, run.run_id, settings.workload_image,
        settings.trainer_runtimes,
    )  # fmt: skip


@pytest.fixture
def observer(kube: KubeApi, workspace: Workspace, record: CaseRecorder, expect: Expectations) -> Iterator[Observer]:
    """Snapshots of the case's namespace; at the end every workload's per-pod timeline goes into the record."""
    watcher = Observer(kube, workspace.namespace, kai=expect.kai)
    yield watcher
    for workload in watcher.timeline.workloads():
        record.timeline(workload, watcher.timeline.pods(workload))
