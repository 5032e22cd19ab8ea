"""Label detectors: whether each key set at a source arrived at exactly the levels it must
(:mod:`suites.support.levels` finds the arrivals)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kai_conformance.suites.support.detectors.verdict import Verdict


@dataclass(frozen=True)
class Arrival:
    """Did ``key`` set at ``source`` arrive at ``level``, and was it expected to?"""

    source: str
    key: str
    level: str
    expected: bool
    observed: bool


def arrivals_as_expected(arrivals: Sequence[Arrival]) -> Verdict:
    wrong = [a for a in arrivals if a.expected != a.observed]
    if not arrivals:
        return Verdict("propagation", False, "nothing was checked")
    if wrong:
        lines = [
            f"{a.key} from {a.source} at {a.level}: expected {'present' if a.expected else 'absent'}, "
            f"found {'present' if a.observed else 'absent'}"
            for a in wrong
        ]
        return Verdict("propagation", False, f"{len(wrong)} of {len(arrivals)} arrivals differ: " + "; ".join(lines))
    return Verdict("propagation", True, f"all {len(arrivals)} (source, key, level) arrivals as expected")


def fired_at_levels(fired: set[str], expected: set[str] | frozenset[str]) -> Verdict:
    """The propagation detector fired at exactly the ``expected`` levels (a control's: the misjudged ones)."""
    same = set(fired) == set(expected)
    return Verdict("propagation-levels", same, f"the label detector fired at {sorted(fired)}"
                   + ("" if same else f", expected exactly at {sorted(expected)}"))  # fmt: skip
