"""Simulated Job controller: one pod per index of a Job's parallelism; suspending a Job removes its pods."""

from __future__ import annotations

import copy

from fixtures import kinds
from suites.support.snapshot import is_terminating, labels_of
from tests.fakes.simulation import INDEX_LABEL, JOB_NAME_LABEL, Obj, Simulation


class JobController(Simulation):
    # ---------------------------------------------------------------------------------------- Job controller
    def jobs(self) -> bool:
        changed = False
        for job in self._all(kinds.JOB):
            live = [p for p in self._owned(kinds.POD, job) if not is_terminating(p)]
            if job["spec"].get("suspend"):
                for pod in live:
                    self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
                changed |= bool(live)
                continue
            present = {labels_of(p).get(INDEX_LABEL) for p in live}
            for index in range(job["spec"].get("parallelism", 1)):
                if str(index) not in present:
                    self.fake.put(self._pod_for(job, index))
                    changed = True
        return changed

    def _pod_for(self, job: Obj, index: int) -> Obj:
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.get("metadata") or {}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job['metadata']['name']}-{index}-{next(self._names):05x}",
                         "namespace": job["metadata"]["namespace"],
                         "labels": {**(meta.get("labels") or {}), JOB_NAME_LABEL: job["metadata"]["name"],
                                    INDEX_LABEL: str(index)},
                         "annotations": dict(meta.get("annotations") or {}), "ownerReferences": [self._ref(job)]},
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }  # fmt: skip
