"""A made-up but realistic pair of runs, to show what the reports look like (``python -m kai_conformance.reports sample DIR``).

Two version combinations; every status (passed, product failure, infrastructure error, known deviation,
unexpected pass, skipped), a control case, gang and preemption timelines and a label-propagation table. Used
for the README screenshot and by the self-tests; nothing here comes from a real cluster.
"""

from __future__ import annotations

from pathlib import Path

from kai_conformance.reports.records import CaseRecord, DetectorVerdict, LabelObservation, PodTimes, write
from kai_conformance.reports.runinfo import RunInfo

TITLE = "KAI Scheduler conformance report (sample data)"
T0 = 1_790_000_000.0  # a fixed instant, so the sample renders identically every time
NEW = {"kai": "v0.17.0", "trainer": "v2.3.0", "jobset": "v0.12.0", "kubernetes": "1.35"}
OLD = {"kai": "v0.16.8", "trainer": "v2.3.0", "jobset": "v0.12.0", "kubernetes": "1.35"}
GPUS = {"kai-conformance-worker": 4, "kai-conformance-worker2": 4}


def _gang(prefix: str, count: int, start: float, bound: list[float | None], hold: float = 8.0) -> list[PodTimes]:
    pods = []
    for index in range(count):
        at = bound[index] if index < len(bound) else None
        node = f"kai-conformance-worker{'' if index % 2 == 0 else '2'}"
        pods.append(
            PodTimes(f"{prefix}-node-0-{index}", prefix, node if at is not None else None, start + 0.05 * index,
                     at, at + 1.4 + 0.1 * index if at is not None else None, observed=start + hold)
        )  # fmt: skip
    return pods


def _record(nodeid: str, title: str, area: str, versions: dict, run_id: str, outcome: str, **extra) -> CaseRecord:
    markers = sorted({area, *extra.pop("markers", [])} - {""})
    combination = f"kai-{versions['kai']}+trainer-{versions['trainer']}"
    params = extra.pop("params", {})
    return CaseRecord(nodeid=nodeid, title=title, area=area, markers=markers, params=params,
                      combination=combination, versions={**versions, "kubernetes_server": "v1.35.5"},
                      outcome=outcome, run_id=run_id, worker="gw0", **extra)  # fmt: skip


