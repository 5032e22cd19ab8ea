"""Component restarts for the chaos area: which components may be restarted, and how.

A component is found the way the chain diagnosis finds it (suites/support/components.py): by the image its
Deployment runs, in any namespace, so a KAI shard's own scheduler (``kai-scheduler-kc-slice-0``) restarts with the
default one. A restart deletes the pods of each such Deployment (what an upgrade, an OOM kill or a lost node does to
them) and waits until every Deployment is Available again with a Ready pod that is not one of the deleted ones.

Components that do not run as Deployments (the real controllers as host processes beside kwok nodes, a managed
control plane) restart through ``--chaos-restart-command``: a command the run calls with the component's name
(``{component}`` in it is replaced), which returns once the component is back. When given, the command is used for
every component, Deployment or not: a stack whose controllers run elsewhere may keep stand-in Deployments for the
suite's stack check, and deleting their pods would restart nothing.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kai_conformance.clusters.install.readiness import deployment_available
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually
from kai_conformance.suites.support.components import Component as ChainComponent
from kai_conformance.suites.support.components import deployments_of
from kai_conformance.suites.support.snapshot import Obj, condition, is_terminating, name_of, uid_of

#: Components a chaos run may restart, by the name ``--chaos-components`` takes → the image names their Deployments
#: run (KAI's operator names its operand images so: deployments/kai-scheduler/values.yaml).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "scheduler": ("scheduler",),
    "binder": ("binder",),
    "podgrouper": ("podgrouper",),
    "queuecontroller": ("queuecontroller",),
    "podgroupcontroller": ("podgroupcontroller",),
    "jobset": ("jobset",),
    "trainer": ("trainer-controller-manager",),
}
#: What a chaos run on a cluster it made restarts unless told otherwise: KAI's components along a gang's way.
DEFAULT_COMPONENTS = ("scheduler", "binder", "podgrouper", "queuecontroller")
KAI_COMPONENTS = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller")


def parse_components(text: str | None) -> tuple[str, ...]:
    """``--chaos-components`` (comma-separated) → names; an unknown name is a usage error that lists the known."""
    if not text:
        return DEFAULT_COMPONENTS
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        raise errors.UsageError(
            f"--chaos-components: unknown component(s) {', '.join(unknown)}; known: {', '.join(COMPONENTS)}"
        )
    return names


@dataclass
class Restart:
    """One restart as it happened: when (seconds since the epoch), what was deleted, when it was back."""

    component: str
    started: float
    replaced: list[str] = field(default_factory=list)  # "namespace/pod" deleted
    ready_at: float | None = None
    error: str = ""

    @property
    def ready_seconds(self) -> float | None:
        return None if self.ready_at is None else self.ready_at - self.started

    def describe(self) -> str:
        what = ", ".join(self.replaced) or "by command"
        back = f"back after {self.ready_seconds:.1f}s" if self.ready_at is not None else f"not back: {self.error}"
        return f"{self.component} ({what}) {back}"


class Restarter:
    def __init__(self, kube: KubeApi, timeouts: TimeoutPolicy, command: str | None = None) -> None:
        self.kube, self.timeouts, self.command = kube, timeouts, command

    def deployments(self, component: str) -> list[Obj]:
        images = COMPONENTS[component]
        return deployments_of(ChainComponent(component, images, "restarts"), self.kube.list(kinds.DEPLOYMENT))

    def available(self, components: tuple[str, ...]) -> dict[str, str]:
        """Which of ``components`` this cluster lets the run restart, and how (a reason for those it cannot)."""
        found = {}
        for name in components:
            deployments = self.deployments(name)
            if self.command:
                found[name] = f"by command: {self.command}"
            elif deployments:
                found[name] = ", ".join(f"{d['metadata'].get('namespace')}/{name_of(d)}" for d in deployments)
        return found

    def restart(self, component: str) -> Restart:
        """Restart ``component`` and wait until it is back; a component that does not come back within the
        ``ready`` budget is recorded as such (the mix then judges whether the cluster converged without it)."""
        return self.begin(component)()

    def begin(self, component: str) -> Callable[[], Restart]:
        """Restart ``component`` now: its Deployments' pods are deleted before this returns, so whatever the run does
        next meets the component restarting, however busy the machine (a restart at a mix's moment 0 precedes an
        arrival at moment 5). Returns the wait until it is back (a run waits in a thread of its own); a restart by
        command is the command, run by that wait."""
        restart = Restart(component, time.time())
        deployments = self.deployments(component)
        if not self.command and not deployments:
            raise errors.UsageError(f"no Deployment runs {component} and no --chaos-restart-command is given")
        old = set() if self.command else self._delete_pods(deployments, restart)

        def back() -> Restart:
            try:
                if self.command:
                    self._run_command(component)
                    restart.ready_at = time.time()
                else:
                    self._wait_back(deployments, old, restart)
            except (errors.WaitTimeout, AssertionError, subprocess.SubprocessError) as failure:
                restart.error = str(failure).splitlines()[0]
            return restart

        return back

    def _delete_pods(self, deployments: list[Obj], restart: Restart) -> set[str]:
        """Delete the Deployments' pods; the uids of those deleted."""
        old: set[str] = set()
        for deployment in deployments:
            namespace = deployment["metadata"]["namespace"]
            for pod in self.kube.list(kinds.POD, namespace, labels=selector(deployment)):
                old.add(uid_of(pod))
                self.kube.delete(kinds.POD, name_of(pod), namespace, allow_foreign=True)
                restart.replaced.append(f"{namespace}/{name_of(pod)}")
        return old

    def _wait_back(self, deployments: list[Obj], old: set[str], restart: Restart) -> None:
        def back() -> Observation:
            waiting = []
            for deployment in deployments:
                namespace = deployment["metadata"]["namespace"]
                pods = self.kube.list(kinds.POD, namespace, labels=selector(deployment))
                fresh = [p for p in pods if uid_of(p) not in old and ready(p)]
                up, why = deployment_available(self.kube.find(kinds.DEPLOYMENT, name_of(deployment), namespace))
                if not fresh or not up:
                    waiting.append(f"{namespace}/{name_of(deployment)} ({len(fresh)} new Ready pod(s); {why})")
            return Observation(not waiting, "back" if not waiting else "waiting for " + ", ".join(waiting))

        eventually(back, what=f"{restart.component} back after its restart", timeout=self.timeouts("ready"),
                   failure=errors.WaitTimeout)  # fmt: skip
        restart.ready_at = time.time()

    def _run_command(self, component: str) -> None:
        argv = shlex.split(self.command.replace("{component}", component)) if self.command else []
        subprocess.run(argv, check=True, timeout=self.timeouts("ready"), capture_output=True)


def selector(deployment: Obj) -> dict[str, str]:
    return dict(((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})


def ready(pod: Obj) -> bool:
    return not is_terminating(pod) and (condition(pod, "Ready") or {}).get("status") == "True"
