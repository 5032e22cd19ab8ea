"""Scheduling guard: serial cases alone (with writer preference), GPU leases all-or-nothing, locks freed when a
worker dies, and the refusal of disruptive cases on existing clusters without opt-in."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kai_conformance.clusters.existing import OPT_IN_COMMAND
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.plugin.scheduling import (
    CaseGate,
    FileLockSlot,
    case_guard,
    gpu_demand,
    gpu_lease,
    pods_of_earlier_cases,
    refusal,
    seat_order,
    wait_for_drained_cluster,
)
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import namespace_manifest
from tests.builders import unsliced
from tests.fakes.installation import make_settings
from tests.suite_cases import suite_cases

pytestmark = pytest.mark.usefixtures("fast_polling")

PATIENT = TimeoutPolicy(scale=0.005)  # lease budget 4.5 s: long enough for the other thread to let go
EXPIRING = TimeoutPolicy(scale=0.00003)  # lease budget 27 ms


def in_thread(action) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_ordinary_cases_share_and_a_serial_case_waits_for_them(tmp_path: Path) -> None:
    gate = CaseGate(tmp_path, PATIENT)
    events: list[str] = []
    release_readers = threading.Event()

    def reader(name: str) -> None:
        with gate.hold(exclusive=False, what=name):
            events.append(f"{name} in")
            release_readers.wait(5)
            events.append(f"{name} out")

    readers = [in_thread(lambda n=n: reader(n)) for n in ("r1", "r2")]
    while events.count("r1 in") + events.count("r2 in") < 2:
        time.sleep(0.005)  # test choreography: both readers inside at once proves sharing

    def writer() -> None:
        with gate.hold(exclusive=True, what="serial"):
            events.append("serial in")
            events.append("serial out")

    writing = in_thread(writer)
    time.sleep(0.05)
    assert "serial in" not in events
    release_readers.set()
    for thread in (*readers, writing):
        thread.join(5)
    assert events.index("serial in") > max(events.index("r1 out"), events.index("r2 out"))


def test_a_waiting_serial_case_stops_new_cases_from_starting(tmp_path: Path) -> None:
    gate = CaseGate(tmp_path, PATIENT)
    events: list[str] = []
    first_out = threading.Event()

    def first_reader() -> None:
        with gate.hold(exclusive=False, what="r1"):
            events.append("r1 in")
            first_out.wait(5)
        events.append("r1 out")

    def writer() -> None:
        with gate.hold(exclusive=True, what="serial"):
            events.append("serial in")
        events.append("serial out")

    def late_reader() -> None:
        with gate.hold(exclusive=False, what="r2"):
            events.append("r2 in")

    threads = [in_thread(first_reader)]
    while "r1 in" not in events:
        time.sleep(0.005)
    threads.append(in_thread(writer))
    time.sleep(0.05)  # the serial case now waits, holding the turnstile
    threads.append(in_thread(late_reader))
    time.sleep(0.05)
    assert "r2 in" not in events
    first_out.set()
    for thread in threads:
        thread.join(5)
    assert events.index("serial in") < events.index("r2 in")


def test_waiting_too_long_for_the_cluster_is_an_infrastructure_timeout(tmp_path: Path) -> None:
    holder = CaseGate(tmp_path, PATIENT)
    waiting = CaseGate(tmp_path, EXPIRING)
    with (
        holder.hold(exclusive=True, what="serial"),
        pytest.raises(errors.WaitTimeout) as caught,
        waiting.hold(exclusive=False, what="tests/x.py::test_y"),
    ):
        pass
    assert "tests/x.py::test_y (beside other cases): not reached" in str(caught.value)
    assert "last observed: a serial case uses the cluster" in str(caught.value)


def test_gpu_leases_never_exceed_the_cluster(tmp_path: Path) -> None:
    events: list[str] = []
    done = threading.Event()

    def big() -> None:
        with gpu_lease(tmp_path, 3, 4, PATIENT, "big"):
            events.append("big in")
            done.wait(5)
        events.append("big out")

    def second() -> None:
        with gpu_lease(tmp_path, 2, 4, PATIENT, "second"):
            events.append("second in")

    threads = [in_thread(big)]
    while "big in" not in events:
        time.sleep(0.005)
    threads.append(in_thread(second))
    time.sleep(0.05)
    assert "second in" not in events
    free = [slot for slot in gpu_slots(tmp_path, 4) if slot.try_acquire(exclusive=True)]
    assert len(free) == 1  # the one free GPU is still there: the waiting case holds nothing partially
    for slot in free:
        slot.release()
    done.set()
    for thread in threads:
        thread.join(5)
    assert events.index("second in") > events.index("big out")


def gpu_slots(directory: Path, total: int) -> list[FileLockSlot]:
    return [FileLockSlot(directory / f"gpu-{index}.lock") for index in range(total)]


def test_a_case_waiting_for_its_gpus_stops_later_leases_so_a_lease_of_every_gpu_is_not_starved(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    first_out = threading.Event()

    def first() -> None:
        with gpu_lease(tmp_path, 1, 4, PATIENT, "first"):
            events.append("first in")
            first_out.wait(5)
        events.append("first out")

    def everything() -> None:
        with gpu_lease(tmp_path, 4, 4, PATIENT, "every GPU"):
            events.append("every GPU in")
        events.append("every GPU out")

    threads = [in_thread(first)]
    while "first in" not in events:
        time.sleep(0.005)
    threads.append(in_thread(everything))
    time.sleep(0.05)  # the lease of every GPU now waits, holding the GPU turnstile
    with pytest.raises(errors.WaitTimeout) as caught, gpu_lease(tmp_path, 1, 4, EXPIRING, "late"):
        pass  # three GPUs are free, yet the late case waits behind the lease of every GPU
    assert "a case that waits for its GPUs goes first" in str(caught.value)
    first_out.set()
    for thread in threads:
        thread.join(5)
    assert events.index("first out") < events.index("every GPU in")
    with gpu_lease(tmp_path, 1, 4, EXPIRING, "after"):  # the turnstile was let go with the lease
        events.append("after in")


def test_a_lease_that_never_comes_names_what_is_free(tmp_path: Path) -> None:
    with (
        gpu_lease(tmp_path, 3, 4, PATIENT, "holder"),
        pytest.raises(errors.WaitTimeout) as caught,
        gpu_lease(tmp_path, 2, 4, EXPIRING, "tests/x.py::test_gang"),
    ):
        pass
    assert "tests/x.py::test_gang (needs 2 of 4 GPUs): not reached" in str(caught.value)
    assert "1 of the 2 GPUs it needs are free" in str(caught.value)


def test_a_dead_workers_lock_is_released_by_the_os(tmp_path: Path) -> None:
    lock = tmp_path / "cases.lock"
    holder = subprocess.Popen(
        [sys.executable, "-S", "-c", f"import fcntl,sys,time; f=open({str(lock)!r},'w'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not FileLockSlot(lock).try_acquire(exclusive=False)
    finally:
        holder.kill()
        holder.wait()
    slot = FileLockSlot(lock)
    assert slot.try_acquire(exclusive=True)
    slot.release()


def state(provider: str, opt_in: str = "") -> ClusterState:
    return ClusterState(provider, "prod", "/k", disruptive_opt_in=opt_in)


def test_disruptive_cases_are_refused_on_existing_clusters_without_opt_in() -> None:
    reason = refusal({"disruptive", "preemption"}, state("existing"))
    assert reason == (
        "disruptive case refused on existing cluster prod: it evicts running workloads and fills every GPU. To allow "
        f"it, pass --allow-disruptive, or opt the cluster in once: {OPT_IN_COMMAND}"
    )
    assert OPT_IN_COMMAND == "kubectl label namespace kube-system kai-conformance/allow-disruptive=true"
    assert refusal({"disruptive"}, state("existing", "--allow-disruptive")) is None
    assert refusal({"serial"}, state("existing")) is None
    assert refusal({"disruptive"}, state("kind", "kind cluster made for testing")) is None


def test_gpu_demand_comes_from_the_case_object() -> None:
    class Gang:
        def manifests(self, ctx):
            return []

        def gpu_demand(self, layout: GpuLayout) -> int:
            return layout.max_per_node + 1

    layout = GpuLayout((GpuNode("a", 4), GpuNode("b", 4)))
    item = SimpleNamespace(callspec=SimpleNamespace(params={"case": Gang()}))
    assert gpu_demand(item, layout) == 5  # type: ignore[arg-type]
    assert gpu_demand(SimpleNamespace(callspec=None), layout) == 0  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ the per-case guard
RUN_ID = "20261123-050435-3aee"


class Request:
    """What case_guard reads from pytest's request: config (suite mode), the item, and fixture values."""

    def __init__(self, tmp_path: Path, state: ClusterState, markers: tuple[str, ...], fixtures: dict,
                 case: object = None) -> None:  # fmt: skip
        from kai_conformance.fixtures.plugin import SUITE_MODE

        self.config = SimpleNamespace(stash=pytest.Stash())
        self.config.stash[SUITE_MODE] = True
        self.fixturenames = ["cluster", "workspace"]
        self.node = SimpleNamespace(
            stash=pytest.Stash(),
            user_properties=[],
            nodeid="suites/test_x.py::test_case",
            iter_markers=lambda: [SimpleNamespace(name=m) for m in markers],
            callspec=SimpleNamespace(params={"case": case} if case else {}),
        )
        self.values = {"cluster": state, "run": SimpleNamespace(state_dir=tmp_path, run_id=RUN_ID), **fixtures}

    def getfixturevalue(self, name: str) -> object:
        return self.values[name]


