"""The core of every detector: the :class:`Verdict`, how verdicts compose, and what detectors share.

A verdict reads like a finding: "gang violated: 2 of 4 pods bound (node-a, node-b) while 2 pending". Cases record
verdicts (``record.verdict``) and turn them into waits (``verdict.observation()``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kai_conformance.fixtures.waits import Observation
from kai_conformance.suites.support.snapshot import Obj, Snapshot, name_of


@dataclass(frozen=True)
class Verdict:
    detector: str
    ok: bool
    explanation: str
    #: Held only because there was nothing to judge (no gang waited, no pod was ever bound, …): a hold that proves
    #: nothing about the product, which a reader must be able to tell from one that does.
    vacuous: bool = False

    def observation(self) -> Observation:
        return Observation(self.ok, f"{self.detector}: {self.explanation}")

    def __str__(self) -> str:
        held = "ok (vacuous)" if self.vacuous else "ok"
        return f"[{self.detector}] {held if self.ok else 'VIOLATED'}: {self.explanation}"


def vacuous(verdict: Verdict, reason: str) -> Verdict:
    """``verdict``, if it held, marked as held vacuously because ``reason`` (nothing to judge); a violation stays."""
    if not verdict.ok or verdict.vacuous:
        return verdict
    return replace(verdict, vacuous=True, explanation=f"held vacuously, {reason} ({verdict.explanation})")


def all_of(*verdicts: Verdict) -> Verdict:
    """One verdict holding when all hold; its explanation lists the failing ones first."""
    failing = [v for v in verdicts if not v.ok]
    shown = failing or list(verdicts)
    return Verdict("+".join(v.detector for v in verdicts), not failing, "; ".join(str(v) for v in shown))


def fires(verdict: Verdict) -> Verdict:
    """For control cases: holds when ``verdict`` reports a violation (the detector works on this cluster)."""
    return Verdict(f"{verdict.detector}-fires", not verdict.ok, verdict.explanation)


def one_podgroup(snap: Snapshot, detector: str) -> Obj | Verdict:
    """The snapshot's one PodGroup, or the verdict of ``detector`` that there is not exactly one."""
    pg = snap.podgroup
    if pg is None:
        names = ", ".join(name_of(g) for g in snap.podgroups) or "none"
        return Verdict(detector, False, f"expected one PodGroup for {snap.what}, found {len(snap.podgroups)}: {names}")
    return pg
