"""eventually/consistently: reaction time, readable failures, transient-error tolerance, one timeout policy."""

from __future__ import annotations

import dataclasses
import time

import pytest

from kai_conformance.fixtures import errors, waits
from kai_conformance.fixtures.waits import (
    ConditionNotMet,
    ConditionViolated,
    Observation,
    TimeoutPolicy,
    consistently,
    eventually,
    eventually_while_shrinking,
)


def counter_probe(ok_after: int):
    calls = {"n": 0}

    def probe() -> Observation:
        calls["n"] += 1
        done = calls["n"] > ok_after
        return Observation(done, f"{calls['n']} look(s)", {"bound": 4}, {"bound": 4 if done else 2})

    return probe, calls


def test_eventually_returns_as_soon_as_the_state_holds() -> None:
    probe, calls = counter_probe(ok_after=2)
    started = time.monotonic()
    observation = eventually(probe, what="gang bound", timeout=5, interval=0.01)
    assert observation.ok and calls["n"] == 3
    assert time.monotonic() - started < 2.5  # half the budget: a busy machine stalls polls, it does not wait 5 s


def test_a_budget_spent_before_the_first_look_still_gets_its_looks() -> None:
    """A machine too busy to look within the budget (here: a budget of 0 s) looks MIN_PROBES times before giving up,
    so a state that arrives on the cluster's own events (the fakes' "Established after two API calls") is seen."""
    assert waits.MIN_PROBES == 3
    probe, calls = counter_probe(ok_after=2)
    assert eventually(probe, what="CRDs Established", timeout=0, interval=0.001).ok and calls["n"] == 3
    late, looks = counter_probe(ok_after=3)
    with pytest.raises(ConditionNotMet, match="not reached within 0s"):
        eventually(late, what="CRDs Established", timeout=0, interval=0.001)
    assert looks["n"] == 3
    steady, held = counter_probe(ok_after=0)
    assert consistently(steady, what="nothing bound", hold=0, interval=0.001).last.ok and held["n"] == 3


def test_eventually_timeout_carries_the_last_observation_and_a_diff() -> None:
    probe, _ = counter_probe(ok_after=10_000)
    with pytest.raises(ConditionNotMet) as failure:
        eventually(probe, what="all 4 pods bound", timeout=0.05, interval=0.01)
    text = str(failure.value)
    assert text.startswith("all 4 pods bound: not reached within 0s")
    assert "last observed:" in text
    assert "-bound: 4" in text and "+bound: 2" in text
    assert isinstance(failure.value, AssertionError)  # a product failure, not an infrastructure one


def test_eventually_can_report_an_infrastructure_timeout() -> None:
    with pytest.raises(errors.WaitTimeout, match="webhook serving: not reached"):
        eventually(lambda: Observation(False, "connection refused"), what="webhook serving", timeout=0.03,
                   interval=0.01, failure=errors.WaitTimeout)  # fmt: skip


def test_transient_api_errors_are_retried_and_reported() -> None:
    attempts = {"n": 0}

    def flaky() -> Observation:
        attempts["n"] += 1
        if attempts["n"] < 3:
            raise errors.ServerError("list pods", 503, "ServiceUnavailable", "etcd leader changed")
        return Observation(True, "ok")

    assert eventually(flaky, what="pods", timeout=2, interval=0.01).ok
    with pytest.raises(ConditionNotMet, match=r"last API error \(retried\).*etcd leader changed"):
        eventually(
            lambda: (_ for _ in ()).throw(errors.Unreachable("list", 0, "Unreachable", "etcd leader changed")),
            what="pods", timeout=0.03, interval=0.01,
        )  # fmt: skip


def test_non_transient_errors_propagate_at_once() -> None:
    def forbidden() -> Observation:
        raise errors.Forbidden("list pods", 403, "Forbidden", "no RBAC")

    started = time.monotonic()
    with pytest.raises(errors.Forbidden):
        eventually(forbidden, what="pods", timeout=5, interval=0.01)
    assert time.monotonic() - started < 2.5  # half the budget it did not wait out


def test_consistently_holds_for_the_whole_hold() -> None:
    probe, calls = counter_probe(ok_after=0)
    started = time.monotonic()
    consistently(probe, what="no pod bound", hold=0.1, interval=0.01)
    assert time.monotonic() - started >= 0.1
    assert calls["n"] >= waits.MIN_PROBES  # how many more looks fit in 0.1 s is the machine's speed


def test_consistently_fails_on_the_first_violation_with_what_was_seen() -> None:
    seen = iter([Observation(True, "0 of 4 bound"), Observation(False, "gang violated: 2 of 4 bound (n1, n2)")])
    started = time.monotonic()
    with pytest.raises(ConditionViolated, match=r"no pod bound: violated after .* hold\nobserved: gang violated"):
        consistently(lambda: next(seen), what="no pod bound", hold=5, interval=0.01)
    assert time.monotonic() - started < 2.5  # half the hold it did not sit out


def test_consistently_refuses_a_hold_with_no_observation() -> None:
    def down() -> Observation:
        raise errors.Unreachable("list", 0, "Unreachable", "connection refused")

    with pytest.raises(ConditionViolated, match="could not observe the cluster"):
        consistently(down, what="no pod bound", hold=0.05, interval=0.01)


def test_timeout_policy_scales_every_budget_and_the_hold() -> None:
    policy = TimeoutPolicy(scale=2)
    assert policy("schedule") == 2 * waits.BUDGETS["schedule"]
    assert TimeoutPolicy().hold == waits.HOLD_PERIODS * waits.KAI_SCHEDULE_PERIOD + waits.HOLD_MARGIN == 15
    assert policy.hold == 30
    with pytest.raises(errors.UsageError, match="unknown timeout budget"):
        policy("forever")
    with pytest.raises(errors.UsageError, match="positive"):
        TimeoutPolicy(scale=0)