@pytest.fixture
def guarded(tmp_path: Path, fake):
    from tests.fakes.installation import SimulatedStack, make_settings

    SimulatedStack(fake).add_workers(3)
    for node in fake.objects(kinds.NODE):
        node["status"]["capacity"]["nvidia.com/gpu"] = "4"
        fake.put(node)
    settings = make_settings(tmp_path, timeouts=PATIENT, topology=unsliced("pr-gate"))
    layout = GpuLayout(tuple(GpuNode(n["metadata"]["name"], 4) for n in fake.objects(kinds.NODE)))
    return {"settings": settings, "gpu_layout": layout, "kube": fake}


def test_guard_is_inert_outside_suite_mode(tmp_path: Path) -> None:
    request = Request(tmp_path, state("kind"), (), {})
    request.config.stash = pytest.Stash()
    request.config.args = ["tests"]  # not under suites/: the plugin is inert
    with case_guard(request):  # type: ignore[arg-type]
        pass
    assert not (tmp_path / "locks").exists()


def test_guard_checks_the_fake_gpus_on_kind_under_a_shared_lock(tmp_path: Path, guarded, fake) -> None:
    fake.calls.clear()
    neighbour = CaseGate(tmp_path / "locks", EXPIRING).hold(exclusive=False, what="neighbour")
    with case_guard(Request(tmp_path, state("kind", "kind"), ("gang",), guarded)), neighbour:  # type: ignore[arg-type]
        pass  # an ordinary neighbour got in beside it
    assert [c.operation for c in fake.calls] == ["list"]


