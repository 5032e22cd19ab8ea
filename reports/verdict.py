"""The verdict of a report: one code a CI job can act on (``conformant``, ``conformant-assumed``,
``not-conformant``, ``inconclusive``, ``expectations-outdated``, ``empty``), a headline and a detail, from the
counts of each status. Product failures come first, then infrastructure errors, then unexpected passes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kai_conformance.reports.status import Status, plural

#: Conformant, but some expectations were assumed from another version's rows (clusters/assumptions.py).
CONFORMANT_ASSUMED = "conformant-assumed"


@dataclass(frozen=True)
class Verdict:
    code: str  # conformant | conformant-assumed | not-conformant | inconclusive | expectations-outdated | empty
    headline: str
    detail: str
    status: Status


def verdict_of(totals: Counter, *, interrupted: bool = False, assumptions: Sequence[str] = ()) -> Verdict:
    """The verdict of a report whose cases have ``totals`` per status; ``assumptions`` name the versions whose
    expectations came from another version's rows."""
    observed = sum(n for s, n in totals.items() if s is not Status.SKIPPED)
    known = f"; {plural(totals[Status.XFAILED], 'known deviation')}" if totals[Status.XFAILED] else ""
    if totals[Status.FAILED]:
        return Verdict(
            "not-conformant",
            f"Not conformant: {plural(totals[Status.FAILED], 'product failure')}",
            "The system under test misbehaved in the cases listed under Product failures.",
            Status.FAILED,
        )
    if totals[Status.BROKEN]:
        return Verdict(
            "inconclusive",
            f"Inconclusive: {plural(totals[Status.BROKEN], 'case')} not observed (infrastructure)",
            "No product failure was seen, but the listed cases could not observe the behaviour.",
            Status.BROKEN,
        )
    if totals[Status.XPASSED]:
        return Verdict(
            "expectations-outdated",
            f"Expectations out of date: {plural(totals[Status.XPASSED], 'unexpected pass', 'unexpected passes')}",
            "A documented deviation no longer happens: update the expectation table.",
            Status.XPASSED,
        )
    if not observed:
        return Verdict("empty", "No case was observed", "Every case was skipped or none ran.", Status.SKIPPED)
    suffix = " (run interrupted: partial)" if interrupted else ""
    if assumptions:
        return Verdict(
            CONFORMANT_ASSUMED,
            f"Conformant against assumed expectations: {plural(observed, 'case')} behaved as expected{suffix}",
            f"{totals[Status.PASSED]} passed{known}; {totals[Status.SKIPPED]} skipped. "
            + " ".join(f"{a}." for a in assumptions),
            Status.PASSED,
        )
    return Verdict(
        "conformant",
        f"Conformant: {plural(observed, 'case')} behaved as expected{suffix}",
        f"{totals[Status.PASSED]} passed{known}; {totals[Status.SKIPPED]} skipped.",
        Status.PASSED,
    )
