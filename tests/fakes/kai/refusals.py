"""Simulated KAI Scheduler, what it says when it leaves a PodGroup pending: ``PodScheduled=False/Unschedulable`` on
each waiting pod, the PodGroup's ``UnschedulableOnNodePool`` scheduling condition, and an ``Unschedulable`` event
per cycle, repeats counted on one Event as client-go's correlator does (suites/support/refusals.py). Once every pod
of a PodGroup is bound the condition is cleared (KAI v0.17.0 #1908, ``clearPodGroupSchedulingCondition``), except
where the KAI version has KAI #1888 (suites/support/known_bugs.py: v0.16)."""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.known_bugs import BY_KEY
from kai_conformance.suites.support.snapshot import is_bound, uid_of
from tests.fakes.simulation import Obj, Simulation


class KaiRefusals(Simulation):
    #: Whether KAI keeps a PodGroup's UnschedulableOnNodePool once its gang is bound (KAI #1888); None: as the
    #: known-bugs table says of the KAI version. A flow sets it to show a KAI with the bug where it is fixed.
    keeps_unschedulable: bool | None = None

    def _bound_whole(self, pg: Obj, members: list[Obj]) -> bool:
        """Every pod of ``pg`` is bound (none awaits its bind): KAI clears the PodGroup's scheduling conditions."""
        keeps = self.keeps_unschedulable
        if keeps is None:
            keeps = bool(BY_KEY["KAI #1888"].affects(self.kai_version))
        conditions = (pg.get("status") or {}).get("schedulingConditions")
        if keeps or not conditions or not members or not all(is_bound(p) for p in members):
            return False
        pg["status"]["schedulingConditions"] = []
        self.fake.write(pg)
        return True

    def _unschedulable(self, pg: Obj, waiting: list[Obj], reason: str, message: str) -> bool:
        text = f"{reason}: {message}."
        changed = False
        for pod in waiting:
            condition = {"type": "PodScheduled", "status": "False", "reason": ex.UNSCHEDULABLE_REASON, "message": text}
            if (pod.get("status") or {}).get("conditions") != [condition]:
                pod["status"] = {"phase": "Pending", "conditions": [condition]}
                self.fake.write(pod)
                changed = True
        condition = {"type": ex.UNSCHEDULABLE_CONDITION, "nodePool": "default", "reason": ex.UNSCHEDULABLE_REASON,
                     "status": "True", "message": text, "reasons": [{"reason": reason, "message": message}]}  # fmt: skip
        # The condition is rewritten only when it changes; transitionID and lastTransitionTime move only then
        # (default_status_updater.go setPodGroupSchedulingCondition/shouldUpdateCondition).
        current = pg.get("status", {}).get("schedulingConditions") or []
        if [_without_transition(c) for c in current] != [condition]:
            transition = int(current[-1].get("transitionID", 0)) + 1 if current else 1
            pg["status"] = {"schedulingConditions": [{**condition, "transitionID": str(transition),
                                                      "lastTransitionTime": self._now()}]}  # fmt: skip
            self.fake.write(pg)
            changed = True
        self._refused(pg, text)
        return changed

    def _refused(self, pg: Obj, text: str) -> None:
        """Every cycle that leaves the PodGroup pending records ``Unschedulable`` on it (closeSession →
        markPodGroupUnschedulable); client-go's event correlator sends a repeat as ``count`` + 1 on the same Event
        (suites/support/refusals.py). Not a change the other controllers react to. ``kai_events_throttled``: the
        spam filter's budget is spent, so repeats are not sent."""
        key = (pg["metadata"]["namespace"], uid_of(pg), text)
        before = self._stamp((kinds.EVENT,))
        same = self._unschedulable_events().get(key)
        if same is None:
            same = self.fake.record_event(pg, ex.UNSCHEDULABLE_REASON, text)["metadata"]["name"]
        elif not self.faults.kai_events_throttled:
            event = self._find(kinds.EVENT, same, key[0])
            event["count"] = event.get("count", 1) + 1
            event["lastTimestamp"] = self._now()
            self.fake.write(event)
        else:
            return
        known = self._cache.get("unschedulable-events")
        if known is not None and known[0] == before:  # what this write changed, kept up to date
            known[1].setdefault(key, same)
            self._cache["unschedulable-events"] = (self._stamp((kinds.EVENT,)), known[1])

    def _unschedulable_events(self) -> dict[tuple[str, str, str], str]:
        """(namespace, uid, message) → the name of the first ``Unschedulable`` Event of that object and message."""

        def index() -> dict[tuple[str, str, str], str]:
            found: dict[tuple[str, str, str], str] = {}
            for event in self.fake.stored(kinds.EVENT):
                if event["reason"] == ex.UNSCHEDULABLE_REASON:
                    key = (event["metadata"]["namespace"], event["involvedObject"]["uid"], event["message"])
                    found.setdefault(key, event["metadata"]["name"])
            return found

        return self._derived("unschedulable-events", index, (kinds.EVENT,))


def _without_transition(condition: Obj) -> Obj:
    return {k: v for k, v in condition.items() if k not in ("transitionID", "lastTransitionTime")}