def _run_cases(run_id: str, versions: dict, old: bool) -> list[CaseRecord]:
    r = lambda *a, **k: _record(*a, versions=versions, run_id=run_id, **k)  # noqa: E731
    gang_fits = "suites/test_gang.py::test_a_gang_that_fits_is_placed_whole"
    gang_wont = "suites/test_gang.py::test_a_gang_that_does_not_fit_gets_no_pod_bound"
    cases = [
        r(
            f"{gang_fits}[4x2-gpus]",
            "A gang that fits is placed whole",
            "gang",
            outcome="passed",
            duration=9.8,
            params={"case": "4x2-gpus"},
            verdicts=[DetectorVerdict("gang-all-or-nothing", True, "all 4 pods of trainjob-fits bound within 0.2 s")],
            timelines={"trainjob-fits": _gang("trainjob-fits", 4, T0, [T0 + 2.1, T0 + 2.2, T0 + 2.2, T0 + 2.3])},
        ),
        r(
            f"{gang_fits}[2x4-gpus]",
            "A gang that fits is placed whole",
            "gang",
            outcome="passed",
            duration=8.9,
            params={"case": "2x4-gpus"},
            verdicts=[DetectorVerdict("gang-all-or-nothing", True, "all 2 pods of trainjob-wide bound within 0.1 s")],
            timelines={"trainjob-wide": _gang("trainjob-wide", 2, T0 + 12, [T0 + 13.4, T0 + 13.5])},
        ),
    ]
    if old:
        cases.append(r(
            f"{gang_wont}[5x2-gpus-on-8]", "A gang that does not fit gets no pod bound", "gang", outcome="failed",
            failure_kind="product", duration=21.4, params={"case": "5x2-gpus-on-8"},
            exception="kai_conformance.fixtures.waits.ConditionViolated", category="Product: forbidden state observed",
            message="E   fixtures.waits.ConditionViolated: no pod of trainjob-big bound: violated after 6.2s of a "
                    "15s hold\nE   observed: 3 of 5 pods bound (trainjob-big-node-0-0, -1, -2)",
            verdicts=[DetectorVerdict(
                "gang-all-or-nothing", False,
                "3 of 5 pods of gang trainjob-big were bound while 2 stayed pending: partial placement.\n"
                "A gang needing 10 GPUs on a cluster with 8 must get no pod bound (minMember = 5).")],
            timelines={"trainjob-big": _gang("trainjob-big", 5, T0 + 30, [T0 + 36.2, T0 + 36.3, T0 + 36.3], 9.5)},
            attachments=[f"diagnostics/test_gang.py__{gang_wont.rsplit('::', 1)[-1]}[5x2-gpus-on-8]/{name}" for name in
                         ("events.txt", "pods.txt", "podgroups.yaml", "case-objects.yaml", "logs-kai-scheduler.txt")],
        ))  # fmt: skip
    else:
        cases.append(r(
            f"{gang_wont}[5x2-gpus-on-8]", "A gang that does not fit gets no pod bound", "gang", outcome="passed",
            duration=19.7, params={"case": "5x2-gpus-on-8"},
            verdicts=[DetectorVerdict("gang-all-or-nothing", True, "0 of 5 pods bound during the 15 s hold")],
            timelines={"trainjob-big": _gang("trainjob-big", 5, T0 + 30, [], hold=15.4)},
        ))  # fmt: skip
    cases.append(r(
        "suites/test_gang.py::test_control_default_scheduler_binds_part_of_a_gang",
        "Control: the default scheduler binds part of a gang, and the detector says so", "gang",
        markers=["control"], outcome="passed", duration=12.0,
        verdicts=[DetectorVerdict("gang-all-or-nothing", False, "3 of 5 pods bound: partial placement",
                                  expect_violation=True)],
    ))  # fmt: skip
    queue = "suites/test_queue.py::test_a_trainjob_runs_in_the_queue_its_label_names"
    cases.append(r(f"{queue}[leaf-queue]", "A TrainJob runs in the queue its label names", "queue",
                   outcome="passed", duration=7.1, params={"case": "leaf-queue"}))  # fmt: skip
    if old:
        cases.append(r(
            f"{queue}[default-queue]", "A TrainJob runs in the queue its label names", "queue", outcome="error",
            failure_kind="infrastructure", duration=30.2, params={"case": "default-queue"},
            exception="kai_conformance.fixtures.errors.ServerError", category="Infrastructure: API server or webhook error (5xx)",
            message='E   fixtures.errors.ServerError: apply Queue kc-default-queue → 500 InternalError: Internal '
                    'error occurred: failed calling webhook "queue.kai.scheduler": connection refused',
        ))  # fmt: skip
    else:
        cases.append(r(f"{queue}[default-queue]", "A TrainJob runs in the queue its label names", "queue",
                       outcome="passed", duration=6.8, params={"case": "default-queue"}))  # fmt: skip
    label_case = "suites/test_labels.py::test_runtime_labels_reach_every_level"
    observations = [
        LabelObservation("TrainJob labels", "team", level, True, True) for level in ("JobSet", "Job", "Pod")
    ] + [
        LabelObservation("TrainJob labels", "kai.scheduler/queue", "PodGroup", True, True),
        LabelObservation("Runtime template", "example.com/tier", "Pod", True, True),
        LabelObservation("Runtime template", "example.com/tier", "PodGroup", False, False),
        LabelObservation("podTemplateOverrides", "example.com/zone", "Pod", True, not old),
        LabelObservation("podTemplateOverrides", "example.com/zone", "Job", False, False),
    ]
    cases.append(r(
        f"{label_case}[trainjob-and-runtime]", "Runtime labels reach every level", "labels",
        outcome="xfailed" if old else "passed", duration=11.3, params={"case": "trainjob-and-runtime"},
        failure_kind="product" if old else "", labels=observations,
        expectations="KAI v0.16: podTemplateOverrides labels do not reach pods" if old else "KAI v0.17+",
        message="known deviation: KAI v0.16 drops podTemplateOverrides labels on pods\n\nE   AssertionError: "
                "example.com/zone missing on Pod" if old else "",
    ))  # fmt: skip
    preempt = "suites/test_preemption.py::test_a_higher_priority_trainjob_preempts_a_lower_one"
    victims = [
        PodTimes(
            f"low-prio-node-0-{i}",
            "low-prio",
            f"kai-conformance-worker{'' if i < 2 else '2'}",
            T0 + 60 + 0.1 * i,
            T0 + 62 + 0.1 * i,
            T0 + 63.5,
            T0 + 81.2 + 0.2 * i,
        )
        for i in range(4)
    ]
    preemptors = [
        PodTimes(
            f"high-prio-node-0-{i}",
            "high-prio",
            f"kai-conformance-worker{'' if i < 2 else '2'}",
            T0 + 75 + 0.05 * i,
            T0 + 83.0 + 0.1 * i,
            T0 + 84.6 + 0.1 * i,
        )
        for i in range(4)
    ]
    cases.append(r(
        f"{preempt}[train-over-train]", "A higher-priority TrainJob preempts a lower one", "preemption",
        outcome="passed", duration=41.0, params={"case": "train-over-train"}, markers=["serial", "disruptive"],
        verdicts=[DetectorVerdict("preemption-order", True, "all 4 victims evicted before any preemptor bound")],
        timelines={"low-prio": victims, "high-prio": preemptors},
    ))  # fmt: skip
    cases.append(r(
        "suites/test_preemption.py::test_reclaim_returns_quota_to_its_queue", "Reclaim returns quota to its queue",
        "preemption", outcome="skipped", markers=["serial", "slow"],
        message="needs 16 GPUs for two over-quota queues; this cluster has 8",
    ))  # fmt: skip
    owner = "suites/test_podgrouper.py::test_the_podgroup_is_owned_by_the_top_owner"
    cases.append(r(
        owner, "The PodGroup is owned by the top owner (TrainJob → JobSet → Job → Pod)", "podgrouper",
        outcome="xpassed" if old else "passed", duration=8.2,
        expectations="KAI v0.16: PodGroup owned by the JobSet" if old else "KAI v0.17+: owned by the TrainJob",
        verdicts=[DetectorVerdict("podgroup-owner", True, "PodGroup pg-trainjob-owner owned by TrainJob/owner")],
    ))  # fmt: skip
    return cases + _ai_conformance_cases(r, old)


