"""What a case's outcome means in the reports: :class:`Status` (product failure, infrastructure error, known
deviation, …) from a record's pytest outcome and failure kind, and the words they are counted in."""

from __future__ import annotations

import textwrap
from enum import Enum

from kai_conformance.reports import categories
from kai_conformance.reports.records import CaseRecord


class Status(Enum):
    """A case's status in the reports; ``severity`` orders them (worst first) and aggregates matrix cells."""

    FAILED = ("failed", "product failure", "✗", 5)
    BROKEN = ("broken", "infrastructure error", "⚠", 4)
    XPASSED = ("xpassed", "unexpected pass", "!", 3)
    XFAILED = ("xfailed", "known deviation", "◇", 2)
    PASSED = ("passed", "passed", "✓", 1)
    SKIPPED = ("skipped", "skipped", "○", 0)

    def __init__(self, key: str, label: str, symbol: str, severity: int) -> None:
        self.key, self.label, self.symbol, self.severity = key, label, symbol, severity

    @property
    def conforming(self) -> bool:
        return self in (Status.PASSED, Status.XFAILED)


STATUS_ORDER = sorted(Status, key=lambda s: -s.severity)


def status_of(record: CaseRecord) -> Status:
    outcome, kind = record.outcome, record.failure_kind
    if outcome == "passed":
        return Status.PASSED
    if outcome == "skipped":
        return Status.SKIPPED
    if outcome == "xpassed" or (outcome == "failed" and "XPASS(strict)" in record.message):
        return Status.XPASSED
    if outcome == "xfailed":
        # A known deviation only counts as reproduced when the product, not the infrastructure, failed.
        return Status.BROKEN if kind == categories.INFRASTRUCTURE else Status.XFAILED
    if kind == categories.PRODUCT:
        return Status.FAILED
    if kind == categories.INFRASTRUCTURE:
        return Status.BROKEN
    return Status.FAILED if outcome == "failed" else Status.BROKEN


def exception_lines(message: str) -> list[str]:
    """The exception's own lines from a pytest traceback text (``E   ...``), else its last lines."""
    lines = [line[1:] for line in message.splitlines() if line.startswith("E ") or line == "E"]
    if lines:
        return textwrap.dedent("\n".join(lines)).splitlines()
    return [line for line in message.strip().splitlines()[-20:]]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 product failure`` / ``2 product failures``."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"
