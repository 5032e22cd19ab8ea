"""Every failing check of a suite file goes through here (or through a wait): a detector's verdict that must hold, a
control's detector that must fire, a value the case cannot go on without. A failure says what was expected and the
verdict's own explanation and, with an observer, carries the chain diagnosis of the workloads it is about
(:mod:`suites.support.diagnosis`): which link of TrainJob → … → bound pods broke. A bare ``assert`` in ``suites/``
has no such line; the self-tests refuse one (tests/repository/test_suite_style.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from kai_conformance.suites.support.detectors.verdict import Verdict

if TYPE_CHECKING:  # observe.py's workloads confirm through here
    from kai_conformance.suites.support.observe import About, Observer

T = TypeVar("T")


def _failed(message: str, observer: Observer | None, about: About | None) -> BaseException:
    failure = AssertionError(message)
    return failure if observer is None else observer.explain(failure, about)


def confirm(verdict: Verdict, message: str, *, observer: Observer | None = None, about: About | None = None) -> None:
    """``verdict`` must hold: else ``AssertionError("<message>: <verdict>")`` with the chain diagnosis of ``about``
    (default: every workload the observer was asked about)."""
    if not verdict.ok:
        raise _failed(f"{message}: {verdict}", observer, about)


def confirm_fired(verdict: Verdict, message: str, *, naming: Sequence[str] = (), observer: Observer | None = None,
                  about: About | None = None) -> None:  # fmt: skip
    """A control: the detector of ``verdict`` must fire, its explanation naming each of ``naming`` (the thing it must
    point at); else ``AssertionError("<message>: <verdict>")``, diagnosed as :func:`confirm` does."""
    if verdict.ok:
        raise _failed(f"{message}: the detector held: {verdict}", observer, about)
    missing = [name for name in naming if name not in verdict.explanation]
    if missing:
        raise _failed(f"{message}: the detector fired without naming {', '.join(missing)}: {verdict}", observer, about)


def present(value: T | None, message: str, *, observer: Observer | None = None, about: About | None = None) -> T:
    """``value``, which the case cannot go on without (a PodGroup a wait found, say); else ``AssertionError(message)``,
    diagnosed as :func:`confirm` does."""
    if value is None:
        raise _failed(message, observer, about)
    return value