def test_long_waits_report_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(waits, "PROGRESS_EVERY", 0.02)
    monkeypatch.setattr(waits.progress, "_sink", lines.append)
    probe, _ = counter_probe(ok_after=8)
    eventually(probe, what="gang bound", timeout=5, interval=0.01)
    assert lines and lines[0].startswith("waiting ") and "for gang bound:" in lines[0]


# ------------------------------------------------------------------------- holds that end on refusals
def refusing_probe(step: int = 1, violate_at: int | None = None):
    """Every look sees the scheduler's refusals ``step`` higher; look ``violate_at`` sees the workload placed."""
    looks = {"n": 0}

    def probe() -> Observation:
        looks["n"] += 1
        ok = violate_at is None or looks["n"] < violate_at
        return Observation(
            ok, "0 of 4 bound" if ok else "gang violated: 2 of 4 bound", refusals=100 + step * looks["n"]
        )

    return probe, looks


RULE = waits.RefusalRule(needed=3, minimum=0.05, margin=0.02)


def test_a_hold_ends_once_the_scheduler_refused_the_workload_often_enough() -> None:
    probe, looks = refusing_probe()
    started = time.monotonic()
    held = consistently(probe, what="no pod bound", hold=5, interval=0.005, refusals=RULE)
    assert looks["n"] >= 4, "the check was judged on every poll until the end"
    elapsed = time.monotonic() - started
    assert held.early and held.counted >= 3 and held.last.ok
    assert RULE.minimum <= elapsed < 2.5, "ended after its minimum, long before the 5 s wall time"
    assert held.account().startswith("held 0.")
    assert "of 5.0s: ended after the scheduler refused the workload" in held.account()


def test_a_hold_never_ends_before_its_minimum_even_when_the_count_jumps() -> None:
    probe, _ = refusing_probe(step=50)  # a count that jumps (the recorder sent held-back repeats at once)
    started = time.monotonic()
    held = consistently(
        probe, what="no pod bound", hold=5, interval=0.005, refusals=dataclasses.replace(RULE, minimum=0.3)
    )
    assert held.early
    assert time.monotonic() - started >= 0.3


def test_a_hold_waits_its_margin_after_the_last_refusal_it_needs() -> None:
    started = time.monotonic()

    def probe() -> Observation:  # the third refusal arrives 0.1 s into the hold
        return Observation(True, "0 of 4 bound", refusals=3 if time.monotonic() - started >= 0.1 else 0)

    rule = waits.RefusalRule(needed=3, minimum=0.0, margin=0.15)
    held = consistently(probe, what="no pod bound", hold=5, interval=0.005, refusals=rule)
    assert held.early and held.counted == 3
    assert time.monotonic() - started >= 0.25


def test_a_hold_whose_refusals_do_not_advance_lasts_its_wall_time_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(waits.progress, "_sink", lines.append)
    probe, _ = refusing_probe(step=0)  # the count stalls (throttled or dropped events)
    started = time.monotonic()
    held = consistently(probe, what="no pod bound", hold=0.1, interval=0.005, refusals=RULE)
    assert time.monotonic() - started >= 0.1
    assert not held.early and held.counted == 0
    assert held.account() == (
        "held the full 0.1s: the scheduler's refusals did not reach 3 (0 counted), so the wall-clock hold applied"
    )
    assert lines == [f"no pod bound: {held.account()}"]


def test_a_probe_that_counts_no_refusals_keeps_the_wall_time() -> None:
    probe, _ = counter_probe(ok_after=0)
    started = time.monotonic()
    held = consistently(probe, what="no pod bound", hold=0.08, interval=0.005, refusals=RULE)
    assert time.monotonic() - started >= 0.08
    assert not held.early and held.counted is None
    assert "(none counted)" in held.account()
    assert consistently(probe, what="no pod bound", hold=0.01, interval=0.005).account() == "held the full 0.0s"


def test_a_violation_during_a_shortened_hold_is_still_caught() -> None:
    probe, looks = refusing_probe(violate_at=6)  # refused 5 times (enough), then placed before the hold may end
    rule = waits.RefusalRule(needed=3, minimum=0.5, margin=0.02)
    with pytest.raises(ConditionViolated, match=r"no pod bound: violated after .*\nobserved: gang violated"):
        consistently(probe, what="no pod bound", hold=5, interval=0.005, refusals=rule)
    assert looks["n"] == 6


def test_timeout_policy_scales_the_refusal_rule() -> None:
    assert TimeoutPolicy().refusals == waits.RefusalRule(needed=3, minimum=5.0, margin=2.0)
    assert TimeoutPolicy(scale=2).refusals == waits.RefusalRule(needed=3, minimum=10.0, margin=4.0)
    assert TimeoutPolicy().refusals.minimum < TimeoutPolicy().hold


@pytest.mark.usefixtures("fast_polling")  # the stalled round's one look is followed by a poll interval
def test_a_removal_that_keeps_shrinking_outlasts_its_budget_and_a_stalled_one_fails() -> None:
    left = [5]

    def shrinking() -> Observation:
        left[0] = max(0, left[0] - 1)  # one goes per look: slower than one 10 ms budget, never stalled
        time.sleep(0.02)
        return Observation(left[0] == 0, f"{left[0]} left")

    done = eventually_while_shrinking(shrinking, lambda: left[0], what="removal", timeout=0.01)
    assert done.ok and left == [0]

    stuck = [3]
    with pytest.raises(ConditionNotMet, match=r"removal: not reached within"):
        eventually_while_shrinking(lambda: Observation(False, "3 left"), lambda: stuck[0], what="removal", timeout=0.01)
