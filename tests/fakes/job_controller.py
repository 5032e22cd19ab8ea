"""Simulated Job controller: one pod per index of a Job's parallelism; suspending a Job removes its pods.

A pod that disappears while its Job runs (deleted or evicted) counts as a failure of its index; an index that has
failed more than ``spec.backoffLimitPerIndex`` times is failed and never re-created (Kubernetes' per-index backoff
limit, GA in 1.33). Without that field an index is re-created whatever happened to it. Re-creation is immediate:
the per-index back-off delay is not simulated.
"""

from __future__ import annotations

import copy

from fixtures import kinds
from suites.support.snapshot import is_terminating, labels_of, uid_of
from tests.fakes.simulation import INDEX_LABEL, JOB_NAME_LABEL, Obj, Simulation


class JobController(Simulation):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._index_pods: dict[tuple[str, int], str] = {}  # (Job uid, index) → uid of the pod made for it last
        self._index_failures: dict[tuple[str, int], int] = {}

    # ---------------------------------------------------------------------------------------- Job controller
    def jobs(self) -> bool:
        changed = False
        for job in self._all(kinds.JOB):
            live = [p for p in self._owned(kinds.POD, job) if not is_terminating(p)]
            if job["spec"].get("suspend"):
                for pod in live:
                    self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
                self._forget_pods_of(job)  # pods removed by suspension are no failure of their index
                changed |= bool(live)
                continue
            present = {labels_of(p).get(INDEX_LABEL) for p in live}
            for index in range(job["spec"].get("parallelism", 1)):
                if str(index) not in present and not self._index_failed(job, index):
                    pod = self.fake.put(self._pod_for(job, index))
                    self._index_pods[(uid_of(job), index)] = uid_of(pod)
                    changed = True
        return changed

    def _index_failed(self, job: Obj, index: int) -> bool:
        """Count the loss of the index's last pod as a failure; True when the index failed past its limit."""
        key = (uid_of(job), index)
        if self._index_pods.pop(key, None) is not None:
            self._index_failures[key] = self._index_failures.get(key, 0) + 1
        limit = job["spec"].get("backoffLimitPerIndex")
        return limit is not None and self._index_failures.get(key, 0) > limit

    def _forget_pods_of(self, job: Obj) -> None:
        for key in [k for k in self._index_pods if k[0] == uid_of(job)]:
            del self._index_pods[key]

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