def test_guard_runs_serial_cases_alone(tmp_path: Path, guarded) -> None:
    with (
        case_guard(Request(tmp_path, state("kind", "kind"), ("serial",), guarded)),  # type: ignore[arg-type]
        pytest.raises(errors.WaitTimeout),
        CaseGate(tmp_path / "locks", EXPIRING).hold(exclusive=False, what="neighbour"),
    ):
        pass


def test_guard_skips_refused_and_oversized_cases(tmp_path: Path, guarded) -> None:
    refused = Request(tmp_path, state("existing"), ("disruptive",), guarded)
    with (
        pytest.raises(pytest.skip.Exception, match="disruptive case refused on existing cluster prod"),
        case_guard(refused),
    ):  # type: ignore[arg-type]
        pass

    class Greedy:
        def manifests(self, ctx):
            return []

        def gpu_demand(self, layout: GpuLayout) -> int:
            return layout.total + 1

    request = Request(tmp_path, state("existing"), (), guarded, case=Greedy())
    with pytest.raises(pytest.skip.Exception, match="needs 13 GPUs at once; cluster prod has 12"), case_guard(request):  # type: ignore[arg-type]
        pass


def test_an_over_subscribed_gang_leases_every_gpu_so_no_gpu_case_runs_beside_it_but_the_others_do(
    tmp_path: Path, guarded
) -> None:
    """The over-cluster gangs are not serial: their lease of every GPU keeps out every case of the suites that
    leases a GPU, for as long as the gang holds it, while the cases that lease none run beside it."""
    cases = suite_cases()
    reserving = [c for c in cases if getattr(c.case, "reserves_every_gpu", False)]
    # The AI conformance negative gang case is the gang area's own over-cluster case (the same lease).
    assert sorted(c.test.split("::")[0] for c in reserving if c.case.id == "over-cluster-of-1-gpu") == [
        "test_ai_conformance.py",
        "test_gang.py",
    ]
    gangs = [c for c in reserving if c.test.startswith("test_gang.py")]
    assert sorted(c.case.id for c in gangs) == ["over-cluster-of-1-gpu", "over-cluster-of-whole-node"]
    side_by_side = [c for c in cases if not c.marks & {"serial", "disruptive"} and c not in reserving]
    layout = guarded["gpu_layout"]
    leasing = [c for c in side_by_side if c.case.gpu_demand(layout) > 0]
    idle = [c for c in side_by_side if c.case.gpu_demand(layout) == 0]
    assert len(leasing) > 20 and len(idle) >= 4  # e.g. missing queue, over-limit, more-than-any-node, controls
    at_once = TimeoutPolicy(scale=0.000005)  # lease budget 4.5 ms: a case either gets in at once or not at all
    impatient = {**guarded, "settings": dataclasses.replace(guarded["settings"], timeouts=at_once)}
    kind = state("kind", "kind")
    for gang, kept_out in zip(gangs, (leasing, leasing[:3]), strict=True):  # both leases are the same code path
        assert not gang.marks & {"serial", "disruptive"}
        assert gang.case.gpu_demand(layout) == layout.total == 12
        with case_guard(Request(tmp_path, kind, tuple(gang.marks), guarded, case=gang.case)):  # type: ignore[arg-type]
            for other in kept_out:
                with (
                    pytest.raises(errors.WaitTimeout, match="GPUs it needs are free"),
                    case_guard(Request(tmp_path, kind, tuple(other.marks), impatient, case=other.case)),  # type: ignore[arg-type]
                ):
                    pytest.fail(f"{other.test} ran beside {gang.test}")
            beside = []
            for other in idle:
                with case_guard(Request(tmp_path, kind, tuple(other.marks), impatient, case=other.case)):  # type: ignore[arg-type]
                    beside.append(other.test)
            assert beside == [c.test for c in idle]
        with case_guard(Request(tmp_path, kind, tuple(leasing[0].marks), impatient, case=leasing[0].case)):  # type: ignore[arg-type]
            pass  # the lease went with the gang


