"""The cluster a run uses, written once by whichever process provisions it and read by all the others.

Lives in the run's state directory (shared by pytest-xdist workers). The main process reads it at the end to
check for leftovers and to tear down a cluster that this run created.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class ClusterState:
    provider: str  # kind | existing
    name: str
    kubeconfig: str
    context: str | None = None
    created_by_run: bool = False  # only a cluster this run created is ever deleted by it
    kept: bool = False  # --keep-cluster / --reuse-cluster: never deleted
    gpus: dict[str, int] = field(default_factory=dict)  # node name → GPUs, slices' nodes left out
    #: slice name → its nodes' GPUs (clusters/slices.py): a node pool of its own, for one case at a time.
    slices: dict[str, dict[str, int]] = field(default_factory=dict)
    stack: dict = field(default_factory=dict)  # what was installed (versions, images, values)
    ready: bool = False  # False while provisioning: the cluster exists (teardown applies) but is not usable yet
    #: Why cases marked ``disruptive`` may run here ("" = refused): a kind cluster, --allow-disruptive, or the
    #: opt-in label (clusters/existing.py).
    disruptive_opt_in: str = ""

    def save(self, state_dir: Path) -> None:
        path = state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        tmp.replace(path)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterState | None:
        path = state_dir / STATE_FILE
        if not path.is_file():
            return None
        return cls(**json.loads(path.read_text()))
