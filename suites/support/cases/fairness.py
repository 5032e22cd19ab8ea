"""Fair-share cases: two sibling queues (teams) saturated with preemptible gangs, the first filling the empty
cluster, the second arriving with as much again and reclaiming until both hold their fair shares.

Sizes are symbolic: a gang is ``max(2, GPUs // 6)`` 1-GPU pods (2 on the PR-gate layout's 12 GPUs), each team
submits enough gangs to fill the cluster alone, and a quota is a whole number of gangs (so in-quota protection is
exact: reclaim takes whole gangs). The tolerance of the ``fair-share`` detector is one gang's GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, WholeCluster
from kai_conformance.suites.support.detectors.fairness import QueueShare, fair_shares
from kai_conformance.suites.support.expectations.fairness import DEFAULT_QUEUE_PRIORITY
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job, queue_name

#: A queue priority above the default (100): its bucket is served before the default bucket's weights.
HIGH_QUEUE_PRIORITY = 200


@dataclass(frozen=True)
class Team:
    """A leaf queue and its gangs. ``quota_share``: deserved GPUs as a fraction of the cluster, rounded down to
    whole gangs (at least one when not 0); ``priority`` None leaves ``spec.priority`` unset (KAI: 100)."""

    role: str
    weight: float = 1
    priority: int | None = None
    quota_share: float = 0

    def describe(self) -> str:
        parts = [f"weight {self.weight:g}"]
        if self.priority is not None:
            parts.append(f"priority {self.priority}")
        if self.quota_share:
            parts.append(f"quota {self.quota_share:.2g} of the cluster")
        return f"{self.role} ({', '.join(parts)})"


def gang_pods(layout: GpuLayout) -> int:
    """Pods (1 GPU each) per gang: the settling tolerance, so small against the cluster."""
    return max(2, layout.total // 6)


def gangs_per_team(layout: GpuLayout) -> int:
    """Gangs each team submits: enough to fill the cluster alone (saturated)."""
    return max(1, math.ceil(layout.total / gang_pods(layout)))


@dataclass(frozen=True)
class FairShareCase(WholeCluster):
    """``first`` fills the empty cluster with gangs; ``second`` then submits as many. Both are preemptible
    (``train``) and saturated, so reclaim moves whole gangs from the team over its fair share to the one under it.

    ``baseline``: the teams' rules a scheduler ignoring the behaviour under test would settle by (equal weights, no
    priority, no quota); the case skips on a layout where the two outcomes are within one gang of each other.
    ``judged`` (control cases): rules the detector is shown instead of the real ones.
    """

    id: str
    first: Team
    second: Team
    baseline: tuple[Team, Team] | None = None
    judged: tuple[Team, Team] | None = None
    slow: bool = False

    @property
    def teams(self) -> tuple[Team, Team]:
        return self.first, self.second

    def quota(self, team: Team, layout: GpuLayout) -> int:
        if not team.quota_share:
            return 0
        gang = gang_pods(layout)
        return gang * max(1, int(layout.total * team.quota_share) // gang)

    def demand(self, layout: GpuLayout) -> int:
        return gangs_per_team(layout) * gang_pods(layout)

    def tolerance(self, layout: GpuLayout) -> int:
        return gang_pods(layout)

    def shares(self, ctx: RenderContext, teams: tuple[Team, Team] | None = None) -> dict[str, QueueShare]:
        """Queue name → what KAI's division sees, for the case's teams (or ``teams`` with the case's queues)."""
        return {
            queue_name(ctx.namespace, own.role): QueueShare(
                role=own.role,
                demand=self.demand(ctx.layout),
                quota=self.quota(rules, ctx.layout),
                weight=rules.weight,
                priority=DEFAULT_QUEUE_PRIORITY if rules.priority is None else rules.priority,
            )
            for own, rules in zip(self.teams, teams or self.teams, strict=True)
        }

    def differs(self, ctx: RenderContext, teams: tuple[Team, Team]) -> bool:
        """Do ``teams``' rules give fair shares more than one gang away from the case's own?"""
        own = fair_shares(ctx.layout.total, self.shares(ctx))
        other = fair_shares(ctx.layout.total, self.shares(ctx, teams))
        return any(abs(own[q] - other[q]) > self.tolerance(ctx.layout) for q in own)

    def queue(self, ctx: RenderContext, team: Team) -> Manifest:
        obj = case_queue(ctx, team.role, gpu_quota=self.quota(team, ctx.layout), gpu_limit=UNLIMITED)
        obj["spec"]["resources"]["gpu"]["overQuotaWeight"] = team.weight
        if team.priority is not None:
            obj["spec"]["priority"] = team.priority
        return obj

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx, team) for team in self.teams]

    def gang_names(self, ctx: RenderContext, team: Team) -> list[str]:
        return [f"{team.role}-{i}" for i in range(gangs_per_team(ctx.layout))]

    def gangs(self, ctx: RenderContext, team: Team) -> list[Manifest]:
        pods = gang_pods(ctx.layout)
        return [case_train_job(ctx, name, pods, 1, team.role) for name in self.gang_names(ctx, team)]

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), *self.gangs(ctx, self.first), *self.gangs(ctx, self.second)]
