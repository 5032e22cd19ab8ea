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

* A running container of the suite's workload whose environment gives it a lifetime (``KC_RUN_SECONDS`` and the
  others: :func:`clusters.suite_stack.planned_end`, the contract of ``WORKLOAD_COMMAND``) exits on its own that
  long after it started (on the FakeKube clock), with its exit code; the environment is the container's ``env``,
  ``value`` or a ``fieldRef`` to the pod's labels or annotations (how the Job controller hands over
  ``JOB_COMPLETION_INDEX``). Under ``restartPolicy: Never`` the container stays terminated and the pod's phase
  follows once every container has ended (``getPhase``: ``Succeeded`` if all exited 0, else ``Failed``); under
  ``OnFailure`` (or ``Always``) a container that exited non-zero (or at all) is restarted in place, ``restartCount``
  + 1 (pkg/kubelet/kuberuntime ``computePodActions``).
"""

from __future__ import annotations

import re

from kai_conformance.clusters.suite_stack import COMPLETION_INDEX_ENV, EVICTED_EXIT_CODE, WORKLOAD_COMMAND, planned_end
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.snapshot import is_bound, is_terminating, parse_time
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


#: ``metadata.labels['key']`` / ``metadata.annotations['key']``: the fieldRefs the kubelet resolves into env values.
FIELD_REF = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def environment(pod: Obj, container: Obj) -> dict[str, str]:
    """The container's environment as the kubelet builds it: plain values and fieldRefs to the pod's metadata."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
            continue
        ref = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        found = FIELD_REF.fullmatch(ref)
        if found:
            env[var["name"]] = str((pod["metadata"].get(found.group(1)) or {}).get(found.group(2), ""))
    return env


def own_end(pod: Obj, container: Obj) -> tuple[float, int] | None:
    """(seconds after start, exit code) of a workload container that ends on its own, None if it runs on."""
    if container.get("command") != WORKLOAD_COMMAND:
        return None
    env = environment(pod, container)
    return planned_end(env, int(env.get(COMPLETION_INDEX_ENV) or 0))


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
            elif (pod.get("status") or {}).get("phase") == "Running":
                changed |= self._run_to_own_end(pod)
        return changed

    def _run_to_own_end(self, pod: Obj) -> bool:
        """End the containers whose own lifetime is over (module docstring); restart or finish the pod."""
        now = self.fake.clock().timestamp()
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
        ended = False
        for container in pod["spec"]["containers"]:
            status = statuses.get(container["name"]) or {}
            running = (status.get("state") or {}).get("running")
            end = own_end(pod, container) if running else None
            if not running or end is None or now < (parse_time(running.get("startedAt")) or now) + end[0]:
                continue
            code, stamp = end[1], self._now()
            policy = pod["spec"].get("restartPolicy", "Always")
            if policy == "Always" or (policy == "OnFailure" and code != 0):
                status["restartCount"] = status.get("restartCount", 0) + 1
                status["lastState"] = {"terminated": {"exitCode": code, "finishedAt": stamp}}
                status["state"] = {"running": {"startedAt": stamp}}
            else:
                status.update(ready=False, started=False, state={"terminated": {
                    "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": running["startedAt"], "finishedAt": stamp}})  # fmt: skip
            ended = True
        if not ended:
            return False
        states = [(s.get("state") or {}).get("terminated") for s in statuses.values()]
        if all(states):
            pod["status"]["phase"] = phase_of([t["exitCode"] for t in states if t])
        self.fake.write(pod)
        return True

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
