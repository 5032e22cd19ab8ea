"""The verdict of a report: one code a CI job can act on (``conformant``, ``conformant-assumed``,
``not-conformant``, ``incomplete``, ``inconclusive``, ``expectations-outdated``, ``empty``), a headline and a detail,
from the counts of each status. Product failures come first, then an interrupted run, then infrastructure errors,
then unexpected passes.

An interrupted run (Ctrl-C, SIGTERM, a collection error) is ``incomplete`` whatever its cases did, short of a product
failure: the cases that never ran could have failed, so a dashboard or a gate that reads only the code must never
see it as conformant. A failure it saw still makes it ``not-conformant``.

A run whose cluster could not be provisioned stops too (pytest says "Interrupted"), but nobody interrupted it: it is
``inconclusive``, and its headline says the cluster could not be provisioned, with the reason and the fix."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kai_conformance.reports.status import STATUS_ORDER, Status, plural

#: Conformant, but some expectations were assumed from another version's rows (clusters/assumptions.py).
CONFORMANT_ASSUMED = "conformant-assumed"
#: The run was interrupted before every case ran, and none of those that ran failed: neither verdict can be given.
INCOMPLETE = "incomplete"


@dataclass(frozen=True)
class Verdict:
    code: str  # conformant(-assumed) | not-conformant | incomplete | inconclusive | expectations-outdated | empty
    headline: str
    detail: str
    status: Status


def verdict_of(
    totals: Counter,
    *,
    interrupted: bool = False,
    assumptions: Sequence[str] = (),
    uncounted: Sequence[str] = (),
    not_provisioned: Sequence[str] = (),
) -> Verdict:
    """The verdict of a report whose cases have ``totals`` per status; ``assumptions`` name the versions whose
    expectations came from another version's rows; ``uncounted`` the cases of an interrupted run that finished on
    a worker after the interrupt (pytest did not count them, nor does the report); ``not_provisioned`` why a run's
    cluster could not be provisioned."""
    observed = sum(n for s, n in totals.items() if s is not Status.SKIPPED)
    known = f"; {plural(totals[Status.XFAILED], 'known deviation')}" if totals[Status.XFAILED] else ""
    partial = " The run was interrupted: the cases that did not run are not judged." if interrupted else ""
    if totals[Status.FAILED]:
        return Verdict(
            "not-conformant",
            f"Not conformant: {plural(totals[Status.FAILED], 'product failure')}",
            "The system under test misbehaved in the cases listed under Product failures." + partial,
            Status.FAILED,
        )
    if not_provisioned:
        return Verdict(
            "inconclusive",
            "Inconclusive: the run's cluster could not be provisioned, so no case was observed",
            " ".join(dict.fromkeys(not_provisioned)) + " The cases are not judged: fix the cause and run again.",
            Status.BROKEN,
        )
    if interrupted:
        return incomplete(totals, uncounted)
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
    if assumptions:
        return Verdict(
            CONFORMANT_ASSUMED,
            f"Conformant against assumed expectations: {plural(observed, 'case')} behaved as expected",
            f"{totals[Status.PASSED]} passed{known}; {totals[Status.SKIPPED]} skipped. "
            + " ".join(f"{a}." for a in assumptions),
            Status.PASSED,
        )
    return Verdict(
        "conformant",
        f"Conformant: {plural(observed, 'case')} behaved as expected",
        f"{totals[Status.PASSED]} passed{known}; {totals[Status.SKIPPED]} skipped.",
        Status.PASSED,
    )


def incomplete(totals: Counter, uncounted: Sequence[str] = ()) -> Verdict:
    """An interrupted run without a product failure: how many cases ran to a verdict, in pytest's words."""
    ran = sum(totals.values())
    counts = ", ".join(f"{totals[s]} {s.label}" for s in STATUS_ORDER if totals[s]) or "none"
    late = (
        f" {plural(len(uncounted), 'case')} finished on a worker after the interrupt and are not counted, as pytest "
        f"did not count them: {', '.join(uncounted)}."
        if uncounted
        else ""
    )
    return Verdict(
        INCOMPLETE,
        f"Incomplete: the run was interrupted after {plural(ran, 'case')} ran to a verdict",
        f"Counted as pytest counted them: {counts}. The cases that did not run are not judged, so the run is "
        f"neither conformant nor not conformant: run it again to the end.{late}",
        Status.BROKEN,
    )
