"""What the lifecycle area shares: the episode a case judges, and the steps its cases take the same way.

An :class:`Episode` is every snapshot an :class:`~suites.support.observe.Observer` takes from the moment a case
follows it (the observer calls it for each one, whatever wait took it), so the lifecycle detectors
(:mod:`suites.support.detectors.lifecycle`) read a whole run of a workload, from bound to ended, and not the sample
one wait happened to end on. Following also makes every snapshot read the case's Queues (their ``status``) and,
when asked, the namespace's BindRequests.
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.detectors.gang import PartialGangWatch
from kai_conformance.suites.support.detectors.lifecycle import queue_holds, queue_released
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.observe import Check, Observer, Workload
from kai_conformance.suites.support.snapshot import Snapshot, name_of
from kai_conformance.suites.support.timing import settle


class Episode:
    """Every snapshot of a case's namespace, in the order they were taken."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []

    def observe(self, snap: Snapshot) -> None:
        self.snapshots.append(snap)

    def pod_names(self, workload: str) -> set[str]:
        """Every pod of ``workload`` the episode saw, ended or deleted since."""
        return {name_of(p) for snap in self.snapshots for p in snap.of(workload).pods}


def follow(observer: Observer, *queues: str, bindrequests: bool = False) -> Episode:
    """From now on every snapshot of ``observer`` also reads ``queues`` (and BindRequests) and goes into the episode."""
    episode = Episode()
    observer.queues = tuple(queues)
    observer.bindrequests = bindrequests
    observer.listeners.append(episode.observe)
    return episode


def never_partial(timeouts: TimeoutPolicy, *gangs: Workload) -> Check:
    """A guard for every wait of an episode: no gang stays partially bound for longer than a bind or an eviction
    takes (:class:`PartialGangWatch`, judged on every observation)."""
    watches = [(gang, PartialGangWatch(gang.size, settle(timeouts))) for gang in gangs]

    def check(snap: Snapshot) -> Verdict:
        verdicts = [watch.observe(snap.of(gang.name)) for gang, watch in watches]
        return verdicts[0] if len(verdicts) == 1 else all_of(*verdicts)

    return check


def lifetime_budget(run_seconds: float, timeouts: TimeoutPolicy) -> float:
    """How long to wait for a workload to end on its own: the lifetime its environment gives it (scaled like every
    budget) plus the time a bound pod takes to start."""
    return run_seconds * timeouts.scale + timeouts("running")


def suspend(kube: KubeApi, namespace: str, trainjob: str, suspended: bool) -> None:
    """Set ``spec.suspend`` of a running TrainJob (Trainer passes it to the JobSet, JobSet to the Jobs)."""
    kube.patch(kinds.TRAIN_JOB, trainjob, {"spec": {"suspend": suspended}}, namespace=namespace)


def judge(record: CaseRecorder, gang: Workload, verdict: Verdict, row: str) -> None:
    """Record a verdict about ``gang`` and assert it (a failure carries the gang's chain diagnosis)."""
    record.verdict(verdict)
    gang.confirm(verdict, row)


def wait_held(observer: Observer, queue: str, gpus: int, timeouts: TimeoutPolicy, row: str) -> None:
    """Before a case ends a gang it just saw bound: KAI's queue-controller has counted its GPUs (it follows the
    PodGroup's status, which follows the pods), so the release that follows is measured from a queue that held them."""
    observer.until(
        lambda s: queue_holds(s, queue, gpus),
        what=f"{row} queue {queue} counts the {gpus} GPU(s) just bound",
        timeout=timeouts("api"),
    )


def wait_released(
    observer: Observer, episode: Episode, queue: str, gang: Workload, pods: int, timeouts: TimeoutPolicy, row: str
) -> Verdict:
    """Wait (a few scheduling periods) until the queue shows none of the ended gang's 1-GPU pods; the verdict judges
    the whole episode: the queue showed them while the gang ran, and dropped them within :func:`settle`."""
    grace = settle(timeouts)
    _, verdict = observer.settle(
        lambda s: queue_released(episode.snapshots, queue, gang.name, pods, pods, grace),
        what=f"{row} queue {queue} releases the GPUs of {gang.name}",
        timeout=grace + timeouts("api"),
        about=gang.about,
    )
    return verdict
