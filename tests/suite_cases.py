"""Every case the suites parametrize, found without running pytest's collection (cheap, deterministic)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

SUITE_MODULES = (
    "test_gang", "test_queues", "test_labels", "test_preemption", "test_podgrouper", "test_podgroup_api", "test_elastic", "test_placement",
    "test_topology", "test_sharing", "test_fairness", "test_consolidation", "test_lifecycle", "test_lifecycle_terminal",
    "test_scale", "test_runtimes", "test_chaos", "test_ai_conformance",
)  # fmt: skip


@dataclass(frozen=True)
class SuiteCase:
    test: str  # ``test_gang.py::test_x[id]``
    case: Any
    marks: frozenset[str]


def _marks_of(obj: Any) -> set[str]:
    marks = getattr(obj, "pytestmark", [])
    return {m.name for m in (marks if isinstance(marks, list) else [marks])}


def suite_cases() -> list[SuiteCase]:
    """Each parametrize value with ``manifests(ctx)`` (the render contract), with the marks it runs under."""
    found = []
    for module_name in SUITE_MODULES:
        module = importlib.import_module(f"suites.{module_name}")
        module_marks = _marks_of(module)
        for name, function in vars(module).items():
            if not name.startswith("test_") or not callable(function):
                continue
            function_marks = _marks_of(function) - {"parametrize"}
            for mark in getattr(function, "pytestmark", []):
                if mark.name != "parametrize":
                    continue
                for value in mark.args[1]:
                    values, param_marks, param_id = (
                        (value.values, {m.name for m in value.marks}, value.id)
                        if hasattr(value, "marks") and hasattr(value, "values")
                        else ((value,), set(), None)
                    )
                    for item in values:
                        if hasattr(item, "manifests"):
                            marks = frozenset(module_marks | function_marks | param_marks)
                            found.append(SuiteCase(f"{module_name}.py::{name}[{param_id}]", item, marks))
    return found
