"""Placement strategy: where KAI's binpack/spread setting lives, how a run reads it, and what each strategy does to a
whole-GPU pod. The same for every KAI row (v0.13.0–v0.17.0: the chart template and value, the shard defaulting and
the nodeplacement plugin's scoring are unchanged but for import paths), so these are constants, not rows.

Sources (kai-scheduler/KAI-Scheduler at v0.16.8 and v0.17.0; ``git diff v0.16.8 v0.17.0`` is empty for
``pkg/scheduler/plugins/nodeplacement/``):

* Helm value ``scheduler.placementStrategy: binpack`` (deployments/kai-scheduler/values.yaml:118 at v0.16.8, :132 at
  v0.17.0) is rendered into the ``default`` SchedulingShard as ``spec.placementStrategy.gpu`` and ``.cpu``
  (templates/default-shard.yaml). The operator's Config (``kai.scheduler/v1`` Config) has no placement setting.
* An absent ``placementStrategy`` or field means binpack (pkg/apis/kai/v1/schedulingshard_types.go
  ``PlacementStrategy.SetDefaultWhereNeeded``: 341–342 at v0.16.8, 356–357 at v0.17.0); the operator passes it to
  the ``nodeplacement`` plugin and enables ``gpupack`` or ``gpuspread`` (242–261 / 257–276), and spread disables the
  consolidation action (294 / 309).
* A shard schedules the nodes and workloads of its partition (``--partition-label-value`` =
  ``spec.partitionLabelValue``, pkg/operator/operands/scheduler/resources_for_shard.go:341 / :361); the suite's
  nodes and workloads carry no node-pool label, so the shard with an empty ``partitionLabelValue`` (the chart's
  ``default``) places them.
* Scoring of a node for a GPU pod (pkg/scheduler/plugins/nodeplacement): binpack (pack.go 45–64) scores highest the
  node with the *fewest* non-allocated GPUs among the nodes that fit the pod; spread (spread.go 16–35) scores
  ``non-allocated / GPUs of the node``, highest for the *most free fraction*.
"""

from __future__ import annotations

BINPACK = "binpack"
SPREAD = "spread"
STRATEGIES = (BINPACK, SPREAD)
#: What an absent setting means (``SetDefaultWhereNeeded``).
DEFAULT_STRATEGY = BINPACK
#: The Helm value of KAI's chart that sets the default shard's strategy (``--kai-set`` passes it to the install).
HELM_VALUE = "scheduler.placementStrategy"
#: The shard field a run reads, in the shard that places the suite's workloads.
SHARD_FIELD = "spec.placementStrategy.gpu"
#: The chart's shard (templates/default-shard.yaml), the one with an empty ``partitionLabelValue``.
DEFAULT_SHARD = "default"
#: How each strategy picks the node of a whole-GPU pod among the nodes with room for it.
RULES = {
    BINPACK: "the node with the fewest free GPUs (most allocated) among those with room",
    SPREAD: "the node with the largest free fraction of its GPUs among those with room",
}


def enable_hint(strategy: str) -> str:
    """The option that makes an installing run (``--install always``, or kind) set ``strategy``."""
    return f"--kai-set {HELM_VALUE}={strategy}"
