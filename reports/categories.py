"""Failure categories: one table, used both for Allure's ``categories.json`` and for the suite's own reports.

Allure sorts a failed test into the first category whose status and message regex match; the status already
separates the two kinds of failure (allure-pytest reports an ``AssertionError`` or ``pytest.fail()`` as
*failed*, anything else as *broken*), which is the suite's taxonomy (``fixtures/errors.py``): failed = product, broken = infrastructure.
Within each kind the categories name the exception types the suite raises. The message Allure matches is
pytest's ``ExceptionInfo.exconly()``, i.e. ``"<module>.<Type>: <message>"``.

The suite's own reports classify the live exception with ``isinstance`` (:func:`classify`), so subclasses
defined anywhere land in their family; the self-tests check that both ways agree for every type in
``fixtures.errors`` and ``fixtures.waits``.

Regexes use ``[\\s\\S]`` rather than flags: Allure 2 (Java) requires a whole-message match and Allure 3
(JavaScript) has no inline ``(?s)``; ``[\\s\\S]*`` means the same in both, and in Python's ``re.fullmatch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from kai_conformance.fixtures import errors, waits

PRODUCT = "product"
INFRASTRUCTURE = "infrastructure"
KNOWN_DEVIATION = "known-deviation"


@dataclass(frozen=True)
class Category:
    name: str
    kind: str  # product | infrastructure | known-deviation
    statuses: tuple[str, ...]
    types: tuple[type[BaseException], ...] = ()  # the exception types (and subclasses) of this category
    #: Exception types defined in these top-level packages also belong here (the suite's own infrastructure
    #: layers, and the subprocess errors of the CLIs they run).
    modules: tuple[str, ...] = ()
    message_regex: str | None = None  # overrides the regex derived from ``types`` and ``modules``
    hint: str = ""  # what a reader should do about it

    @property
    def regex(self) -> str | None:
        if self.message_regex is not None:
            return self.message_regex
        alternatives = []
        if self.types:
            names = "|".join(sorted({t.__name__ for t in _family(self.types)}))
            # "<module>.<Type>: message", "<Type>: message" or just "<Type>" (no message)
            alternatives.append(rf"(?:[\w.]+\.)?(?:{names})(?::[\s\S]*)?")
        if self.modules:
            alternatives.append(rf"(?:{'|'.join(self.modules)})\.[\w.]+(?::[\s\S]*)?")
        return "|".join(alternatives) or None

    def holds(self, exc: BaseException) -> bool:
        if not self.types and not self.modules:
            return True
        module = type(exc).__module__.split(".", 1)[0]
        return isinstance(exc, self.types) or module in self.modules

    def to_allure(self) -> dict:
        entry: dict = {"name": self.name, "matchedStatuses": list(self.statuses)}
        if self.regex is not None:
            entry["messageRegex"] = self.regex
        return entry


CATEGORIES: tuple[Category, ...] = (
    Category(
        "Product: expected state never reached",
        PRODUCT,
        ("failed",),
        (waits.ConditionNotMet,),
        hint="the system under test did not do what the case expects within the wait; see the last observation",
    ),
    Category(
        "Product: forbidden state observed",
        PRODUCT,
        ("failed",),
        (waits.ConditionViolated,),
        hint="something that must never happen (e.g. part of a gang bound) happened during the hold",
    ),
    Category(
        "Product: detector verdicts and other assertions",
        PRODUCT,
        ("failed",),
        hint="a detector or assertion found the system under test misbehaving; see its explanation",
    ),
    Category(
        "Infrastructure: cluster unreachable",
        INFRASTRUCTURE,
        ("broken",),
        (errors.Unreachable,),
        hint="the API server did not answer: is the cluster up and the kubeconfig right?",
    ),
    Category(
        "Infrastructure: component not installed (CRD not served)",
        INFRASTRUCTURE,
        ("broken",),
        (errors.KindNotServed,),
        hint="a CRD the case needs is missing: check the install of KAI, JobSet and Trainer",
    ),
    Category(
        "Infrastructure: a component of the stack is down or cannot act",
        INFRASTRUCTURE,
        ("broken",),
        (errors.ComponentDown,),
        hint="a wait failed because a controller did not act (the chain diagnosis names it and what it left undone): "
        "fix the install, then run again",
    ),
    Category(
        "Infrastructure: wait for cluster, install or cleanup timed out",
        INFRASTRUCTURE,
        ("broken",),
        (errors.WaitTimeout,),
        hint="a component did not become ready or an object did not go away in time; see the last observation",
    ),
    Category(
        "Infrastructure: API request refused (RBAC or admission webhook)",
        INFRASTRUCTURE,
        ("broken",),
        (errors.Forbidden,),
        hint="the credentials lack a permission, or a webhook denied the request: the message names which",
    ),
    Category(
        "Infrastructure: object rejected by API validation",
        INFRASTRUCTURE,
        ("broken",),
        (errors.Invalid,),
        hint="the object does not fit the installed CRD schema: a version mismatch or a suite bug",
    ),
    Category(
        "Infrastructure: API server or webhook error (5xx)",
        INFRASTRUCTURE,
        ("broken",),
        (errors.ServerError,),
        hint="the API server or a webhook behind it failed; often transient right after an install",
    ),
    Category(
        "Infrastructure: other API errors",
        INFRASTRUCTURE,
        ("broken",),
        (errors.KubeError,),
        hint="an API call failed (not found, conflict, refused foreign object); the message names the call",
    ),
    Category(
        "Usage: a setting the operator can fix",
        INFRASTRUCTURE,
        ("broken",),
        (errors.UsageError,),
        hint="the message names the option or file to fix",
    ),
    Category(
        "Infrastructure: cluster or install failure",
        INFRASTRUCTURE,
        ("broken",),
        (errors.InfrastructureError,),
        modules=("clusters", "fixtures", "subprocess"),
        hint="provisioning, installing or cleaning up failed; the message says which step",
    ),
    Category(
        "Infrastructure: unexpected error in the suite",
        INFRASTRUCTURE,
        ("broken",),
        hint="an exception outside the suite's taxonomy: likely a bug in the suite; see the traceback",
    ),
    Category(
        "Known deviations (xfail)",
        KNOWN_DEVIATION,
        ("skipped",),
        message_regex=r"XFAIL[\s\S]*",
        hint="an expected, documented deviation of this version combination",
    ),
)

BY_NAME = {category.name: category for category in CATEGORIES}


def _family(types: tuple[type[BaseException], ...]) -> list[type[BaseException]]:
    """The types and every subclass imported so far."""
    found, pending = [], list(types)
    while pending:
        current = pending.pop()
        if current not in found:
            found.append(current)
            pending.extend(current.__subclasses__())
    return found


def allure_categories() -> list[dict]:
    return [category.to_allure() for category in CATEGORIES]


def classify(exc: BaseException) -> Category:
    """The category of a live exception (first match in table order, like Allure)."""
    status = "failed" if isinstance(exc, (AssertionError, pytest.fail.Exception)) else "broken"
    for category in CATEGORIES:
        if status not in category.statuses:
            continue
        if category.holds(exc):
            return category
    raise AssertionError(f"no catch-all category for status {status}")  # pragma: no cover - table invariant


def match(status: str, message: str | None) -> Category | None:
    """What Allure does with ``categories.json``: the first category matching the status and message."""
    for category in CATEGORIES:
        if status not in category.statuses:
            continue
        regex = category.regex
        if regex is None or (message is not None and re.fullmatch(regex, message)):
            return category
    return None


def from_message(kind: str, exception_line: str) -> Category | None:
    """Best effort for records without a stored category: match the exception line of the traceback."""
    if kind not in (PRODUCT, INFRASTRUCTURE):
        return None
    return match("failed" if kind == PRODUCT else "broken", exception_line)