def test_a_serial_case_waits_until_earlier_cases_pods_have_left_the_nodes(tmp_path: Path, guarded, fake) -> None:
    """Seen on the real controllers: a case's namespace is deleted without waiting, so a serial placement case that
    started 2 s after the previous case judged its placements against that case's pods, gone a moment later."""
    earlier = stamp(namespace_manifest("kc-earlier"), RUN_ID, "suites/test_x.py::test_earlier")
    fake.put(earlier)
    other_run = stamp(namespace_manifest("kc-other-run"), "another-run", "suites/test_x.py::test_other")
    fake.put(other_run)
    for namespace in ("kc-earlier", "kc-other-run"):
        fake.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": namespace},
                "spec": {"nodeName": "kai-conformance-worker", "containers": []},
                "status": {"phase": "Running"},
            }
        )
    assert pods_of_earlier_cases(fake, RUN_ID) == ["kc-earlier/p"]  # another run's pods are not this run's to wait for
    impatient = {**guarded, "settings": make_settings(tmp_path, timeouts=EXPIRING, topology=unsliced("pr-gate"))}
    with (
        pytest.raises(errors.WaitTimeout, match=r"earlier cases' pods to leave the nodes[\s\S]*kc-earlier/p"),
        case_guard(Request(tmp_path, state("kind", "kind"), ("serial",), impatient)),  # type: ignore[arg-type]
    ):
        pass
    fake._remove(kinds.POD, "kc-earlier", "p")  # the namespace controller removed it
    with case_guard(Request(tmp_path, state("kind", "kind"), ("serial",), guarded)):  # type: ignore[arg-type]
        pass  # drained: the serial case starts


def test_the_drain_waits_on_while_earlier_pods_keep_leaving_and_fails_once_they_stop(tmp_path: Path, fake) -> None:
    fake.put(stamp(namespace_manifest("kc-burst"), RUN_ID, "suites/test_x.py::test_burst"))
    for index in range(3):
        fake.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{index}", "namespace": "kc-burst"},
                "spec": {"nodeName": "n", "containers": []},
                "status": {"phase": "Running"},
            }
        )

    def one_pod_per_round(kube, call) -> None:
        pods = [key for key in kube.store if key[1] == "Pod" and key[2] == "kc-burst"]
        if call.operation == "list" and call.kind == "Pod" and pods:
            kube.store.pop(pods[0])  # one pod goes per look: slower than one budget, never stalled

    fake.reactors.append(one_pod_per_round)
    wait_for_drained_cluster(fake, RUN_ID, EXPIRING, "serial case")  # one budget sees 1 look: it waits on
    assert pods_of_earlier_cases(fake, RUN_ID) == []
    fake.reactors.clear()
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "stuck", "namespace": "kc-burst"},
            "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Running"},
        }
    )
    with pytest.raises(errors.WaitTimeout, match="kc-burst/stuck"):
        wait_for_drained_cluster(fake, RUN_ID, EXPIRING, "serial case")


