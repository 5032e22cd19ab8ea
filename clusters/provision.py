"""One cluster per run: provisioned once (the first process to ask), shared by every xdist worker, torn down once.

:func:`acquire` runs under a file lock in the run's state directory. The first process provisions: kind cluster
(or connection to an existing one), images loaded (``--load-image`` and the workload image), stack installed or
verified, fake GPUs, the suite's own objects; it saves :class:`~clusters.state.ClusterState` as soon as a kind cluster exists (so teardown applies
even if a later step fails) and again, ``ready``, at the end. Every other process reads the state. A failure is
written next to it, so other workers fail at once with the same message instead of provisioning again.

:func:`release` runs in the main pytest process after every worker is done. It deletes a kind cluster only if
this run created it and neither ``--keep-cluster`` nor ``--reuse-cluster`` applies; on an existing cluster it
removes the stack-scope objects this run added and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from kai_conformance.clusters import commands, existing, gpu_sharing, gpus, kind, nodes
from kai_conformance.clusters.install import kai_sizing, manifests
from kai_conformance.clusters.install.behaviour import prove_scheduling
from kai_conformance.clusters.install.common import LABELS
from kai_conformance.clusters.install.context import InstallContext
from kai_conformance.clusters.install.stack import in_parallel, install_stack, verify_stack
from kai_conformance.clusters.install.suite import apply_suite_objects, remove_suite_objects
from kai_conformance.clusters.kwok import fake_nodes as kwok
from kai_conformance.clusters.kwok.probe import prove_kwok_runs_pods
from kai_conformance.clusters.layout import describe_gpus
from kai_conformance.clusters.slices import install_slices
from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.removal.cleanup import removal_command

if TYPE_CHECKING:
    from kai_conformance.fixtures.configuration.settings import Settings
    from kai_conformance.fixtures.run import RunContext

LOCK_FILE = "cluster.lock"
FAILURE_FILE = "cluster.failed.json"
RELEASED_FILE = "cluster.released"


def _cluster_kube(kubeconfig: str, context: str | None) -> KubeApi:
    from kai_conformance.fixtures.kube.http import ClusterKube

    return ClusterKube(kubeconfig, context)


@dataclass
class Toolbox:
    """What provisioning uses to reach the world; the self-tests substitute fakes."""

    runner: commands.Runner = commands.run
    kube: Callable[[str, str | None], KubeApi] = _cluster_kube
    kind_cluster: Callable[..., Any] | None = None  # pytest_kind.KindCluster
    fetch: Callable[[str, float], str] = manifests.download
    clients: list[KubeApi] = field(default_factory=list)

    def client(self, kubeconfig: str, context: str | None) -> KubeApi:
        kube = self.kube(kubeconfig, context)
        self.clients.append(kube)
        return kube

    def close(self) -> None:
        for kube in self.clients:
            close = getattr(kube, "close", None)
            if close:
                close()
        self.clients.clear()


# ------------------------------------------------------------------------------------------------------ acquire
def acquire(settings: Settings, run: RunContext, tools: Toolbox | None = None) -> ClusterState:
    """The run's ready cluster: provisioned by the first process that asks, read by every other."""
    tools = tools or Toolbox()
    run.state_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(run.state_dir / LOCK_FILE)):
        _raise_earlier_failure(run)
        state = ClusterState.load(run.state_dir)
        if state is not None and state.ready:
            return state
        try:
            return _provision(settings, run, tools, state)
        except BaseException as exc:
            kind_name = "UsageError" if isinstance(exc, errors.UsageError) else type(exc).__name__
            interrupted = isinstance(exc, KeyboardInterrupt)
            message = "interrupted (Ctrl-C) while provisioning" if interrupted else str(exc)
            (run.state_dir / FAILURE_FILE).write_text(
                json.dumps({"type": kind_name, "message": message, "interrupted": interrupted})
            )
            raise
        finally:
            tools.close()


