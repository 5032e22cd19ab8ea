"""Proof by behaviour that kwok plays the kubelet of the fake nodes, run once right after they are Ready.

kwok reporting a node Ready proves its node stages only. The cases need its pod stages: one that makes a bound pod
Running (the release's ``pod-ready``) and, where the suite installed them, its own ending of a deleted pod
(clusters/kwok/stages.py). A kwok without them would let every case with a pod on a fake node wait out its whole
budget; this probe says so within the first minute, naming kwok's stages and the fix. It follows the KAI
behaviour probe (clusters/install/behaviour.py): stages with a budget each, a failure that says what was seen.

1. A namespace labelled as this run's stack object and, in it, one pod pinned to a fake node by ``spec.nodeName``
   (no scheduler involved: only kwok can move it), tolerating kwok's taint, running the suite's workload
   container. With the suite's stages it carries a finalizer of the probe's own, as the Job controller's
   tracking finalizer holds a workload pod.
2. It must be Running within the ``api`` budget.
3. With the suite's stages (kind), it is deleted and must end as a kubelet ends it: phase Failed, every container
   terminated with the workload's exit code (:data:`~clusters.suite_stack.EVICTED_EXIT_CODE`), and still present
   while the finalizer holds it; once the probe removes the finalizer it must go. On an existing cluster kwok
   plays stages the suite does not own: Running is all the probe asks there.
4. Everything is removed (also when a stage failed).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE, pod_spec
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.waits import Observation, Probe, TimeoutPolicy, eventually

Obj = dict[str, Any]
NAMESPACE_PREFIX = "kc-kwok-probe-"
POD_NAME = "kwok-probe"
#: Holds the deleted probe pod until the probe has seen how kwok ended it (a qualified name, as the API requires).
FINALIZER = "kai-conformance/kwok-probe"
#: Where to read kwok's stages: the release's pod stages make a pod Running and end it.
STAGES_URL = "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/stage-fast.yaml"
BUDGET = "api"


def probe_objects(namespace: str, node: str, image: str, run_id: str, *, hold: bool) -> list[Obj]:
    """The probe's namespace and pod, in creation order, labelled as this run's stack objects."""
    spec = pod_spec(image, scheduler_name=None, restart_policy="Never")
    spec["nodeName"] = node
    meta: Obj = {"name": POD_NAME, "namespace": namespace}
    if hold:
        meta["finalizers"] = [FINALIZER]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    return [stamp(namespace_obj, run_id), stamp(pod, run_id)]


def prove_kwok_runs_pods(
    kube: KubeApi, run_id: str, image: str, node: str, timeouts: TimeoutPolicy, *, suite_stages: bool,
    suffix: str = "",
) -> Obj:  # fmt: skip
    """Run the probe (module docstring) on fake node ``node``; returns what it saw, for the run's kwok record.
    ``suite_stages``: the suite installed kwok with its own stages (kind), so how a deleted pod ends is judged too."""
    probe = _KwokProbe(kube, NAMESPACE_PREFIX + (suffix or secrets.token_hex(3)), node, timeouts, suite_stages)
    progress.report(
        f"kwok probe: pod {probe.namespace}/{POD_NAME} pinned to fake node {node}: Running"
        + (f", then deleted: Failed with exit code {EVICTED_EXIT_CODE}, removed once released" if suite_stages else "")
    )
    try:
        for obj in probe_objects(probe.namespace, node, image, run_id, hold=suite_stages):
            kube.apply(obj)
        result = probe.run()
    finally:
        left = probe.remove()
        if left:
            progress.report(f"kwok probe: could not remove everything it made: {left}")
    result["removed"] = f"not everything: {left}" if left else "everything"
    progress.report(f"kwok probe passed in {result['seconds']['total']:.1f}s: kwok runs pods on fake node {node}")
    return result


class _KwokProbe:
    def __init__(self, kube: KubeApi, namespace: str, node: str, timeouts: TimeoutPolicy, suite_stages: bool) -> None:
        self.kube, self.namespace, self.node, self.timeouts = kube, namespace, node, timeouts
        self.suite_stages = suite_stages
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}

    def run(self) -> Obj:
        self._running()
        ended = self._ended() if self.suite_stages else "not judged: the cluster's own stages end pods"
        self.seconds["total"] = round(time.monotonic() - self.started, 1)
        return {"namespace": self.namespace, "pod": POD_NAME, "node": self.node, "stages": self._stages(),
                "deleted_pod": ended, "seconds": dict(self.seconds)}  # fmt: skip

    def _wait(self, stage: str, probe: Probe, failure: Any) -> Observation:
        try:
            found = eventually(probe, what=f"kwok probe: {stage}", timeout=self.timeouts(BUDGET),
                               failure=errors.WaitTimeout)  # fmt: skip
        except errors.WaitTimeout:
            raise failure(self.timeouts(BUDGET)) from None
        self.seconds[stage] = round(time.monotonic() - self.started, 1)
        return found

    def _pod(self) -> Obj | None:
        return self.kube.find(kinds.POD, POD_NAME, self.namespace)

    # ------------------------------------------------------------------------------------------------ stages
    def _running(self) -> None:
        def running() -> Observation:
            pod = self._pod() or {}
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if phase in ("Succeeded", "Failed"):
                raise errors.InfrastructureError(
                    f"kwok ended the probe pod {self.namespace}/{POD_NAME} on fake node {self.node} {phase} at once "
                    f"instead of keeping it Running, so the cases' workloads would end before KAI is judged; kwok's "
                    f"pod stages: {self._stages_said()}. fix: {self._fix()}"
                )
            return Observation(phase == "Running", f"phase {phase}", actual=pod)

        def failure(limit: float) -> errors.InfrastructureError:
            pod = self._pod() or {}
            return errors.InfrastructureError(
                f"kwok did not run the probe pod {self.namespace}/{POD_NAME} on fake node {self.node} within "
                f"{limit:.0f}s ({_state(pod)}): kwok's pod stages never make a pod Running here, so every case with "
                f"a pod on a fake node would wait out its timeout. kwok's pod stages: {self._stages_said()}. "
                f"fix: {self._fix()}"
            )

        self._wait("running", running, failure)

    def _ended(self) -> str:
        self.kube.delete(kinds.POD, POD_NAME, self.namespace)  # as KAI's evictor deletes a victim's pods
        expected = f"phase Failed, every container terminated with exit code {EVICTED_EXIT_CODE}"

        def ended() -> Observation:
            pod = self._pod()
            if pod is None:
                raise errors.InfrastructureError(
                    f"kwok removed the deleted probe pod {self.namespace}/{POD_NAME} while its finalizer {FINALIZER} "
                    f"still held it, without the end a kubelet reports ({expected}): a 'fast' pod-delete stage "
                    f"plays this cluster's pods, so evictions would never show the Failed phase. kwok's pod stages: "
                    f"{self._stages_said()}. fix: {self._fix()}"
                )
            codes = _exit_codes(pod)
            phase = (pod.get("status") or {}).get("phase")
            ok = phase == "Failed" and bool(codes) and set(codes) == {EVICTED_EXIT_CODE}
            return Observation(ok, _state(pod), actual=pod)

        def failure(limit: float) -> errors.InfrastructureError:
            return errors.InfrastructureError(
                f"kwok did not end the deleted probe pod {self.namespace}/{POD_NAME} within {limit:.0f}s as a kubelet "
                f"would ({expected}; seen: {_state(self._pod() or {})}), so evicted workloads would not fail on "
                f"fake nodes. kwok's pod stages: {self._stages_said()}. fix: {self._fix()}"
            )

        self._wait("ended", ended, failure)
        self.kube.patch(kinds.POD, POD_NAME, {"metadata": {"finalizers": None}}, namespace=self.namespace)

        def gone() -> Observation:
            present = self._pod() is not None
            return Observation(not present, "still present" if present else "gone")

        def stays(limit: float) -> errors.InfrastructureError:
            return errors.InfrastructureError(
                f"the deleted probe pod {self.namespace}/{POD_NAME} ended Failed but was not removed within "
                f"{limit:.0f}s of its last finalizer going, so the cases' namespaces would never go. kwok's pod "
                f"stages: {self._stages_said()}. fix: {self._fix()}"
            )

        self._wait("removed", gone, stays)
        return f"{expected}; held by its finalizer, removed once released"

    # ------------------------------------------------------------------------------------------------ reading
    def _stages(self) -> list[str] | None:
        """Names of the kwok Stages for pods, or None when the Stage CRD is not served."""
        try:
            found = self.kube.list(kinds.KWOK_STAGE)
        except errors.KindNotServed:
            return None
        pod_stages = [s for s in found if ((s.get("spec") or {}).get("resourceRef") or {}).get("kind") == "Pod"]
        return sorted(s["metadata"]["name"] for s in pod_stages)

    def _stages_said(self) -> str:
        stages = self._stages()
        if stages is None:
            return "unknown (the Stage CRD stages.kwok.x-k8s.io is not served: kwok plays the stages of its config)"
        return ", ".join(stages) or "none"

    def _fix(self) -> str:
        controller = "`kubectl -n kube-system logs deploy/kwok-controller`"
        if self.suite_stages:
            expected = ", ".join(
                ("pod-ready", kwok_stages.TERMINATE_STAGE, kwok_stages.REMOVE_STAGE, kwok_stages.EXIT_STAGE)
            )
            return (
                f"the suite installed kwok with the pod stages {expected}; check that they exist (`kubectl get "
                f"stages`) and what kwok's controller says ({controller}); it must manage the pods of nodes "
                "annotated kwok.x-k8s.io/node=fake"
            )
        return (
            f"give the cluster's kwok pod stages that make a pod Running and end a deleted one (`kubectl apply -f "
            f"{STAGES_URL}`), or configure it to manage the pods of nodes annotated kwok.x-k8s.io/node=fake "
            f"(its logs: {controller}), or drop --fake-nodes"
        )

    # ------------------------------------------------------------------------------------------------ removal
    def remove(self) -> str:
        """Release the finalizer, delete the pod and the namespace, and wait until they are gone; returns what is
        left ("" when nothing). Never raises: a failed probe's own error matters more."""
        left = []
        try:
            pod = self._pod()
            if pod is not None and FINALIZER in (pod["metadata"].get("finalizers") or []):
                self.kube.patch(kinds.POD, POD_NAME, {"metadata": {"finalizers": None}}, namespace=self.namespace)
            self.kube.delete(kinds.POD, POD_NAME, self.namespace)
            self.kube.delete(kinds.NAMESPACE, self.namespace)
        except errors.KubeError as exc:
            left.append(str(exc))

        def gone() -> Observation:
            present = self.kube.find(kinds.NAMESPACE, self.namespace) is not None
            return Observation(not present, "still present" if present else "gone")

        try:
            eventually(gone, what=f"removal of the kwok probe's namespace {self.namespace}",
                       timeout=self.timeouts(BUDGET), failure=errors.WaitTimeout)  # fmt: skip
        except (errors.KubeError, errors.WaitTimeout) as exc:
            left.append(str(exc))
        return "; ".join(left)


def _exit_codes(pod: Obj) -> list[int]:
    return [
        ((status.get("state") or {}).get("terminated") or {}).get("exitCode")
        for status in (pod.get("status") or {}).get("containerStatuses") or []
    ]


def _state(pod: Obj) -> str:
    """``phase Pending, no container status`` / ``phase Failed, container node terminated (exit code 143)``."""
    status = pod.get("status") or {}
    said = [f"phase {status.get('phase') or 'Pending'}"]
    for container in status.get("containerStatuses") or []:
        for state, detail in (container.get("state") or {}).items():
            code = f" (exit code {detail['exitCode']})" if "exitCode" in (detail or {}) else ""
            said.append(f"container {container.get('name', '?')} {state}{code}")
    if not status.get("containerStatuses"):
        said.append("no container status")
    if pod.get("metadata", {}).get("deletionTimestamp"):
        said.append("being deleted")
    return ", ".join(said)