def test_the_drain_counts_every_pod_of_the_earlier_namespaces_so_pods_leaving_first_off_the_nodes_are_progress(
    tmp_path: Path, fake
) -> None:
    """Seen at 1,000 fake nodes on real kind: the overload's 2,521 pods on the nodes stayed for 240 s while its
    unbound pods went, and the drain, counting only the pods on a node, called that removal stuck."""
    fake.put(stamp(namespace_manifest("kc-overload"), RUN_ID, "suites/test_x.py::test_overload"))
    for name, node in (("bound-0", "n"), ("bound-1", "n"), ("pending-0", None), ("pending-1", None)):
        fake.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "kc-overload"},
                "spec": {"containers": [], **({"nodeName": node} if node else {})},
                "status": {"phase": "Running" if node else "Pending"},
            }
        )

    def pending_pods_go_first(kube, call) -> None:
        pods = sorted(key for key in kube.store if key[1] == "Pod" and key[2] == "kc-overload")
        if call.operation == "list" and call.kind == "Pod" and call.namespace == "kc-overload" and pods:
            pending = [key for key in pods if key[3].startswith("pending")]
            kube.store.pop((pending or pods)[0])  # one pod per count of the namespace: the bound ones last

    fake.reactors.append(pending_pods_go_first)
    wait_for_drained_cluster(fake, RUN_ID, EXPIRING, "serial case")  # the bound pods stayed for two rounds
    assert pods_of_earlier_cases(fake, RUN_ID) == []


# ------------------------------------------------------------------------------------------------ seat order
class _Item:
    def __init__(self, name: str, *markers: str) -> None:
        self.name, self._markers = name, [SimpleNamespace(name=m) for m in markers]

    def iter_markers(self):
        return iter(self._markers)


def test_under_xdist_serial_cases_start_first_those_that_never_take_a_slice_before_the_others() -> None:
    items = [
        _Item("gang-fits", "gang"),
        _Item("consolidation", "consolidation", "serial", "disruptive"),
        _Item("labels", "labels"),
        _Item("default-scheduler-control", "gang", "control", "serial", "shared_workers"),
        _Item("fairness", "fairness", "serial"),
        _Item("evicts", "preemption", "disruptive"),
        _Item("sharing", "sharing", "serial", "shared_workers"),
    ]
    ordered = [i.name for i in seat_order(items)]  # type: ignore[arg-type]
    assert ordered == [
        "default-scheduler-control", "sharing",
        "consolidation", "fairness", "evicts",
        "gang-fits", "labels",
    ]  # fmt: skip


def test_seat_order_applies_in_xdist_workers_of_a_suite_run_only(monkeypatch, tmp_path) -> None:
    from kai_conformance.fixtures import plugin, run
    from kai_conformance.fixtures.plugin import scheduling
    from kai_conformance.fixtures.plugin.lanes import ORDINARY, SLICEABLE, read_ranks

    items = [_Item("ordinary"), _Item("serial", "serial")]
    for item in items:
        item.nodeid = f"suites/test_x.py::{item.name}"  # type: ignore[attr-defined]
    monkeypatch.setattr(plugin, "in_suite_mode", lambda config: True)
    monkeypatch.setattr(run, "run_context", lambda config: SimpleNamespace(state_dir=tmp_path))
    for config, expected in ((SimpleNamespace(), ["ordinary", "serial"]),
                             (SimpleNamespace(workerinput={}), ["serial", "ordinary"])):  # fmt: skip
        ordered = list(items)
        scheduling.pytest_collection_modifyitems(config, ordered)  # type: ignore[arg-type]
        assert [i.name for i in ordered] == expected
    assert read_ranks(tmp_path) == {"suites/test_x.py::serial": SLICEABLE, "suites/test_x.py::ordinary": ORDINARY}
    monkeypatch.setattr(plugin, "in_suite_mode", lambda config: False)
    ordered = list(items)
    scheduling.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), ordered)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["ordinary", "serial"], "the self-tests' own order is left alone"