def _raise_earlier_failure(run: RunContext) -> None:
    path = run.state_dir / FAILURE_FILE
    if not path.is_file():
        return
    failure = json.loads(path.read_text())
    message = f"provisioning the cluster failed earlier in this run: {failure['message']}"
    raise (errors.UsageError if failure["type"] == "UsageError" else errors.InfrastructureError)(message)


def _provision(settings: Settings, run: RunContext, tools: Toolbox, previous: ClusterState | None) -> ClusterState:
    if settings.cluster == "kind":
        provider = _kind_provider(settings, run, tools, settings.kind_cluster_name)
        adopt = previous is not None and previous.created_by_run and previous.name == settings.kind_cluster_name
        state = kind.up(
            settings.kind_cluster_name,
            reuse=settings.reuse_cluster is not None or adopt,
            keep=settings.keep_cluster,
            topology=settings.topology,
            node_image=settings.node_image,
            state_dir=run.state_dir,
            provider=provider,
            kubelet_cgroup_v1=settings.kubelet_cgroup_v1,
        )
        if adopt:  # a previous attempt of this run created it (its process died): still this run's to delete
            state = dataclasses.replace(state, created_by_run=True, kept=previous.kept)
        state.save(run.state_dir)  # from here on, teardown applies whatever fails next
        provider.load_images(settings.sources.load_images)
        provider.load_workload_image(settings.workload_image)
        kube = tools.client(state.kubeconfig, state.context)
    else:
        state, kube = existing.connect(
            settings.kubeconfig,
            settings.context,
            allow_disruptive=settings.allow_disruptive,
            kube_factory=tools.client,
        )
        state.save(run.state_dir)  # teardown removes whatever suite objects get applied, even if a step fails
    ctx = InstallContext(
        settings=settings,
        kube_factory=lambda: tools.client(state.kubeconfig, state.context),
        runner=tools.runner,
        fetch=tools.fetch,
        kubeconfig=state.kubeconfig,
        context=state.context,
    )
    fake_nodes = settings.topology.fake_nodes.count
    kwok_record = kwok_release = None
    if fake_nodes and state.provider != "kind":  # refuse before anything is installed or created
        kwok_record = kwok.detect_kwok(kube, settings.kwok_managed)
    elif fake_nodes:  # read kwok's release before installing anything: a run that cannot get it stops here
        kwok_release = kwok.load_kwok(ctx)
    steps: dict[str, Callable[[], Any]] = {"stack": lambda: _stack(ctx, state)}
    if state.provider == "kind":
        steps["fake GPUs"] = lambda: gpus.fake_gpus(
            tools.client(state.kubeconfig, state.context), settings.topology, state.name, settings.timeouts
        )
    done = in_parallel(steps)
    layout = dict(done.get("fake GPUs", state.gpus))
    if fake_nodes:
        suite_stages = kwok_record is None
        if suite_stages:
            kwok_record = kwok.install_kwok(ctx, kube, run.run_id, kwok_release)
        created = kwok.create_fake_nodes(kube, settings.topology, state.name, run.run_id, settings.timeouts)
        layout.update(created)
        kwok_record["probe"] = prove_kwok_runs_pods(
            kube, run.run_id, settings.workload_image, min(created), settings.timeouts, suite_stages=suite_stages
        )
    suite_objects = apply_suite_objects(kube, run.run_id, settings.workload_image, settings.timeouts)
    if settings.install and (state.provider == "kind" or gpu_sharing.has_fake_gpu_nodes(kube)):
        suite_objects += gpu_sharing.ensure_fraction_runtime_class(kube, run.run_id)  # fake GPUs have no `nvidia`
    # The slices' schedulers are KAI's operator's work and their probes need only their own nodes: both run beside
    # the cluster's own probe, each with a client of its own.
    proven = in_parallel({
        "KAI behaviour probe": lambda: prove_scheduling(ctx.kube_factory(), run.run_id, settings.workload_image,
                                                        settings.timeouts),
        "slices": lambda: _slices(ctx.kube_factory, state, settings, run),
    }, cancellable=True)  # fmt: skip
    behaviour = proven["KAI behaviour probe"]
    slices, slice_record = proven["slices"]
    layout = {name: gpus for name, gpus in layout.items() if not any(name in s for s in slices.values())}
    stack = {
        "combination": settings.combination.name,
        "description": settings.combination.describe(),
        "kubernetes": kube.server_version(),
        "mode": "installed" if settings.install else "verified",
        "components": done["stack"],
        "suite_objects": suite_objects,
        "behaviour": behaviour,
    }
    if kwok_record is not None:
        stack["kwok"] = {**kwok_record, "fake_nodes": fake_nodes}
    if slice_record:
        stack["slices"] = slice_record
    stack["nodes"] = _nodes_running(kube, state, tools, settings)
    if state.provider == "kind":
        stack.update(_kind_record(settings))
    ready = dataclasses.replace(state, gpus=layout, slices=slices, stack=stack, ready=True)
    ready.save(run.state_dir)
    progress.report(f"cluster {ready.name} ready: {_versions(done['stack'])}; GPUs {_gpus(ready.gpus)}")
    return ready


