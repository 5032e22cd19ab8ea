"""The chaos run's search: mixes drawn from the seed until one violates an invariant or the budget is spent (a
near-copy of a mix that ran, the same description with other quotas or priorities, is passed over), the violating
mix shrunk to the smallest that still violates, a reproducer file, and its replay.

Hypothesis draws and shrinks; the cluster is the test. Search is one Hypothesis run over
:func:`~suites.support.chaos.mix.mixes` seeded with the run's seed (generation only); shrinking is a second one over
:func:`~suites.support.chaos.mix.submixes` of the violating mix, where a smaller mix "fails" when it violates one of
the same invariants. Both are bounded by the run's budget: once it is spent every further example counts as
passing without running, and every mix that did run is remembered, so Hypothesis's final replay of the smallest
failing example gives the same answer without running it again (no flakiness from the cluster's timing).

A reproducer (YAML) is self-contained: the seed, the versions it ran on, the mix as data, the restart schedule with
what each restart did, the violated invariants and the timeline around the violation. ``--chaos-replay=FILE`` runs
its mix once.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as seeded
from hypothesis import strategies as st

from kai_conformance.fixtures import errors
from kai_conformance.suites.support.cases.chaos import ChaosMix
from kai_conformance.suites.support.chaos.mix import submixes
from kai_conformance.suites.support.chaos.run import Outcome

FORMAT = "kai-conformance/chaos-reproducer/v1"
#: Mixes a search may draw at most; the budget ends it long before on a cluster.
MAX_MIXES = 10_000
MAX_SHRINK_EXAMPLES = 500
#: Draws in a row the search passes over without running because a mix of the same description (its TrainJobs, GPUs,
#: endings and restarts; quotas and priorities aside) already ran. Hypothesis favours its simplest values, and on the
#: real controllers 5 of 13 mixes were one description; past this many a near-copy runs after all, so a strategy
#: with little else to draw still spends the budget.
MAX_NEAR_COPY_SKIPS = 100


class _Stop(Exception):
    """Ends a Hypothesis run from inside: a violation was found, or the budget is spent."""


class _StillViolates(Exception):
    """A smaller mix violated one of the invariants the original did: Hypothesis shrinks on."""


@dataclass
class Campaign:
    """The mixes of one chaos run. ``run`` runs a mix on the cluster (its attempt number is the count so far)."""

    run: Callable[[ChaosMix, int], Outcome]
    seed: int
    budget: float
    clock: Callable[[], float] = time.monotonic
    outcomes: list[Outcome] = field(default_factory=list)
    started: float = field(default=0.0)
    shrink_runs: int = 0
    near_copies_skipped: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()
        self._seen: dict[str, Outcome] = {}
        self._described: set[str] = set()
        self._skips_in_a_row = 0

    def near_copy(self, mix: ChaosMix) -> bool:
        """Whether the search passes ``mix`` over: its description already ran, and the search has not passed over
        :data:`MAX_NEAR_COPY_SKIPS` draws in a row."""
        described = mix.describe()
        if described in self._described and self._skips_in_a_row < MAX_NEAR_COPY_SKIPS:
            self._skips_in_a_row += 1
            self.near_copies_skipped += 1
            return True
        self._described.add(described)
        self._skips_in_a_row = 0
        return False

    def spent(self) -> bool:
        """Whether the budget is spent: no time left for another mix as long as the longest so far (a mix that starts
        runs to its end, so the run overran its budget by up to a mix before: seen on real kind)."""
        longest = max((o.seconds for o in self.outcomes), default=0.0)
        return self.clock() - self.started + longest >= self.budget

    def left(self) -> float:
        return max(self.budget - (self.clock() - self.started), 0.0)

    def attempt(self, mix: ChaosMix) -> Outcome:
        """Run ``mix`` once (or give what it gave before)."""
        key = json.dumps(_without_seed(mix.to_data()), sort_keys=True)
        if key not in self._seen:
            outcome = self.run(mix, len(self.outcomes) + 1)
            self.outcomes.append(outcome)
            self._seen[key] = outcome
        return self._seen[key]

    # ------------------------------------------------------------------------------------------------ search
    def search(self, strategy: st.SearchStrategy[ChaosMix]) -> Outcome | None:
        """Mixes from the seed until one violates an invariant or the budget is spent: the first violating one."""
        found: list[Outcome] = []

        @seeded(self.seed)
        @settings(max_examples=MAX_MIXES, phases=[Phase.generate], **_QUIET)
        @given(strategy)
        def explore(mix: ChaosMix) -> None:
            if found or self.spent():
                raise _Stop
            if self.near_copy(mix):
                return
            outcome = self.attempt(mix)
            if outcome.violated:
                found.append(outcome)
                raise _Stop

        with contextlib.suppress(_Stop):
            explore()
        return found[0] if found else None

    # ------------------------------------------------------------------------------------------------ shrink
    def shrink(self, violating: Outcome) -> Outcome:
        """The smallest sub-mix of ``violating``'s mix that still violates one of its invariants, within the budget
        left (the mix itself when nothing smaller did)."""
        target = set(violating.violations)
        best = [violating]

        @seeded(self.seed)
        @settings(max_examples=MAX_SHRINK_EXAMPLES, phases=[Phase.generate, Phase.shrink], **_QUIET)
        @given(submixes(violating.mix))
        def smaller(mix: ChaosMix) -> None:
            key = json.dumps(_without_seed(mix.to_data()), sort_keys=True)
            if key not in self._seen and (self.spent() or (violating.mix.workloads and not mix.workloads)):
                return  # out of budget; or restarts alone, which cannot break what a mix of workloads broke
            if key not in self._seen:
                self.shrink_runs += 1
            outcome = self.attempt(mix)
            if target & set(outcome.violations):
                if _size(mix) < _size(best[0].mix):
                    best[0] = outcome
                raise _StillViolates

        with contextlib.suppress(_StillViolates):
            smaller()
        return best[0]


_QUIET: dict[str, Any] = {
    "database": None,
    "deadline": None,
    "derandomize": False,
    "suppress_health_check": list(HealthCheck),
    "verbosity": Verbosity.quiet,
    "report_multiple_bugs": False,
}


def _size(mix: ChaosMix) -> tuple[int, int, int, int]:
    """Simpler first: fewer workloads, fewer pods, fewer fractional workloads (GPU sharing only where it matters),
    fewer restarts."""
    fractional = sum(1 for w in mix.workloads if w.fraction)
    return len(mix.workloads), sum(w.pods for w in mix.workloads), fractional, len(mix.faults)


def _without_seed(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("seed", "notes")}


# ------------------------------------------------------------------------------------------------ reproducer
def reproducer(outcome: Outcome, *, seed: int, versions: dict[str, str], original: Outcome | None) -> dict[str, Any]:
    """The reproducer of a violating outcome (module docstring); ``original``: the mix it was shrunk from."""
    return {
        "format": FORMAT,
        "seed": seed,
        "versions": versions,
        "replay": "pytest suites -m chaos --chaos-replay=<this file> (with the run's cluster options)",
        "violations": {name: v.explanation for name, v in outcome.violations.items()},
        "violated_at_seconds": outcome.violated_at,
        "mix": outcome.mix.to_data(),
        "restarts": [t.describe() for t in outcome.restarts],
        "timeline": outcome.excerpt,
        "diagnosis": outcome.diagnosis,
        "shrunk_from": None if original is None or original is outcome else {
            "workloads": len(original.mix.workloads), "faults": len(original.mix.faults),
            "describe": original.mix.describe(),
        },
    }  # fmt: skip


def write_reproducer(data: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"reproducer-{data['seed']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    return path


def load_reproducer(path: Path) -> tuple[ChaosMix, dict[str, Any]]:
    """The mix of a reproducer file and the file's data; a file that is not one is a usage error naming it."""
    try:
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(
                f"not a chaos reproducer (format {data.get('format') if isinstance(data, dict) else None!r}, expected {FORMAT})"
            )
        return ChaosMix.from_data(data["mix"]), data
    except (OSError, yaml.YAMLError, ValueError, KeyError, TypeError) as bad:
        raise errors.UsageError(f"--chaos-replay {path}: {bad}") from None
