"""The chaos area end to end on the simulated cluster: components run as Deployments whose deleted pods come back
(tests/fakes/restarts.py), the suite's own runner restarts them by deleting their pods, and a simulated KAI that
breaks an invariant only after a restart is caught by that invariant; a seeded run on a correct KAI holds every
invariant and measures convergence; a broken one is found, shrunk, written as a reproducer and replayed. Where the
stack shares GPUs, mixes draw fractional workloads too (tests/fakes/kai/sharing.py), and a binder that leaves a
reservation pod behind after its restart is caught by ``no-leftover-reservation``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.outcomes import Skipped

from kai_conformance.fixtures.configuration.chaos_options import ChaosSettings
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites import test_chaos
from kai_conformance.suites.support.cases.chaos import ChaosMix, ChaosQueue, ChaosWorkload, Fault, RandomMixes
from kai_conformance.suites.support.chaos import run as chaos_run
from kai_conformance.suites.support.chaos.faults import Restarter
from kai_conformance.suites.support.chaos.mix import mixes
from kai_conformance.suites.support.chaos.report import judgements
from kai_conformance.suites.support.chaos.run import MixRunner, Outcome
from kai_conformance.suites.support.chaos.search import FORMAT, load_reproducer
from kai_conformance.suites.support.chaos.sharing import FRACTIONS
from kai_conformance.suites.support.chaos.sharing import LEFTOVER_RESERVATION as LEFTOVER
from kai_conformance.suites.support.expectations.sharing import RESERVATION_NAMESPACE
from kai_conformance.suites.support.gpu_sharing import SharingSupport
from tests.fakes.controllers import Faults
from tests.fakes.kai.sharing import SharingFaults
from tests.fakes.simulation import SCHEDULER, TRAINER_CONTROLLER
from tests.flows import Harness

#: Mix times × 0.02 (a 20 s mix takes 0.4 s), settle grace 0.1 s; garbage collection may take 0.4 s.
TIMEOUTS = TimeoutPolicy(scale=0.02, overrides={"gc": 20.0})
DOWNTIME = 0.01
SMALL = RandomMixes(horizon=16, max_workloads=5)
SHARING_ON = SharingSupport(True, "Config kai-config spec.admission.gpuSharing = true", "nvidia", True, "binpack")
SHARING_OFF = SharingSupport(False, "Config kai-config spec.admission.gpuSharing = false")


def harness_for(flow, faults: Faults | None = None) -> Harness:
    """The controllers in the background (the mix watches) and caught up before each of the mix's API calls: a step
    of the mix meets the cluster as every earlier step left it, on any machine, and a restart (its pods deleted at
    its moment) precedes the steps after it."""
    return flow(faults, background=True, timeouts=TIMEOUTS, restartable=DOWNTIME, catch_up=True)


def run_mix(harness: Harness, mix: ChaosMix) -> Outcome:
    runner = MixRunner(harness.fake, harness.ctx, harness.workspace, TIMEOUTS, Restarter(harness.fake, TIMEOUTS),
                       harness.ctx.layout)  # fmt: skip
    return runner.run(mix, 1)


def mix(*workloads: ChaosWorkload, faults: tuple[Fault, ...], quota: int = 8, limit: int = -1) -> ChaosMix:
    return ChaosMix((ChaosQueue("q0", quota, limit),), workloads, faults, 12)


def two(priority: str = "train", **kwargs) -> ChaosWorkload:
    return ChaosWorkload("w00", 2, 1, "q0", priority, **kwargs)


def halves(**kwargs) -> ChaosWorkload:
    """Two pods of half a GPU: one shared GPU, one reservation pod."""
    return ChaosWorkload("w00", 2, 0, "q0", fraction=0.5, **kwargs)


BROKEN_AFTER_A_RESTART = {
    "gang-never-partial": (Faults(restart_breaks_gangs_of=2), mix(two(arrive=5), faults=(Fault("scheduler", 0),))),
    "queue-limit": (Faults(restart_ignores_queue_limits=True),
                    mix(two(arrive=5), faults=(Fault("scheduler", 0),), limit=1)),
    "non-preemptible-never-evicted": (Faults(restart_evicts_non_preemptible=True),
                                      mix(two("build"), faults=(Fault("scheduler", 5),), quota=4)),
    "one-podgroup-per-trainjob": (Faults(restart_duplicates_podgroups=True),
                                  mix(two(), faults=(Fault("podgrouper", 5),))),
    "no-leftover-bindrequest": (Faults(restart_leaks_bindrequests=True),
                                mix(two(arrive=5, ending="deleted", after=5), faults=(Fault("binder", 0),))),
    "fitting-gangs-bound": (Faults(restart_stalls_scheduler=True), mix(two(arrive=5), faults=(Fault("scheduler", 0),))),
    "no-leftover-reservation": (SharingFaults(restart_leaks_reservations=True),
                                mix(halves(arrive=5, ending="deleted", after=5), faults=(Fault("binder", 0),))),
}  # fmt: skip


def remove_reservations(harness: Harness) -> None:
    """What a leaking binder left (the flow's end wants no pod left)."""
    for pod in harness.fake.objects(kinds.POD, RESERVATION_NAMESPACE):
        harness.fake.delete(kinds.POD, pod["metadata"]["name"], RESERVATION_NAMESPACE, allow_foreign=True)


@pytest.mark.parametrize("invariant", list(BROKEN_AFTER_A_RESTART))
def test_each_invariant_fires_on_a_kai_that_breaks_it_after_a_restart(flow, fast_polling, invariant: str) -> None:
    faults, broken = BROKEN_AFTER_A_RESTART[invariant]
    harness = harness_for(flow, faults)
    outcome = run_mix(harness, broken)
    remove_reservations(harness)
    assert invariant in outcome.violations, outcome.summary()
    assert outcome.excerpt and any("restart" in line for line in outcome.excerpt)
    if invariant == "gang-never-partial":  # the chain diagnosis, read before the mix was removed, names the link
        assert "broken link: KAI scheduler" in outcome.diagnosis and "placed part of a gang" in outcome.diagnosis


def test_the_same_mixes_on_a_kai_that_restarts_cleanly_hold_every_invariant(flow, fast_polling) -> None:
    harness = harness_for(flow)
    for invariant, (_, clean) in BROKEN_AFTER_A_RESTART.items():
        outcome = run_mix(harness, clean)
        assert not outcome.violated, f"{invariant}: {outcome.summary()}"
        assert all(t.restart and t.restart.ready_at for t in outcome.restarts), outcome.restarts


def test_a_mix_marks_each_hold_with_nothing_to_judge_vacuous_and_names_why_a_waiting_gang_does_not_fit(
    flow, fast_polling
) -> None:
    harness = harness_for(flow)
    bound = run_mix(harness, mix(two(), faults=(Fault("podgrouper", 5),)))  # a preemptible gang, bound whole
    assert not bound.violated, bound.summary()
    assert bound.verdicts["fitting-gangs-bound"].vacuous  # no gang waited
    np = bound.verdicts["non-preemptible-never-evicted"]
    assert np.vacuous and np.explanation.startswith("held vacuously, no gang is non-preemptible")
    assert bound.verdicts["no-leftover-bindrequest"].vacuous  # no pod went while a BindRequest named it
    assert bound.verdicts["queue-limit"].explanation.startswith("held vacuously, no queue has a GPU limit")
    assert not bound.verdicts["gang-never-partial"].vacuous  # its pods were placed: judged
    assert any(line.startswith("non-preemptible-never-evicted held vacuously, no gang is non-preemptible")
               for line in judgements(bound))  # fmt: skip
    # the controls: a non-preemptible gang bound is judged; a gang the queue's limit keeps waiting is judged to fit
    # or not, with the numbers
    build = run_mix(harness, mix(two("build"), faults=(Fault("scheduler", 5),), quota=4))
    assert not build.verdicts["non-preemptible-never-evicted"].vacuous, build.summary()
    waits = run_mix(harness, mix(two(), faults=(Fault("scheduler", 0),), limit=1))
    fitting = waits.verdicts["fitting-gangs-bound"]
    assert fitting.ok and not fitting.vacuous, waits.summary()
    assert waits.verdicts["queue-limit"].explanation.startswith("held vacuously, no pod was ever bound")
    assert "m1-w00 (2×1 GPU, queue m1-q0): queue m1-q0 holds 0 + 2 asked > limit 1" in fitting.explanation


def test_a_binder_restart_amid_fractional_gangs_is_survived_and_fractions_count_against_the_queue_limit(
    flow, fast_polling
) -> None:
    """The simulated KAI counts a half-GPU pod as half a GPU of its queue, as the ledger does: with a limit of 1 the
    second gang of two halves waits, whole, and nothing is violated while the binder restarts as they arrive."""
    harness = harness_for(flow)
    second = ChaosWorkload("w01", 2, 0, "q0", fraction=0.5, arrive=1)
    outcome = run_mix(harness, mix(halves(arrive=1), second, faults=(Fault("binder", 1),), limit=1))
    assert not outcome.violated and outcome.status.startswith("2 of 4 pods bound"), outcome.summary()
    assert "q0 1/1" in outcome.verdicts["queue-limit"].explanation
    assert outcome.verdicts["no-leftover-reservation"].ok
    assert harness.fake.objects(kinds.POD, RESERVATION_NAMESPACE) == []


def chaos_settings(seed: int, budget: float, replay: Path | None = None) -> ChaosSettings:
    return ChaosSettings(seed, True, budget, replay, None, False, None)


def restarted_before_each_mix(monkeypatch: pytest.MonkeyPatch, harness: Harness) -> None:
    """Each mix starts on a scheduler counted as restarted, and on nothing else restarted: the ``restart_*`` fault
    of the scheduler acts on the mix's content alone, not on where its restarts fall against its arrivals (a few
    milliseconds either way on a loaded machine), so the mix the search finds violates again when replayed."""
    run = chaos_run.MixRunner.run
    controllers = harness.controllers
    assert controllers is not None

    def restarted(self: MixRunner, mix: ChaosMix, attempt: int) -> Outcome:
        controllers.forget_restarts()
        controllers.mark_restarted(SCHEDULER)
        return run(self, mix, attempt)

    monkeypatch.setattr(chaos_run.MixRunner, "run", restarted)


def running_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search draws mixes whose TrainJobs run to the mix's end (no deletion, suspension, completion or failure):
    a gang the broken scheduler leaves partial stays so until the settle gives up, far past the grace, so the mix the
    search shrinks to violates again when replayed. With timed endings the shrinker drives a workload's lifetime down
    to the shortest that still outlived the grace once, and whether the replay's gang outlives it then is a race
    between the mix's clock and the simulated cluster."""

    def runs(mix: ChaosMix) -> ChaosMix:
        kept = tuple(dataclasses.replace(w, ending="runs", after=0.0, resume_after=None) for w in mix.workloads)
        return dataclasses.replace(mix, workloads=kept)

    monkeypatch.setattr(test_chaos, "mixes", lambda *args, **kwargs: mixes(*args, **kwargs).map(runs))


def run_case(harness: Harness, chaos: ChaosSettings, report_dir: Path, sharing: SharingSupport = SHARING_OFF) -> None:
    stub = SimpleNamespace(report_dir=report_dir)
    settings = SimpleNamespace(combination=harness.ctx.combination, kubernetes="1.34")
    test_chaos.test_invariants_hold_while_components_restart(
        SMALL, SimpleNamespace(node=SimpleNamespace(nodeid="suites/test_chaos.py::flow")), chaos, harness.ctx,
        harness.fake, harness.workspace, harness.expect, TIMEOUTS, harness.record, stub, settings, sharing,
    )  # fmt: skip


def test_a_seeded_run_on_a_correct_kai_restarts_every_component_and_measures_convergence(
    flow, fast_polling, tmp_path
) -> None:
    harness = harness_for(flow)
    run_case(harness, chaos_settings(seed=4, budget=2.5), tmp_path)
    record = harness.record.record
    assert any("chaos seed 4 (given; again: --chaos-seed 4)" in note for note in record.notes)
    assert {v.detector for v in record.verdicts} >= {"gang-never-partial", "queue-limit", "one-podgroup-per-trainjob",
                                                     "no-leftover-bindrequest", "fitting-gangs-bound"}  # fmt: skip
    assert all(v.ok for v in record.verdicts), record.verdicts
    back = record.series["chaos: seconds until a restarted component was back"]
    assert len(back) >= 4 and all(seconds >= DOWNTIME for _, seconds in back)
    restarted = next(note for note in record.notes if "restarted and back:" in note)
    assert "binder, podgrouper, queuecontroller, scheduler" in restarted
    shared = [note for note in record.notes if note.startswith("chaos GPU sharing:")]
    assert shared == ["chaos GPU sharing: no fractional workload drawn and no-leftover-reservation not judged: GPU "
                      "sharing is off on this cluster (Config kai-config spec.admission.gpuSharing = false): install "
                      "KAI with --kai-set global.gpuSharing=true (on kind, or with --install always)"]  # fmt: skip
    assert not any("fractional" in note for note in record.notes if note.startswith("mix "))
    mixes_run = [note for note in record.notes if note.startswith("mix ") and "s): " in note.split("→")[0]]
    for index in range(1, len(mixes_run) + 1):  # every mix names every invariant's judgement, not only the last mix
        judged = {note.split()[2] for note in record.notes if note.startswith(f"mix {index}: ")}
        assert judged >= {"gang-never-partial", "queue-limit", "fitting-gangs-bound"}, (index, judged)


def test_where_gpus_are_shared_mixes_draw_fractions_and_a_correct_kai_holds_every_invariant(
    flow, fast_polling, tmp_path, monkeypatch
) -> None:
    drawn: list[tuple[float, ...]] = []

    def spied(*args, **kwargs):
        drawn.append(tuple(kwargs["fractions"]))
        return mixes(*args, **kwargs)

    monkeypatch.setattr(test_chaos, "mixes", spied)
    harness = harness_for(flow)
    run_case(harness, chaos_settings(seed=7, budget=1.5), tmp_path, SHARING_ON)
    record = harness.record.record
    assert drawn == [FRACTIONS] and all(v.ok for v in record.verdicts), record.verdicts
    assert [n for n in record.notes if n.startswith("chaos GPU sharing: GPU sharing on")], record.notes
    assert any("0.5 or 0.25 GPU per pod and judge no-leftover-reservation" in n for n in record.notes)


def test_a_reproducer_with_fractional_workloads_skips_where_gpus_are_not_shared_and_replays_where_they_are(
    flow, fast_polling, tmp_path
) -> None:
    path = tmp_path / "reproducer.yaml"
    data = {"format": FORMAT, "seed": 1, "mix": mix(halves(), faults=(Fault("binder", 0),)).to_data()}
    path.write_text(__import__("yaml").safe_dump(data))
    harness = harness_for(flow)
    with pytest.raises(Skipped, match="the reproducer's mix has fractional workloads, which this cluster cannot run: "
                       "GPU sharing is off"):  # fmt: skip
        run_case(harness, chaos_settings(seed=1, budget=2, replay=path), tmp_path, SHARING_OFF)
    assert harness.fake.objects(kinds.TRAIN_JOB) == []

    shared = harness_for(flow)
    run_case(shared, chaos_settings(seed=1, budget=2, replay=path), tmp_path / "shared", SHARING_ON)
    verdicts = {v.detector: v for v in shared.record.record.verdicts}
    assert all(v.ok for v in verdicts.values()) and "1 group(s) used" in verdicts[LEFTOVER].explanation, verdicts


def test_a_kai_broken_after_a_restart_is_found_shrunk_written_and_replayed(
    flow, fast_polling, tmp_path, monkeypatch
) -> None:
    harness = harness_for(flow, Faults(restart_breaks_gangs_of=2))
    restarted_before_each_mix(monkeypatch, harness)
    running_to_the_end(monkeypatch)
    # The broken scheduler never places a gang's last pod: the gang is seen partial, or (none of it placed) it waits
    # whole while it fits.
    with pytest.raises(
        AssertionError, match=r"chaos invariant violated: (gang-never-partial|fitting-gangs-bound)"
    ) as failure:
        run_case(harness, chaos_settings(seed=2, budget=20), tmp_path)  # found in about 1 s; 20 s under load
    path = tmp_path / "chaos" / "reproducer-2.yaml"
    assert f"reproducer: {path}" in str(failure.value) and f"--chaos-replay={path}" in str(failure.value)
    assert "diagnosis of TrainJob" in str(failure.value)
    shrunk, data = load_reproducer(path)
    broken = set(data["violations"])
    assert data["seed"] == 2 and broken <= {"gang-never-partial", "fitting-gangs-bound"} and broken and data["timeline"]
    assert data["versions"]["kubernetes"] == harness.fake.git_version, "the cluster's own version, not the given minor"
    assert any(w.pods >= 2 for w in shrunk.workloads) and len(shrunk.workloads) <= 2, shrunk.describe()
    assert (tmp_path / "diagnostics").is_dir()

    replayed = harness_for(flow, Faults(restart_breaks_gangs_of=2))
    restarted_before_each_mix(monkeypatch, replayed)
    with pytest.raises(AssertionError, match=r"chaos invariant violated: (gang-never-partial|fitting-gangs-bound)"):
        run_case(replayed, chaos_settings(seed=2, budget=20, replay=path), tmp_path / "replay")
    assert len([n for n in replayed.record.record.notes if n.startswith("mix ")]) >= 1


def test_a_webhook_a_restart_took_down_is_waited_out_not_failed_on(flow, fast_polling) -> None:
    """Seen on real kind: right after the queue-controller's restart its Queue webhook refused connections (500),
    and the next mix's Queue failed the case. A component's own webhook refuses writes while it is down
    (tests/fakes/restarts.py); the mix's writes retry until it serves again."""
    harness = harness_for(flow)
    controllers = harness.controllers
    assert controllers is not None
    # The Trainer stays down until its webhook refused the TrainJob: the arrival meets it down on any machine.
    controllers.comes_back = lambda component: component != TRAINER_CONTROLLER or bool(controllers.refused_writes)
    outcome = run_mix(harness, mix(two(arrive=1), faults=(Fault("trainer", 0),)))
    applies = [c for c in harness.fake.operations("apply") if c.kind == "TrainJob"]
    refused = controllers.refused_writes
    assert refused[:1] == [f"{TRAINER_CONTROLLER}: apply TrainJob m1-w00"], refused
    assert len(applies) >= 2, "the TrainJob met the Trainer webhook down at least once"
    assert not outcome.violated and outcome.status.startswith("2 of 2 pods bound"), outcome.summary()


def test_a_failing_workload_restarts_whole_once_then_fails_and_the_mix_settles(flow, fast_polling, monkeypatch) -> None:
    """Seen on the real controllers: on the suite's own runtime a failed pod was re-created after a doubling backoff
    for ever, and the mix waited out its settle budget. ``fails`` workloads run on the lifecycle area's restart
    runtime: the JobSet restarts the gang once, then fails, and the TrainJob with it."""
    harness = harness_for(flow)
    ended: list[dict] = []
    remove = MixRunner._remove

    def remembered(self, *args, **kwargs):
        ended.extend(harness.fake.objects(kinds.TRAIN_JOB))
        return remove(self, *args, **kwargs)

    monkeypatch.setattr(MixRunner, "_remove", remembered)
    failing = two(arrive=1, ending="fails", after=5)
    running = ChaosWorkload("w01", 1, 1, "q0", arrive=1)
    # The pods' lifetime is a whole second at least; the last restart, 4 s in (mix times × 0.02), outlasts two attempts.
    outcome = run_mix(harness, mix(failing, running, faults=(Fault("binder", 2), Fault("scheduler", 200))))
    assert not outcome.violated, outcome.summary()
    states = {t["metadata"]["name"]: {c["type"] for c in t.get("status", {}).get("conditions", [])
                                      if c.get("status") == "True"} for t in ended}  # fmt: skip
    assert "Failed" in states["m1-w00"] and "Failed" not in states["m1-w01"], states
    (runtime,) = [r for r in harness.fake.objects(kinds.TRAINING_RUNTIME) if r["metadata"]["name"] == "chaos-fails"]
    assert runtime["spec"]["template"]["spec"]["failurePolicy"] == {"maxRestarts": 1}