def _stack(ctx: InstallContext, state: ClusterState) -> dict[str, Any]:
    """The stack installed (or verified); on kind, KAI's scale-test limits for a run with fake nodes
    (clusters/install/kai_sizing.py), else what a killed run left of them removed before anything is proven."""
    settings = ctx.settings
    components: dict[str, Any] = (install_stack if settings.install else verify_stack)(ctx)
    if settings.install and state.provider == "kind":
        kube = ctx.kube_factory()
        if kai_sizing.wanted(settings.kai_sizing, settings.topology.fake_nodes.count):
            components["kai"].update(kai_sizing.size(kube, settings.timeouts))
        elif removed := kai_sizing.unsize(kube, settings.timeouts):
            progress.report(f"KAI's scale-test limits a killed run left in kai-config removed: {', '.join(removed)}")
    return components


def _kind_record(settings: Settings) -> dict[str, Any]:
    record: dict[str, Any] = {
        "topology": settings.topology.name,
        "node_image_pin": settings.node_image_pin,
        "loaded_images": list(settings.sources.load_images),
    }
    if settings.node_image_override:
        record["node_image_requested"] = settings.node_image_override
    if settings.kubelet_cgroup_v1:
        record["kubelet_overrides"] = dict(nodes.CGROUP_V1_OVERRIDE)
    return record


