"""Simulated kubelet: starts bound pods and ends deleted ones the way a real node does.

* A pod bound to a node (``spec.nodeName``) and not being deleted goes ``Running``, its containers ``running``.
* A pod on a node with a ``deletionTimestamp`` is killed: every container gets SIGTERM and, after the grace period,
  SIGKILL (pkg/kubelet/kuberuntime/kuberuntime_container.go ``killContainer``, never less than 2 s). What each
  container exits with follows from what it runs (:func:`exit_code_on_termination`), and the pod's phase from the
  exit codes: a terminal pod whose containers all exited 0 is ``Succeeded``, otherwise ``Failed``
  (pkg/kubelet/kubelet_pods.go ``getPhase``; SIG Node keeps it so, kubernetes/kubernetes#120182). Once no
  finalizer holds the ended pod, the kubelet's final delete removes it.
* A deleted pod that is on no node never reaches a kubelet: the API server removes it at once when nothing holds it
  (:meth:`~tests.fakes.simulation.Simulation._api_delete`).

A real kubelet ends a deleted pod within its grace period (seconds), before the Job controller's back-off (10 s)
lets a replacement in; the simulated Job controller keeps that order (tests/fakes/job_controller.py).
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE, WORKLOAD_COMMAND
from kai_conformance.fixtures import kinds
from kai_conformance.suites.support.snapshot import is_bound, is_terminating
from tests.fakes.kwok import kwok_node, plays_kwok_nodes
from tests.fakes.simulation import Obj, Simulation

#: 128 + SIGKILL: a container still running when the grace period ends.
SIGKILL_EXIT_CODE = 137
TERMINAL_PHASES = ("Succeeded", "Failed")


def exit_code_on_termination(container: Obj) -> int:
    """What a container exits with when its pod is deleted (SIGTERM, then SIGKILL after the grace period).

    * the suite's workload command traps SIGTERM and exits :data:`~clusters.suite_stack.EVICTED_EXIT_CODE`;
    * ``pause`` with its own entrypoint exits 0 on SIGTERM (build/pause/linux/pause.c ``sigdown``);
    * anything else is taken to be a PID 1 without a SIGTERM handler, which the kernel does not signal by default
      (pid_namespaces(7)): it runs until SIGKILL.
    """
    command = container.get("command")
    if command == WORKLOAD_COMMAND:
        return EVICTED_EXIT_CODE
    if not command and image_name(container.get("image", "")) == "pause":
        return 0
    return SIGKILL_EXIT_CODE


def image_name(image: str) -> str:
    """``registry.k8s.io/pause:3.10`` → ``pause`` (the last path segment, without tag or digest)."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def phase_of(exit_codes: list[int]) -> str:
    """The phase of a pod whose containers all ended (a deleted pod is terminal whatever its restartPolicy)."""
    return "Succeeded" if all(code == 0 for code in exit_codes) else "Failed"


class Kubelet(Simulation):
    def kubelet(self) -> bool:
        changed = False
        kwok_plays = plays_kwok_nodes(self.fake)
        for pod in self._all(kinds.POD):
            if not is_bound(pod):
                continue
            if kwok_plays and kwok_node(self.fake.store.get(("v1", "Node", None, pod["spec"]["nodeName"]))):
                continue  # a kwok node has no kubelet: the fake kwok plays its pods
            if is_terminating(pod):
                changed |= self._kill(pod)
            elif (pod.get("status") or {}).get("phase") in (None, "Pending"):
                changed |= self._start(pod)
        return changed

    def _start(self, pod: Obj) -> bool:
        now = self._now()
        status = pod.setdefault("status", {})
        if self.faults.image_does_not_start:
            if status.get("containerStatuses"):
                return False
            status["containerStatuses"] = [
                {"name": c["name"], "image": c.get("image", ""), "ready": False, "restartCount": 0,
                 "state": {"waiting": {"reason": "ErrImagePull", "message": "failed to pull and unpack image: not found"}}}
                for c in pod["spec"]["containers"]
            ]  # fmt: skip
            self.fake.write(pod)
            return True
        status["phase"] = "Running"
        status["startTime"] = now
        status["containerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "ready": True, "restartCount": 0, "started": True,
             "state": {"running": {"startedAt": now}}}
            for c in pod["spec"]["containers"]
        ]  # fmt: skip
        self.fake.write(pod)
        return True

    def _kill(self, pod: Obj) -> bool:
        changed = False
        status = pod.setdefault("status", {})
        if status.get("phase") not in TERMINAL_PHASES:
            now = self._now()
            started = {s["name"]: s for s in status.get("containerStatuses") or []}
            codes = []
            ended = []
            for container in pod["spec"]["containers"]:
                code = 0 if self.faults.evicted_pods_succeed else exit_code_on_termination(container)
                codes.append(code)
                running = (started.get(container["name"], {}).get("state") or {}).get("running") or {}
                ended.append({
                    "name": container["name"], "image": container.get("image", ""), "ready": False,
                    "restartCount": 0, "started": False,
                    "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                             "startedAt": running.get("startedAt", now), "finishedAt": now}},
                })  # fmt: skip
            status["phase"] = phase_of(codes)
            status["containerStatuses"] = ended
            self.fake.write(pod)
            changed = True
        if not pod["metadata"].get("finalizers"):
            self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
            changed = True
        return changed
