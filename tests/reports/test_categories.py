"""Failure categories: Allure's regexes and the suite's own classification agree on every exception type the
suite raises, and product failures never land among infrastructure ones (or the other way round)."""

from __future__ import annotations

import inspect
import re
import subprocess

import pytest

from kai_conformance.fixtures import errors, waits
from kai_conformance.fixtures.plugin.recording import failure_kind
from kai_conformance.reports import categories


class InstallFailed(errors.InfrastructureError):
    """Stands for an infrastructure error type defined outside fixtures/errors.py (e.g. by provisioning)."""


def kube_error(cls: type[errors.KubeError]) -> errors.KubeError:
    return cls("apply Queue q", 0 if cls is errors.Unreachable else 500, "Reason", "details\nsecond line")


SUITE_ERRORS = [
    kube_error(cls)
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.KubeError)
] + [
    errors.WaitTimeout("KAI webhook to serve: not reached within 120s\nlast observed: 0/1 endpoints"),
    errors.InfrastructureError("kind create cluster failed"),
    errors.UsageError("unknown kai version 'v9'"),
    InstallFailed("helm install kai-scheduler failed"),
    subprocess.CalledProcessError(1, ["helm", "install"]),
    waits.ConditionNotMet("gang bound: not reached within 120s\nlast observed: 2 of 4 pods bound"),
    waits.ConditionViolated("no pod bound: violated after 3.1s of a 15s hold"),
    AssertionError("1 of 2 pods bound"),
    KeyError("spec"),
]  # fmt: skip

EXPECTED = {
    "Unreachable": "Infrastructure: cluster unreachable",
    "KindNotServed": "Infrastructure: component not installed (CRD not served)",
    "Forbidden": "Infrastructure: API request refused (RBAC or admission webhook)",
    "Invalid": "Infrastructure: object rejected by API validation",
    "ServerError": "Infrastructure: API server or webhook error (5xx)",
    "NotFound": "Infrastructure: other API errors",
    "Conflict": "Infrastructure: other API errors",
    "Gone": "Infrastructure: other API errors",
    "ForeignObject": "Infrastructure: other API errors",
    "KubeError": "Infrastructure: other API errors",
    "WaitTimeout": "Infrastructure: wait for cluster, install or cleanup timed out",
    "ComponentDown": "Infrastructure: a component of the stack is down or cannot act",
    "InfrastructureError": "Infrastructure: cluster or install failure",
    "InstallFailed": "Infrastructure: cluster or install failure",
    "CalledProcessError": "Infrastructure: cluster or install failure",
    "UsageError": "Usage: a setting the operator can fix",
    "ConditionNotMet": "Product: expected state never reached",
    "ConditionViolated": "Product: forbidden state observed",
    "AssertionError": "Product: detector verdicts and other assertions",
    "KeyError": "Infrastructure: unexpected error in the suite",
}


def allure_view(exc: BaseException) -> tuple[str, str]:
    """(status, message) as allure-pytest records them: failed for assertions, else broken; exconly()."""
    try:
        raise exc
    except BaseException:
        info = pytest.ExceptionInfo.from_current()
    status = "failed" if isinstance(exc, (AssertionError, pytest.fail.Exception)) else "broken"
    return status, info.exconly()


@pytest.mark.parametrize("exc", SUITE_ERRORS, ids=lambda e: type(e).__name__)
def test_allure_and_the_reports_put_each_error_in_the_same_category(exc: BaseException) -> None:
    category = categories.classify(exc)
    assert category.name == EXPECTED[type(exc).__name__]
    assert categories.match(*allure_view(exc)) is category


@pytest.mark.parametrize("exc", SUITE_ERRORS, ids=lambda e: type(e).__name__)
def test_the_category_kind_is_the_recorded_failure_kind(exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        kind = failure_kind(pytest.ExceptionInfo.from_current())
    assert categories.classify(exc).kind == kind


def test_every_error_type_of_the_suite_has_a_category_of_its_own() -> None:
    catch_all = categories.BY_NAME["Infrastructure: unexpected error in the suite"]
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, Exception) and cls.__module__ == errors.__name__:
            exc = kube_error(cls) if issubclass(cls, errors.KubeError) else cls("x")
            assert categories.classify(exc) is not catch_all, cls


def test_pytest_fail_is_a_product_failure() -> None:
    with pytest.raises(pytest.fail.Exception) as info:
        pytest.fail("queue q-a got the TrainJob meant for q-b")
    assert categories.classify(info.value).kind == categories.PRODUCT
    assert categories.match(*allure_view(info.value)).kind == categories.PRODUCT


def test_xfailed_results_are_known_deviations_and_skips_are_not() -> None:
    known = categories.match("skipped", "XFAIL Trainer drops labels\n\nAssertionError: team missing")
    assert known is not None and known.kind == categories.KNOWN_DEVIATION
    assert categories.match("skipped", "Skipped: needs 16 GPUs") is None


def test_regexes_mean_the_same_in_java_javascript_and_python() -> None:
    """No inline flags (JavaScript has none), no lookbehind; Allure 2 matches the whole message."""
    for entry in categories.allure_categories():
        regex = entry.get("messageRegex")
        if regex is None:
            continue
        assert not re.search(r"\(\?[^:]", regex), entry["name"]
        re.compile(regex)
        assert set(entry["matchedStatuses"]) <= {"failed", "broken", "skipped"}


def test_a_message_that_only_mentions_an_error_is_not_that_error() -> None:
    """Allure matches whole messages: an assertion quoting 'Unreachable' stays a product failure."""
    assert categories.match("failed", "AssertionError: node Unreachable taint missing").kind == categories.PRODUCT
    category = categories.match("broken", "RuntimeError: last seen fixtures.errors.Unreachable")
    assert category.name == "Infrastructure: unexpected error in the suite"