def _slices(
    kube_factory: Callable[[], KubeApi], state: ClusterState, settings: Settings, run: RunContext
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """The slices' nodes (slice → node → GPUs) and what installing them recorded; none off kind."""
    layouts = settings.topology.slice_layouts(state.name) if state.provider == "kind" else {}
    record = install_slices(kube_factory, run.run_id, layouts, settings.workload_image, settings.timeouts)
    return {name: layout.by_name() for name, layout in layouts.items()}, record


def _nodes_running(kube: KubeApi, state: ClusterState, tools: Toolbox, settings: Settings) -> dict[str, Any]:
    """What the nodes run, read from the cluster; on kind with each node container's image."""
    images = None
    if state.provider == "kind":
        names = [n["metadata"]["name"] for n in kube.list(kinds.NODE)]
        images = nodes.container_images(tools.runner, names, settings.timeouts("api"))
    return nodes.nodes_running(kube, images)


def _versions(components: dict[str, dict[str, Any]]) -> str:
    """``KAI Scheduler v0.17.0 (declared by --kai-version v0.17.0), …``: each version and how it is known."""
    return ", ".join(
        f"{LABELS[name]} {record.get('version', '?')} ({record.get('established', 'not established')})"
        for name, record in components.items()
    )


def _gpus(layout: dict[str, int]) -> str:
    return describe_gpus(layout) or "none"


def _kind_provider(settings: Settings, run: RunContext, tools: Toolbox, name: str) -> kind.KindProvider:
    return kind.KindProvider(
        name, kind.kubeconfig_path(run.state_dir, name), settings.timeouts, tools.runner, tools.kind_cluster
    )


# ------------------------------------------------------------------------------------------------------ release
def release(settings: Settings, run: RunContext, tools: Toolbox | None = None) -> None:
    """End of run, main process only: delete what this run created, exactly once. Never raises."""
    if not run.is_main or (run.state_dir / RELEASED_FILE).exists():
        return
    state = ClusterState.load(run.state_dir)
    if state is None:
        return
    (run.state_dir / RELEASED_FILE).write_text(state.name)
    tools = tools or Toolbox()
    try:
        _release(state, settings, run, tools)
    except KeyboardInterrupt:  # a second Ctrl-C: say what is left and how to remove it, never a traceback
        what = f"kind cluster {state.name} (`kind delete cluster --name {state.name}`)" if (
            state.provider == "kind" and state.created_by_run and not state.kept
        ) else f"this run's objects (`{removal_command(run.run_id)}`)"  # fmt: skip
        progress.report(f"interrupted again: teardown stopped; remove {what}")
    finally:
        tools.close()


def _release(state: ClusterState, settings: Settings, run: RunContext, tools: Toolbox) -> None:
    deleting = state.provider == "kind" and state.created_by_run and not state.kept
    if settings.topology.fake_nodes.count and not deleting:  # a deleted kind cluster takes its nodes with it
        _remove_fake_nodes(state, settings, run, tools)
    if ((state.stack.get("components") or {}).get("kai") or {}).get("sizing") and not deleting:
        _unsize_kai(state, tools)
    try:
        if state.provider == "existing":
            _remove_suite_objects(state, settings, run, tools)
        elif state.created_by_run and not state.kept:
            _kind_provider(settings, run, tools, state.name).delete()
            progress.report(f"kind cluster {state.name} deleted")
        else:
            progress.report(
                f"kept kind cluster {state.name} (kubeconfig {state.kubeconfig}); reuse it with --reuse-cluster "
                f"{state.name}, delete it with `kind delete cluster --name {state.name}`"
            )
    except Exception as exc:  # teardown reports; raising here would hide the test results
        progress.report(f"teardown of cluster {state.name} failed: {exc}")


def _unsize_kai(state: ClusterState, tools: Toolbox) -> None:
    """Its own step, like the fake nodes': what this run filled into kai-config is removed from a kept cluster."""
    try:
        if removed := kai_sizing.unsize(tools.client(state.kubeconfig, state.context)):
            progress.report(f"KAI's scale-test limits removed from kai-config: {', '.join(removed)}")
    except Exception as exc:
        progress.report(
            f"could not remove KAI's scale-test limits from kai-config: {exc}\nfix: `kubectl edit config.kai.scheduler "
            f"kai-config` and delete the paths its annotation {kai_sizing.FILLED_ANNOTATION} names"
        )


def _remove_fake_nodes(state: ClusterState, settings: Settings, run: RunContext, tools: Toolbox) -> None:
    """Its own step: a failure here is reported and never keeps the rest of the teardown from running."""
    try:
        kwok.remove_fake_nodes(tools.client(state.kubeconfig, state.context), run.run_id, settings.timeouts)
    except Exception as exc:
        progress.report(
            f"could not remove the fake nodes of this run: {exc}\nfix: `kubectl delete nodes -l "
            f"{kwok.fake_node_selector(run.run_id)}`; pods left bound to removed nodes go with kube-controller-manager's "
            "pod GC (check that it runs), or `kubectl delete pod --force` them"
        )


def _remove_suite_objects(state: ClusterState, settings: Settings, run: RunContext, tools: Toolbox) -> None:
    kube = tools.client(state.kubeconfig, state.context)
    problems = remove_suite_objects(kube, run.run_id, settings.timeouts)
    if problems:
        progress.report("could not remove the suite's run-wide objects:\n  " + "\n  ".join(problems))
    else:
        progress.report(f"removed the suite's run-wide objects from cluster {state.name}")
