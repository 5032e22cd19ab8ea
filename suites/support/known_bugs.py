"""Known upstream bugs a TrainJob can hit: which versions and builds have each, the source that says so, and the case
that observes it. Written once; the cases' strict xfails (:func:`gap`) and the report's known-bugs section
(reports/sections/known_bugs.py) both read it.

A release has a bug when it lies in one of the bug's ``affected`` ranges (first affected release, first fixed
release). A read branch head (clusters/builds.py: KAI ``main`` and ``v0.17`` of 2026-08-07, Trainer ``master`` of
2026-08-21, JobSet ``main`` of 2026-08-18) has it unless its fix is listed in ``fixed_by_builds`` (commits checked
with ``git branch --contains`` in the bare copies). Any other build (``pr-42``) counts as newer than every release:
it has only the bugs no branch has fixed. Below ``known_from`` nothing was read: :func:`affects` says None there.

Every fact was checked in the upstream source (bare git copies fetched 2026-11-27; commits abbreviated):
see each bug's ``source``. Where it rests on an inference (a release's contents read from its release pull request
only), ``inferred`` says which part.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.assumptions import release_key
from kai_conformance.clusters.builds import BUILDS, build_of

LIFECYCLE = "suites/test_lifecycle.py"
TERMINAL = "suites/test_lifecycle_terminal.py"
PODGROUPER = "suites/test_podgrouper.py"
PODGROUP_API = "suites/test_podgroup_api.py"
RUNTIMES = "suites/test_runtimes.py"


@dataclass(frozen=True)
class KnownBug:
    #: ``KAI #1968``: the project and the issue (or, without one, the pull request) it is known by.
    key: str
    component: str  # kai | trainer | jobset
    behaviour: str
    #: (first affected release, first fixed release or None) ranges, in release order.
    affected: tuple[tuple[str, str | None], ...]
    #: Where the affected and fixed versions were read (files, commits, pull requests).
    source: str
    #: Names of the read builds (clusters/builds.py, first name) that carry the fix.
    fixed_by_builds: frozenset[str] = frozenset()
    #: Pytest node ids (or their prefixes) of the cases that observe it; empty with ``not_observable``.
    cases: tuple[str, ...] = ()
    #: Why no case can observe it through a TrainJob, or None.
    not_observable: str | None = None
    #: How its cases observe it where no TrainJob reaches it (objects of the case's own), or None.
    observed_without_trainjob: str | None = None
    #: Why no case observes it yet although one could, or None.
    no_case_yet: str | None = None
    #: The oldest release the facts cover: for an older one :meth:`affects` says None (not known).
    known_from: str = "v0.13.0"
    #: What in the versions above is inferred rather than read, or None.
    inferred: str | None = None
    url: str = ""
    #: The first releases with the fix, where the ends of ``affected`` do not say it (a range ending where a
    #: version stops having it for another reason); None: every range end that starts no other range.
    fixed_releases: tuple[str, ...] | None = None

    @property
    def number(self) -> str:
        """``1968`` of ``KAI #1968``: what an xfail reason or a failure message names the bug by."""
        return self.key.rpartition("#")[2]

    @property
    def first_fixed_releases(self) -> tuple[str, ...]:
        if self.fixed_releases is not None:
            return self.fixed_releases
        starts = {first for first, _ in self.affected}
        return tuple(fixed for _, fixed in self.affected if fixed and fixed not in starts)

    @property
    def fixed_in(self) -> str:
        """``v0.17.1; main, v0.17``: the first fixed releases and the read builds with the fix, or ``open``."""
        inferred = self.inferred or ""
        releases = [f"{r} [inferred]" if r in inferred else r for r in self.first_fixed_releases]
        builds = [b.describe() for b in BUILDS if b.component == self.component and b.branch in self.fixed_by_builds]
        return "; ".join(p for p in (", ".join(releases), ", ".join(builds)) if p) or "open"

    @property
    def affected_text(self) -> str:
        def one(first: str, fixed: str | None) -> str:
            return f"{first} to before {fixed}" if fixed else f"{first} and later"

        if not self.affected:
            return "not known"
        text = "; ".join(one(*r) for r in self.affected)
        unfixed = [
            b.describe() for b in BUILDS if b.component == self.component and b.branch not in self.fixed_by_builds
        ]
        return text + (f"; builds {', '.join(unfixed)}" if unfixed else "")

    def affects(self, version: str) -> bool | None:
        """Does ``version`` (a release or a build of this bug's component) have the bug? None: not known."""
        if not self.affected:  # no version is known to have it
            return None
        build = build_of(self.component, version)
        if build is not None:
            return build.branch not in self.fixed_by_builds
        key = release_key(version)
        if key is None:  # an unread build: newer than every release, it has what no branch has fixed
            return not self.first_fixed_releases and not self.fixed_by_builds
        floor = release_key(self.known_from)
        if floor is not None and key < floor:
            return None
        for first, fixed in self.affected:
            low, high = release_key(first), release_key(fixed) if fixed else None
            if low is not None and low <= key and (high is None or key < high):
                return True
        return False

    def reason(self, version: str) -> str:
        """The xfail reason: starts with the key, so the report can tell that the case failed for this bug."""
        return (
            f"{self.key} in {version}: {self.behaviour} (affected: {self.affected_text}; fixed: {self.fixed_in}; "
            f"source: {self.source}" + (f"; inferred: {self.inferred}" if self.inferred else "") + ")"
        )


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "KAI #1968",
        "kai",
        "stale-gang eviction evicts the still-running pods of a gang whose first pods completed with exit 0 (the "
        "scheduler's pod informer drops Succeeded pods, so IsStale never sees them)",
        (("v0.16.2", "v0.17.0"), ("v0.17.0", "v0.17.1")),
        "filterTerminalPods at watch time: #1647 (04e8472c, first tag v0.17.0; v0.16 backport 44c8a3e6, first tag "
        "v0.16.2); fix PR #2012 (57ec7ca8 on main), backport #2022 (3767c11e on v0.17); no v0.16 backport: the v0.16 "
        "branch head b1640b92 lacks it, and v0.16.9's release PR lists no such fix",
        frozenset({"main", "v0.17"}),
        (f"{LIFECYCLE}::test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale",),
        inferred="v0.17.1 is the first release with the fix (its release pull request lists #2022; the tag was not read)",
        url="https://github.com/kai-scheduler/KAI-Scheduler/issues/1968",
    ),
    KnownBug(
        "KAI #1888",
        "kai",
        "a PodGroup's UnschedulableOnNodePool scheduling condition stays once its gang is scheduled and bound",
        (("v0.16.0", "v0.17.0"),),
        "fix PR #1908 (11dc589e, default_status_updater.go clearPodGroupSchedulingCondition): in tag v0.17.0 and on "
        "main and v0.17; no v0.16 tag and not the v0.16 branch head b1640b92",
        frozenset({"main", "v0.17"}),
        (f"{TERMINAL}::test_a_gang_that_waited_sheds_its_unschedulable_condition_once_bound",),
        known_from="v0.16.0",
        url="https://github.com/kai-scheduler/KAI-Scheduler/issues/1888",
    ),
    KnownBug(
        "KAI #1944",
        "kai",
        "the PodGroup CRD refuses minMember 0 and minSubGroup 0 (no gang)",
        (("v0.16.8", "v0.16.9"), ("v0.17.0", "v0.17.1")),
        "CRD scheduling.run.ai_podgroups.yaml minimum 1 at v0.16.8 and v0.17.0, minimum 0 on main d5bc503a and v0.17 "
        "df7f1407 (../shared/crds); fix PR #1989 (62c594bf), backports #2017 (7e677370, v0.16) and #2018 (a72e24dc, "
        "v0.17)",
        frozenset({"main", "v0.17"}),
        (f"{PODGROUP_API}::test_a_podgroup_without_a_gang_is_accepted",),
        observed_without_trainjob="at the API, with PodGroups of the case's own (server-side dry-run of minMember 0 "
        "and minSubGroup 0), because no TrainJob reaches it: a TrainJob reaches a PodGroup only through KAI's JobSet "
        "grouper, which itself refuses kai.scheduler/batch-min-member below 1 on the JobSet and on a replicatedJob "
        "template (jobset_grouper.go computePodGroupMinSubGroup, singleReplicaSubGroupMinMember: 'must be >= 1') at "
        "v0.16.8, v0.17.0, main d5bc503a and v0.17 df7f1407, and otherwise writes minimum 1; so no TrainJob asks the "
        "CRD for 0 on any version. The webhook of v0.16.8 and v0.17.0 also refuses a root minSubGroup below 1 "
        "(podgroup_webhook.go validatePodGroupSpec), dropped by #1989; the CRD refuses first",
        known_from="v0.16.8",
        inferred="v0.16.9 and v0.17.1 carry the backports (their release pull requests; the tags were not read)",
        url="https://github.com/kai-scheduler/KAI-Scheduler/issues/1944",
    ),
    KnownBug(
        "KAI PR #2096",
        "kai",
        "a PodSet (SubGroup) below its floor is still handed the pods it has, so they are bound below the floor",
        (("v0.13.0", "v0.17.2"),),
        "allocation_info.go collectTasksFromPodSet at v0.15.3-v0.17.0 (docs/research/upstream-facts.md §B10); fix "
        "b1a4be07 on main merged after 2026-08-07 (absent from the read main d5bc503a), backport #2152 on v0.17 after "
        "df7f1407; no v0.16 backport",
        frozenset(),
        (f"{PODGROUPER}::test_no_subgroup_is_bound_below_its_floor",),
        inferred="v0.17.2 is the first release with the fix (v0.17.1 does not carry it per KAI PR #2132)",
        url="https://github.com/kai-scheduler/KAI-Scheduler/pull/2096",
    ),
    KnownBug(
        "KAI #1209",
        "kai",
        "the podgrouper ignores JobSet dependsOn: the gang counts a replicatedJob whose pods come only later, so "
        "the PodGroup never becomes ready",
        (("v0.13.0", "v0.15.0"), ("v0.16.0", None)),
        "no podgrouper source mentions dependsOn at v0.13.0-v0.17.0 nor on main d5bc503a; issue open. v0.15 "
        "groups a JobSet with minMember 1 (or the suite's batch-min-member), so its case passes there",
        frozenset(),
        (f"{PODGROUPER}::test_a_depends_on_runtime_is_scheduled", f"{RUNTIMES}::test_a_shipped_runtime_runs_under_kai"),
        fixed_releases=(),
        url="https://github.com/kai-scheduler/KAI-Scheduler/issues/1209",
    ),
    KnownBug(
        "KAI #1448",
        "kai",
        "a kind grouped by the skip-top-owner grouper (TrainJob) does not take its per-type defaults (priority "
        "class, preemptibility) from KAI's defaults ConfigMap",
        (("v0.13.0", "v0.14.1"),),
        "the issue is still open, but PR #1450 (5079510d, skiptopowner.go applyDefaultsFromSkippedOwner) carries "
        "the fix: first tags v0.15.0 and, backported, v0.14.1 (180613b5) and v0.12.19; absent from every v0.13 tag "
        "(v0.13.4 read)",
        frozenset({"main", "v0.17"}),
        no_case_yet="no version the suite runs has it: the oldest KAI it accepts is v0.16.8 (older ones are refused, "
        "clusters/assumptions.py nearest_known) and every release from v0.14.1 and v0.15.0 on, and both read builds, "
        "carry the fix. A case would also need KAI's podgrouper restarted with a defaults ConfigMap (Config "
        "podGrouper.args.defaultPrioritiesConfigMapName/Namespace), a cluster-wide reconfiguration the suite does not make",
        url="https://github.com/kai-scheduler/KAI-Scheduler/issues/1448",
    ),
    KnownBug(
        "Trainer #3779",
        "trainer",
        "once its JobSet failed (no restarts left) and was deleted by its TTL, the TrainJob's Failed condition is "
        "removed and the JobSet made again, its restart budget starting anew",
        (("v2.0.0", "v2.4.0"),),
        "pkg/controller/trainjob_controller.go Reconcile calls removeFailedCondition at v2.0.0, v2.1.0, v2.2.0 and "
        "v2.3.0; fix PR #3891 (a1f74d48c on master, 2026-08-11) removes it",
        frozenset({"master"}),
        (f"{TERMINAL}::test_a_failed_trainjob_does_not_make_its_deleted_jobset_again[ttl",),
        inferred="the first release after v2.3.0 (v2.4.0, not out when read) carries master's fix",
        url="https://github.com/kubeflow/trainer/issues/3779",
    ),
    KnownBug(
        "Trainer #3737",
        "trainer",
        "once its JobSet failed (no restarts left) and was deleted by hand, the TrainJob makes it again",
        (("v2.0.0", "v2.4.0"),),
        "the same removeFailedCondition at v2.0.0-v2.3.0; PR #3891 (a1f74d48c) keeps Failed terminal, so "
        "IsTrainJobFinished skips reconcileObjects however the JobSet went: fixed on master in the source, though "
        "the issue (and #3740) is still open",
        frozenset({"master"}),
        (f"{TERMINAL}::test_a_failed_trainjob_does_not_make_its_deleted_jobset_again[by-hand",),
        inferred="fixed on master read from the code of #3891 (which names only #3779)",
        url="https://github.com/kubeflow/trainer/issues/3737",
    ),
    KnownBug(
        "Trainer #3008",
        "trainer",
        "suspending or resuming a TrainJob is refused by JobSet's webhook (spec.replicatedJobs: field is "
        "immutable), so its JobSet never follows",
        (),
        "reported 2025-11-27 against master (about v2.1); the fix #3041 was closed unmerged; v2.3.0 and master "
        "8c0f5059 still server-side apply the whole JobSet spec on suspend and resume (plugins/jobset/jobset.go "
        "Build). Not seen in the suite's shape: the suspend cases passed on real kind with Trainer v2.3.0 / JobSet "
        "v0.12.0 and v2.2.0 / v0.11.1 (docs/clusters.md, 2026-11-24)",
        frozenset(),
        (f"{LIFECYCLE}::test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole",),
        inferred="which versions and shapes show it is not known: no version is marked affected",
        url="https://github.com/kubeflow/trainer/issues/3008",
    ),
)

BY_KEY = {bug.key: bug for bug in KNOWN_BUGS}


def gap(key: str, version: str) -> str | None:
    """The strict-xfail reason of bug ``key`` for ``version`` of its component, or None when it has the fix (or
    nothing is known: the case must then pass)."""
    bug = BY_KEY[key]
    return bug.reason(version) if bug.affects(version) else None


def bugs_of(component: str) -> list[KnownBug]:
    return [b for b in KNOWN_BUGS if b.component == component]