def _ai_conformance_cases(r, old: bool) -> list[CaseRecord]:
    """The Kubernetes AI Conformance cases (suites/test_ai_conformance.py): met on the newer run; on the older one a
    gang placed partially (gang_scheduling not met) and no GPU sharing on the stack (gpu_sharing not assessed)."""
    module, area = "suites/test_ai_conformance.py", "ai_conformance"
    passed = lambda function, param, detector, text, **k: r(  # noqa: E731
        f"{module}::{function}[{param}]", function.removeprefix("test_").replace("_", " ").capitalize(), area,
        outcome="passed", duration=k.pop("duration", 0.4), params={"case": param},
        verdicts=[DetectorVerdict(detector, True, text)], **k)  # fmt: skip
    negative = "test_gang_scheduling_negative_room_for_fewer_than_n_pods_runs_no_pod"
    cases = [
        passed("test_gang_scheduling_positive_n_co_scheduled_pods_all_run_and_the_trainjob_completes",
               "3-pods-of-1-gpu-run-whole-and-complete", "trainjob-complete",
               "TrainJob gang Complete (AllJobsCompleted); every pod Succeeded", duration=24.1),
        passed("test_robust_controller_controllers_run_and_their_crds_are_registered", "trainer",
               "controllers-running", "Kubeflow Trainer: every controller Running"),
        passed("test_robust_controller_controllers_run_and_their_crds_are_registered", "kai", "controllers-running",
               "KAI Scheduler: every controller Running"),
        *(passed("test_robust_controller_webhook_refuses_an_invalid_object", kind, "webhook-rejects-invalid",
                 f"refused an invalid {kind}") for kind in ("trainjob", "queue", "podgroup")),
        passed("test_robust_controller_reconciled_a_valid_trainjob_into_jobset_jobs_and_pods",
               "2-pod-trainjob-reconciled-and-complete", "trainjob-reconciled",
               "reconciled: TrainJob valid (1) → JobSet (1) → Job (1) → pod (2 of 2)", duration=22.0),
    ]  # fmt: skip
    if old:
        cases.append(r(
            f"{module}::{negative}[over-cluster-of-1-gpu]", "Gang scheduling negative: room for fewer than N", area,
            outcome="failed", failure_kind="product", duration=6.3, params={"case": "over-cluster-of-1-gpu"},
            exception="kai_conformance.fixtures.waits.ConditionViolated", category="Product: forbidden state observed",
            message="E   fixtures.waits.ConditionViolated: no pod of 9 pod(s) × 1 GPU(s) bound or Running: violated "
                    "after 4.1s of a 15s hold\nE   observed: gang-held: 8 of 9 pods bound although the gang must not "
                    "be placed",
            verdicts=[DetectorVerdict("gang-held", False, "8 of 9 pods bound although the gang must not be placed")],
        ))  # fmt: skip
        cases.append(r(
            f"{module}::test_gpu_sharing_fractions_of_one_device_run_side_by_side[2-pods-of-0.5-gpu]",
            "GPU sharing: fractions of one device run side by side", area, outcome="skipped",
            message="KAI's GPU sharing is off on this stack (global.gpuSharing=false); turn it on with --kai-set "
                    "global.gpuSharing=true",
        ))  # fmt: skip
    else:
        cases.append(passed(negative, "over-cluster-of-1-gpu", "gang-held", "none of the 9 pods bound (9 pending)"))
        cases.append(passed("test_gpu_sharing_fractions_of_one_device_run_side_by_side", "2-pods-of-0.5-gpu",
                            "one-device", "both pods on GPU group 3f2a of kai-conformance-worker"))  # fmt: skip
    return cases


