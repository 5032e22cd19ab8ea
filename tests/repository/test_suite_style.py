"""No bare ``assert`` in ``suites/``: every failing check of a suite goes through a named detector's confirmation or
a wait with a diagnosis (suites/support/confirm.py, suites/support/observe.py), so every failure carries the broken
link, never a bare assertion with no "why" line. The rule is shown to find one, in a file made up for it."""

from __future__ import annotations

import ast
from pathlib import Path

SUITES = Path(__file__).resolve().parents[2] / "suites"


def bare_asserts(source: str, name: str) -> list[str]:
    """``file:line: assert <condition>`` for each ``assert`` statement of ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Assert):
            found.append(f"{name}:{node.lineno}: assert {ast.unparse(node.test)}")
    return found


def test_no_suite_file_has_a_bare_assert() -> None:
    files = sorted(SUITES.rglob("*.py"))
    assert len(files) > 20  # the suites are where this test thinks they are
    found = [line for path in files for line in bare_asserts(path.read_text(), str(path.relative_to(SUITES.parent)))]
    assert not found, (
        "a bare assert in suites/ fails without naming the broken link; use confirm / confirm_fired / present "
        "(suites/support/confirm.py) or a workload's confirm, until or holds:\n  " + "\n  ".join(found)
    )


def test_the_rule_finds_a_bare_assert_on_cluster_state() -> None:
    made_up = (
        "def test_x(snap):\n    verdict = check(snap)\n    assert verdict.ok, 'no why'\n    confirm(verdict, 'x')\n"
    )
    assert bare_asserts(made_up, "suites/test_made_up.py") == ["suites/test_made_up.py:3: assert verdict.ok"]
    assert bare_asserts("def test_x(snap):\n    confirm(check(snap), 'x')\n", "suites/test_fine.py") == []
