"""Invariants under chaos: random workload mixes while KAI's components restart, judged over the whole run.

Opt-in: these cases run only when ``-m`` names ``chaos`` (``pytest suites -m chaos --chaos-budget 10m``); a plain run
and the PR gate deselect them (fixtures/plugin/markers.py). They restart components the whole cluster shares, so they run
alone on the shared workers (``serial``, ``shared_workers``, ``disruptive``), and on an existing cluster only with
``--allow-chaos`` and the components ``--chaos-components`` names. Specification:

* **Mixes.** Hypothesis draws mixes from the run's seed (printed at the start, in the report and in every
  reproducer; ``--chaos-seed`` draws the same ones): 1–3 leaf queues with GPU quotas, limits and over-quota weights;
  up to 10 TrainJobs of 1–4 pods, 1-GPU or whole-node, preemptible (``train``) or not (``build``), arriving over the
  first half of a 60 s mix; each runs on, completes, fails (pod 0 exits 1), is deleted, or is suspended (and maybe
  resumed) at a drawn moment (suites/support/chaos/mix.py). Every mix restarts every chosen component once at a
  drawn moment, and up to two more times (suites/support/chaos/faults.py: the component's pods are deleted and it
  is back when its Deployment has a new Ready pod).
* **GPU sharing.** Where the stack shares GPUs (read as the sharing area reads it: KAI's Config
  ``spec.admission.gpuSharing``, else the admission's arguments, and the fraction RuntimeClass present), mixes also
  draw fractional TrainJobs: pods of ``0.5`` or ``0.25`` GPU (``gpu-fraction``, built as the sharing area builds
  them), which count as that fraction against their queue's quota and limit. On kind the suite answers the binder's
  reservation pods for its fake GPUs for the whole case, every mix and restart included (clusters/gpu_sharing.py).
  Elsewhere nothing fractional is drawn and the record says so once; a reproducer with fractional workloads then
  skips, saying why.
* **Invariants, at every change the watches deliver** (suites/support/chaos/ledger.py): ``gang-never-partial`` (a
  pod named by a BindRequest the binder has not finished counts as being placed), ``queue-limit``,
  ``non-preemptible-in-quota``, ``non-preemptible-never-evicted`` (the suite's own deletions and suspensions, and a
  JobSet restarting a failed gang, are not evictions), ``one-podgroup-per-trainjob``, ``no-leftover-bindrequest``
  (none outlives its pod by more than garbage collection may take, judged until the mix is removed), and in a mix
  with fractional workloads ``no-leftover-reservation`` (no reservation pod of a GPU group the mix used is left
  once no pod or unfinished BindRequest uses the group, beyond a grace counted from then or from the binder's
  return after a restart, judged until the mix is removed: suites/support/chaos/sharing.py, from KAI's binder).
* **Convergence.** After the last step, every restart back and every active gang complete, nothing changes for the
  settle time, then no waiting gang fits the idle GPUs (``fitting-gangs-bound``). Measured per restart: seconds
  until the component was back, and until the cluster stopped changing (the report's notes and plot).
* **A violation** ends the search: the run shrinks the mix to the fewest workloads that still break one of the same
  invariants (within the budget; a fractional workload is tried as 1-GPU pods too), writes
  ``chaos/reproducer-<seed>.yaml`` in the report directory (seed, versions, mix, restart schedule, the timeline
  around the violation) and fails naming it; ``--chaos-replay=FILE`` runs that mix once.
* **Control:** a gang of whole-node pods, one more than the nodes that hold one, run by the default scheduler while
  KAI's scheduler restarts: ``gang-never-partial`` fires on the watch's timeline.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.configuration.chaos_options import ChaosSettings, chaos_settings
from kai_conformance.fixtures.configuration.settings import Settings
from kai_conformance.fixtures.diagnostics import diagnostics_dir
from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.run import RunContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.chaos import DefaultSchedulerUnderChaos, RandomMixes
from kai_conformance.suites.support.cases.contract import param, skip_unless
from kai_conformance.suites.support.cases.scale import whole_nodes
from kai_conformance.suites.support.chaos.faults import Restarter, parse_components
from kai_conformance.suites.support.chaos.mix import mixes
from kai_conformance.suites.support.chaos.report import (
    record_campaign,
    record_sharing,
    report_violation,
    server_version,
)
from kai_conformance.suites.support.chaos.run import MixRunner
from kai_conformance.suites.support.chaos.search import Campaign, load_reproducer
from kai_conformance.suites.support.chaos.sharing import FRACTIONS
from kai_conformance.suites.support.confirm import confirm, confirm_fired
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.gpu_sharing import SharingSupport, answering_reservations, read_sharing_support

pytestmark = pytest.mark.chaos

RANDOM = [RandomMixes()]
CONTROL = [DefaultSchedulerUnderChaos()]
#: Reservation pods the record names one by one (a run answers one per shared GPU of every mix).
ANSWERS_SHOWN = 10


@pytest.fixture
def chaos(request: pytest.FixtureRequest, settings: Settings) -> ChaosSettings:
    """The chaos options; on an existing cluster the run restarts only what the user allowed by name."""
    chosen = chaos_settings(request.config)
    if settings.cluster == "existing":
        skip_unless(chosen.allow_chaos and bool(chosen.components),
                    "the chaos area restarts components: on an existing cluster pass --allow-chaos and name them "
                    "with --chaos-components (e.g. --chaos-components scheduler,binder)")  # fmt: skip
    return chosen


@pytest.fixture
def sharing(kube: KubeApi, cluster: ClusterState, record: CaseRecorder) -> Iterator[SharingSupport]:
    """Whether the stack shares GPUs, read as the sharing area reads it. On kind with sharing on, the suite answers
    the binder's reservation pods for its fake GPUs until the case ends: on a client and a thread of its own, so a
    restart of the binder leaves it running, and the restarted binder finds its reservation pods answered."""
    from kai_conformance.fixtures.kube.http import ClusterKube

    support = read_sharing_support(kube)
    client = functools.partial(ClusterKube, cluster.kubeconfig, cluster.context)
    with answering_reservations(support, cluster.provider, client) as answers:
        yield support
    if answers is not None:
        record.note(answers.describe(most=ANSWERS_SHOWN))


@pytest.mark.parametrize("case", [param(c) for c in RANDOM])
def test_invariants_hold_while_components_restart(
    case: RandomMixes,
    request: pytest.FixtureRequest,
    chaos: ChaosSettings,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    run: RunContext,
    settings: Settings,
    sharing: SharingSupport,
) -> None:
    """Random mixes from the seed, each restarting every chosen component (fractional workloads too where the stack
    shares GPUs): every invariant holds, the cluster converges after the last restart; a violation is shrunk and
    written as a replayable reproducer."""
    components = parse_components(chaos.components)
    restarter = Restarter(kube, timeouts, chaos.restart_command)
    found = restarter.available(components)
    missing = [c for c in components if c not in found]
    skip_unless(not missing, f"no Deployment runs {', '.join(missing)} on this cluster and no --chaos-restart-command "
                             "is given to restart it")  # fmt: skip
    skip_unless(ctx.layout.total > 0, f"the cluster has no GPUs ({ctx.layout.describe()})")
    progress.report(f"chaos seed {chaos.seed} (draw the same mixes again: --chaos-seed {chaos.seed}); budget "
                    f"{chaos.budget:.0f}s; restarting {', '.join(f'{c} ({where})' for c, where in found.items())}")  # fmt: skip
    unshared = sharing.unavailable()
    fractions = FRACTIONS if unshared is None else ()
    record_sharing(record, sharing, fractions)
    runner = MixRunner(kube, ctx, workspace, timeouts, restarter, ctx.layout)
    campaign = Campaign(runner.run, chaos.seed, chaos.budget)
    original = shrunk = None
    if chaos.replay is not None:
        mix, _ = load_reproducer(chaos.replay)
        skip_unless(not mix.fractional or unshared is None,
                    f"the reproducer's mix has fractional workloads, which this cluster cannot run: {unshared}")  # fmt: skip
        original = shrunk = campaign.attempt(mix)
    else:
        drawn = mixes(ctx.layout, components, horizon=case.horizon, max_workloads=case.max_workloads, seed=chaos.seed,
                      fractions=fractions)  # fmt: skip
        original = campaign.search(drawn)
        if original is not None:
            shrunk = campaign.shrink(original)
    record_campaign(record, campaign, chaos, components, expect)
    if not campaign.outcomes:
        raise errors.UsageError(f"no chaos mix ran within the budget of {chaos.budget:.0f}s: raise --chaos-budget")
    if shrunk is not None and shrunk.violated:
        directories = [run.report_dir / "chaos", diagnostics_dir(run, request.node)]
        raise AssertionError(report_violation(record, settings, campaign, original, shrunk, expect, directories,
                                              server_version(kube)))  # fmt: skip
    not_back = [t.describe() for o in campaign.outcomes for t in o.restarts
                if t.restart is not None and t.restart.ready_at is None]  # fmt: skip
    back = Verdict("components-back", not not_back, "; ".join(not_back) or "every restarted component came back")
    record.verdict(back)
    confirm(back, f"[{expect.kai.name}] component(s) did not come back after a restart")


@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_default_scheduler_leaves_a_gang_partial_under_chaos(
    case: DefaultSchedulerUnderChaos,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    chaos: ChaosSettings,
) -> None:
    """Without KAI an over-cluster gang of whole-node pods is left partial while KAI's scheduler restarts; the
    chaos ledger's ``gang-never-partial`` fires."""
    wide = whole_nodes(ctx.layout)
    skip_unless(wide > 0, f"the cluster has no GPU node ({ctx.layout.describe()})")
    mix = case.mix(ctx.layout, parse_components(chaos.components)[0])
    runner = MixRunner(kube, ctx, workspace, timeouts, Restarter(kube, timeouts, chaos.restart_command), ctx.layout)
    outcome = runner.run(mix, 1)
    verdict = outcome.verdicts.get("gang-never-partial") or Verdict("gang-never-partial", True, "not judged")
    record.verdict(verdict, expect_violation=True)
    for timing in outcome.restarts:
        record.note(timing.describe())
    confirm_fired(verdict, f"gang-never-partial did not fire on the default scheduler's partial gang "
                  f"({outcome.summary()})")  # fmt: skip