def _stack(versions: dict[str, str], *, verified: bool) -> dict:
    """What a run records of its stack: installed on kind, or verified on a cluster where KAI runs without
    Deployments (version declared) and Trainer/JobSet images name theirs (detected)."""
    if not verified:
        return {"mode": "installed", "components": {
            key: {"version": versions[key], "version_source": "installed",
                  "established": f"installed by this run from {origin}"}
            for key, origin in (("kai", f"chart oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler {versions['kai']}"),
                                ("trainer", f"chart oci://ghcr.io/kubeflow/charts/kubeflow-trainer {versions['trainer'][1:]}"),
                                ("jobset", f"manifests https://github.com/kubernetes-sigs/jobset/releases/download/{versions['jobset']}/manifests.yaml"))
        }}  # fmt: skip
    combination = f"kai-{versions['kai']}+trainer-{versions['trainer']}"
    return {"mode": "verified", "components": {
        "kai": {"version": versions["kai"], "version_source": "declared", "established": f"declared by --versions {combination}"},
        "trainer": {"version": versions["trainer"], "version_source": "detected", "established":
                    f"detected from image ghcr.io/kubeflow/trainer/trainer-controller-manager:{versions['trainer']} "
                    "of Deployment kubeflow-system/kubeflow-trainer-controller-manager"},
        "jobset": {"version": versions["jobset"], "version_source": "detected", "established":
                   f"detected from image registry.k8s.io/jobset/jobset:{versions['jobset']} "
                   "of Deployment kubeflow-system/jobset-controller-manager"},
    }}  # fmt: skip


def runs() -> list[tuple[RunInfo, list[CaseRecord]]]:
    out = []
    for index, (versions, old) in enumerate(((NEW, False), (OLD, True))):
        run_id = f"20261121-1425{index}1-{'a1b2' if index == 0 else 'c3d4'}"
        info = RunInfo(
            run_id=run_id, started=T0 - 300 + index * 900, finished=T0 + 200 + index * 900,
            combination=f"kai-{versions['kai']}+trainer-{versions['trainer']}", versions=dict(versions),
            kubernetes_server="v1.35.5", gpus=dict(GPUS),
            cluster={"provider": "existing", "name": "gpu-lab"} if old
            else {"provider": "kind", "name": "kai-conformance", "created_by_run": True},
            topology="" if old else "pr-gate",
            stack=_stack(versions, verified=old),
            command=["suites", "-n", "2", "--versions", f"kai-{versions['kai']}+trainer-{versions['trainer']}"],
            exit_status=1 if old else 0,
            api_load=_api_load(old),
        )  # fmt: skip
        out.append((info, _run_cases(run_id, versions, old)))
    return out


def _api_load(old: bool) -> dict:
    """Made-up API load: the kind run measured its share; on the older existing cluster /metrics was forbidden."""
    from kai_conformance.reports.sections.apiload import ApiLoad, ProcessLoad, ServerReading

    processes = [
        ProcessLoad.from_counts("main", {("list", "namespaces"): 6, ("get", "/version"): 1},
                                peak_rss_bytes=92 * 2**20, cpu_seconds=4.1, children_cpu_seconds=38.0),
        ProcessLoad.from_counts("gw0", {("list", "pods"): 410, ("watch", "pods"): 3, ("apply", "trainjobs.trainer.kubeflow.org"): 24,
                                        ("get", "podgroups.scheduling.run.ai"): 130, ("delete", "namespaces"): 12},
                                peak_rss_bytes=181 * 2**20, cpu_seconds=61.0),
        ProcessLoad.from_counts("gw1", {("list", "pods"): 380, ("watch", "pods"): 3, ("apply", "trainjobs.trainer.kubeflow.org"): 22,
                                        ("get", "podgroups.scheduling.run.ai"): 118, ("delete", "namespaces"): 11},
                                peak_rss_bytes=176 * 2**20, cpu_seconds=57.5),
    ]  # fmt: skip
    if old:
        forbidden = 'reading /metrics is forbidden to the suite\'s credentials (User "ci" cannot get path "/metrics")'
        return ApiLoad(processes, ServerReading(unavailable=forbidden), ServerReading(unavailable=forbidden)).to_json()
    started = ServerReading(0, None, note="the API server started within this run: its count began at zero")
    return ApiLoad(processes, started, ServerReading(48_310, T0 + 200)).to_json()


def write_run_dirs(base: Path) -> list[Path]:
    """Each sample run as a report directory (records, run info, the diagnostics files they name)."""
    directories = []
    for info, records in runs():
        directory = base / info.combination
        state = directory / ".state"
        for sequence, record in enumerate(records):
            write(record, state, "gw0", sequence)
            for attachment in record.attachments:
                path = directory / attachment
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"(sample) {path.name} of {record.nodeid}\n")
        info.save(state)
        directories.append(directory)
    return directories
