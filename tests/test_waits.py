"""eventually/consistently: reaction time, readable failures, transient-error tolerance, one timeout policy."""

from __future__ import annotations

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
    assert time.monotonic() - started < 0.5


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
    assert time.monotonic() - started < 0.5


def test_consistently_holds_for_the_whole_hold() -> None:
    probe, calls = counter_probe(ok_after=0)
    started = time.monotonic()
    consistently(probe, what="no pod bound", hold=0.1, interval=0.01)
    assert time.monotonic() - started >= 0.1
    assert calls["n"] >= 5


def test_consistently_fails_on_the_first_violation_with_what_was_seen() -> None:
    seen = iter([Observation(True, "0 of 4 bound"), Observation(False, "gang violated: 2 of 4 bound (n1, n2)")])
    started = time.monotonic()
    with pytest.raises(ConditionViolated, match=r"no pod bound: violated after .* hold\nobserved: gang violated"):
        consistently(lambda: next(seen), what="no pod bound", hold=5, interval=0.01)
    assert time.monotonic() - started < 1


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
