"""Simulated KAI binder: binds the pods the scheduler placed, one BindRequest at a time (KAI §2.4).

Upstream (``pkg/binder/controllers/bindrequest_controller.go``) the binder acts on every BindRequest that is neither
``Succeeded`` nor ``Failed``, binds the pod to ``spec.selectedNode`` and writes ``status.phase: Succeeded``. With
:attr:`Faults.binder_down` nothing acts on them: the scheduler has decided and no pod is ever bound.
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import is_bound, is_terminating
from tests.fakes.kai.scheduler import Kai
from tests.fakes.simulation import Obj


class Binder(Kai):
    def binder(self) -> bool:
        if self.faults.binder_down:
            return False
        changed = False
        for request in self._all(kinds.BIND_REQUEST):
            if (request.get("status") or {}).get("phase") in (ex.BIND_SUCCEEDED, ex.BIND_FAILED):
                continue
            pod = self._find(kinds.POD, request["spec"]["podName"], request["metadata"]["namespace"])
            if pod is None or is_terminating(pod) or not self._ready_to_bind(request, pod):
                continue
            if not is_bound(pod):
                self._bind(pod, request["spec"]["selectedNode"])
            request["status"] = {"phase": ex.BIND_SUCCEEDED}
            self.fake.write(self._finished(request))
            changed = True
        return changed

    def _finished(self, request: Obj) -> Obj:
        """Extension point: the BindRequest as the binder writes it back once the pod is bound (tests/fakes/restarts.py
        drops its ownerReference after a restart)."""
        return request

    def _ready_to_bind(self, request: Obj, pod: Obj) -> bool:
        """Extension point: whatever the binder must do before it binds (GPU sharing reserves the device)."""
        return True
