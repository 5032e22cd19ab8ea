"""The checks suite files make instead of bare asserts (suites/support/confirm.py): each fails on a violating case
with the message, the verdict's own explanation and, with an observer, the chain diagnosis it carries."""

from __future__ import annotations

import pytest

from kai_conformance.suites.support.confirm import confirm, confirm_fired, present
from kai_conformance.suites.support.detectors.verdict import Verdict

HELD = Verdict("podgroup-queue", True, "PodGroup pg-a spec.queue = 'q1'")
FIRED = Verdict("podgroup-queue", False, "PodGroup pg-a spec.queue = 'q1', expected 'q2'")


class DiagnosingObserver:
    """What an Observer's ``explain`` does, reduced to its effect: the chain diagnosis appended."""

    def __init__(self) -> None:
        self.asked: list = []

    def explain(self, failure: BaseException, about=None) -> BaseException:
        self.asked.append(about)
        return AssertionError(f"{failure}\ndiagnosis of TrainJob a: broken link: KAI podgrouper")


def test_confirm_passes_a_held_verdict_and_fails_a_violated_one_naming_both() -> None:
    confirm(HELD, "the PodGroup is in its queue")
    with pytest.raises(AssertionError) as failure:
        confirm(FIRED, "the PodGroup is not in the queue its TrainJob names, q2")
    assert str(failure.value) == f"the PodGroup is not in the queue its TrainJob names, q2: {FIRED}"


def test_a_failure_with_an_observer_carries_the_chain_diagnosis() -> None:
    observer = DiagnosingObserver()
    with pytest.raises(AssertionError, match=r"(?s)names, q2: \[podgroup-queue\].*broken link: KAI podgrouper"):
        confirm(FIRED, "names, q2", observer=observer, about=[("a", 1)])  # type: ignore[arg-type]
    assert observer.asked == [[("a", 1)]]


def test_confirm_fired_fails_when_the_detector_held_or_fired_without_naming_what_it_must() -> None:
    confirm_fired(FIRED, "the queue detector fires", naming=["q1"])
    with pytest.raises(AssertionError, match=r"the queue detector did not fire: the detector held: \[podgroup-queue\]"):
        confirm_fired(HELD, "the queue detector did not fire")
    with pytest.raises(AssertionError, match=r"fired without naming q3: \[podgroup-queue\] VIOLATED"):
        confirm_fired(FIRED, "the queue detector", naming=["q1", "q3"])


def test_present_gives_the_value_or_fails_naming_what_is_missing() -> None:
    assert present({"kind": "PodGroup"}, "no PodGroup") == {"kind": "PodGroup"}
    with pytest.raises(AssertionError, match=r"^the newcomer has no PodGroup$"):
        present(None, "the newcomer has no PodGroup")
