"""Builds that are no release but whose source was read: branch heads a pull request targets.

``--kai-version main`` names no release, so nothing says by its number which fixes it carries. For the branch heads
that were read (bare git copies, ``../shared/crds/README.md``) the facts are written down here once: the commit, the
day, the folder of their CRD schemas, and (in :mod:`suites.support.known_bugs`) which known bugs they still have.
A build that is not listed (``pr-42``, a later ``main``) is judged as the newest known build of its branch would be,
and when it names no branch, as newer than every release (clusters/assumptions.py).

Sources: ``git log -1 <branch>`` in the bare copies of kai-scheduler/KAI-Scheduler, kubeflow/trainer and
kubernetes-sigs/jobset (fetched 2026-11-27; the newest commits they hold).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Build:
    component: str  # kai | trainer | jobset
    #: The names a user may give it (``--kai-version main``); the first is the branch.
    names: tuple[str, ...]
    commit: str
    date: str
    #: Its CRD schemas under $KAI_CONFORMANCE_CRDS.
    crds: str

    @property
    def branch(self) -> str:
        return self.names[0]

    def describe(self) -> str:
        return f"{self.branch} at {self.commit} ({self.date})"


BUILDS: tuple[Build, ...] = (
    Build("kai", ("main", "main-2026-08-07"), "d5bc503a", "2026-08-07", "kai-scheduler/main-2026-08-07"),
    Build(
        "kai",
        ("v0.17", "v0.17-branch", "v0.17-branch-2026-08-07"),
        "df7f1407",
        "2026-08-07",
        "kai-scheduler/v0.17-branch-2026-08-07",
    ),
    Build("trainer", ("master", "master-2026-08-21"), "8c0f5059", "2026-08-21", "trainer/master-2026-08-21"),
    Build("jobset", ("main", "main-2026-08-18"), "08dfbdfd", "2026-08-18", "jobset/main-2026-08-18"),
)


def build_of(component: str, version: str) -> Build | None:
    """The read build ``version`` names for ``component`` (``main``, ``master``, ``v0.17``), or None."""
    wanted = version.strip()
    return next((b for b in BUILDS if b.component == component and wanted in b.names), None)
