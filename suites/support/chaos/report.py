"""What a chaos run puts in its record: the seed, every mix and its outcome with each invariant's judgement in it (a
hold with nothing to judge named vacuous), each invariant's verdict over the run (saying when most mixes held it
vacuously),
the restarts and the time the cluster took to converge after each (a plot), and on a violation the reproducer
(suites/support/chaos/search.py) with the violating gang's timeline and where each restart fell."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.configuration.chaos_options import ChaosSettings
from kai_conformance.fixtures.configuration.settings import Settings
from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.chaos.run import Outcome
from kai_conformance.suites.support.chaos.search import Campaign, reproducer, write_reproducer
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.gpu_sharing import SharingSupport

BACK_SERIES = "chaos: seconds until a restarted component was back"
CONVERGED_SERIES = "chaos: seconds until the cluster converged after a restart"


def record_campaign(record: CaseRecorder, campaign: Campaign, chaos: ChaosSettings, components: tuple[str, ...],
                    expect: Expectations) -> None:  # fmt: skip
    seed = f"seed {chaos.seed} ({'given' if chaos.seed_given else 'drawn'}; again: --chaos-seed {chaos.seed})"
    record.note(f"chaos {seed}; budget {chaos.budget:.0f}s; {len(campaign.outcomes)} mix(es) run, "
                f"{campaign.shrink_runs} of them while shrinking, {campaign.near_copies_skipped} near-copies passed over; "
                f"components {', '.join(components)}")  # fmt: skip
    for index, outcome in enumerate(campaign.outcomes, 1):
        record.note(f"mix {index} ({outcome.seconds:.0f}s): {outcome.mix.describe()} → {outcome.summary()}")
        for line in judgements(outcome):
            record.note(f"mix {index}: {line}")
        for timing in outcome.restarts:
            record.note(f"mix {index}: {timing.describe()}")
    for verdict in over_the_run(campaign.outcomes).values():
        record.verdict(verdict)
    back = [(t.restart.started, t.restart.ready_seconds) for o in campaign.outcomes for t in o.restarts
            if t.restart is not None and t.restart.ready_seconds is not None]  # fmt: skip
    converged = [(t.restart.started, t.converged_seconds) for o in campaign.outcomes for t in o.restarts
                 if t.restart is not None and t.converged_seconds is not None]  # fmt: skip
    record.series(BACK_SERIES, back)
    record.series(CONVERGED_SERIES, converged)
    restarted = {t.fault.component for o in campaign.outcomes for t in o.restarts if t.restart and t.restart.ready_at}
    record.note(f"[{expect.kai.name}] restarted and back: {', '.join(sorted(restarted)) or 'none'}; per component "
                + "; ".join(summary(campaign.outcomes, c) for c in components))  # fmt: skip


def record_sharing(record: CaseRecorder, support: SharingSupport, fractions: Sequence[float]) -> None:
    """Once per run: whether mixes draw fractional workloads, and why not."""
    if fractions:
        text = (f"{support.describe()}: mixes also draw fractional workloads of "
                f"{' or '.join(f'{f:g}' for f in fractions)} GPU per pod and judge no-leftover-reservation")  # fmt: skip
    else:
        text = f"no fractional workload drawn and no-leftover-reservation not judged: {support.unavailable()}"
    record.note(f"chaos GPU sharing: {text}")
    progress.report(f"chaos GPU sharing: {text}")


def summary(outcomes: list[Outcome], component: str) -> str:
    """``scheduler: 3 restarts, back in 4.1–9.8s, converged in 6.0–21.3s``."""
    timings = [t for o in outcomes for t in o.restarts if t.fault.component == component and t.restart is not None]
    back = [t.restart.ready_seconds for t in timings if t.restart and t.restart.ready_seconds is not None]
    converged = [t.converged_seconds for t in timings if t.converged_seconds is not None]

    def span(values: list[float]) -> str:
        return f"{min(values):.1f}–{max(values):.1f}s" if values else "n/a"

    return f"{component}: {len(timings)} restart(s), back in {span(back)}, converged in {span(converged)}"


def judgements(outcome: Outcome) -> list[str]:
    """Each invariant's judgement in one mix, in words a reader can check: ``fitting-gangs-bound held: none of the 3
    waiting gang(s) fits …``, ``… held vacuously, no placeable gang waited …``, ``… VIOLATED: …``."""
    said = {True: "held: ", False: "VIOLATED: "}
    return [f"{name} {'' if v.vacuous else said[v.ok]}{v.explanation}" for name, v in outcome.verdicts.items()]


def over_the_run(outcomes: list[Outcome]) -> dict[str, Verdict]:
    """Each invariant over every mix: its first violation, or held in all the mixes that judged it, saying in how
    many of them it held vacuously (nothing to judge); held vacuously in most, the verdict leads with that."""
    judged: dict[str, list[tuple[int, Verdict]]] = {}
    for index, outcome in enumerate(outcomes, 1):
        for name, verdict in outcome.verdicts.items():
            judged.setdefault(name, []).append((index, verdict))
    return {name: next((v for _, v in verdicts if not v.ok), None) or _held(name, verdicts)
            for name, verdicts in judged.items()}  # fmt: skip


def _held(name: str, verdicts: list[tuple[int, Verdict]]) -> Verdict:
    empty = [index for index, v in verdicts if v.vacuous]
    tested = [v for _, v in verdicts if not v.vacuous]
    last = f"the last judged: {tested[-1].explanation}" if tested else f"the last: {verdicts[-1][1].explanation}"
    if not empty:
        return Verdict(name, True, f"held in all {len(verdicts)} mix(es); {last}")
    where = f"mix(es) {', '.join(map(str, empty))}"
    if 2 * len(empty) > len(verdicts):
        return Verdict(name, True, f"MOSTLY VACUOUS: held in all {len(verdicts)} mix(es), but vacuously (nothing to "
                       f"judge) in {len(empty)} of them ({where}), so it was put to the test in {len(tested)} only; "
                       f"{last}", vacuous=not tested)  # fmt: skip
    return Verdict(name, True, f"held in all {len(verdicts)} mix(es), vacuously in {len(empty)} ({where}); {last}")


def report_violation(record: CaseRecorder, settings: Settings, campaign: Campaign, original: Outcome | None,
                     shrunk: Outcome, expect: Expectations, directories: list[Path], server: str = "") -> str:  # fmt: skip
    """Write the reproducer into each of ``directories`` (the run's ``chaos/`` and the case's diagnostics) and
    return the failure message naming it and how to replay it. ``server``: the API server's version, which names
    the cluster's Kubernetes better than the minor the run was given (an existing cluster's is whatever it runs)."""
    combination = settings.combination
    versions = {"kai": combination.kai.version, "trainer": combination.trainer.version,
                "jobset": combination.jobset.version, "kubernetes": server or settings.kubernetes}  # fmt: skip
    data = reproducer(shrunk, seed=campaign.seed, versions=versions, original=original)
    paths = [write_reproducer(data, directory) for directory in directories]
    for line in shrunk.excerpt:
        record.note(f"timeline: {line}")
    smaller = ""
    if original is not None and original is not shrunk:
        smaller = f" (shrunk from {len(original.mix.workloads)} TrainJobs: {original.mix.describe()})"
    broken = "; ".join(f"{name}: {v.explanation}" for name, v in shrunk.violations.items())
    return (
        f"[{expect.kai.name}] chaos invariant violated: {broken}\n"
        f"smallest mix{smaller}: {shrunk.mix.describe()}\n"
        + (f"{shrunk.diagnosis}\n" if shrunk.diagnosis else "")
        + f"reproducer: {paths[0]}\n"
        f"replay: pytest suites -m chaos --chaos-replay={paths[0]} (with this run's cluster options)"
    )


def server_version(kube: KubeApi) -> str:
    """The API server's ``gitVersion``, or "" when it cannot be asked (the reproducer then names the given minor)."""
    try:
        return kube.server_version()
    except errors.KubeError:
        return ""
