"""Partial-object matching: only named keys count, lists are exact unless Contains, ABSENT and predicates work."""

from __future__ import annotations

from kai_conformance.fixtures.matching import ABSENT, Contains, diff, matches, mismatches, predicate
from kai_conformance.fixtures.waits import observe_match

PODGROUP = {
    "metadata": {"name": "pg-job-1", "ownerReferences": [{"kind": "JobSet", "name": "job"}], "labels": {"a": "1"}},
    "spec": {"minSubGroup": 1, "queue": "q", "subGroups": [{"name": "node"}, {"name": "node-replica-0"}]},
}


def test_partial_match_ignores_unnamed_keys() -> None:
    assert matches({"spec": {"queue": "q"}}, PODGROUP)
    assert not matches({"spec": {"queue": "other"}}, PODGROUP)


def test_mismatch_paths_name_the_field() -> None:
    found = mismatches({"spec": {"queue": "other", "minMember": 2}}, PODGROUP)
    assert [str(m) for m in found] == [
        "spec.queue: expected 'other', got 'q'",
        "spec.minMember: expected 2, got <missing>",
    ]


def test_lists_are_exact_unless_contains() -> None:
    assert not matches({"spec": {"subGroups": [{"name": "node"}]}}, PODGROUP)
    assert matches({"spec": {"subGroups": Contains({"name": "node-replica-0"})}}, PODGROUP)
    assert not matches({"spec": {"subGroups": Contains({"name": "aux"})}}, PODGROUP)
    assert not matches({"spec": {"subGroups": Contains({"name": "node"}, {"name": "node"})}}, PODGROUP)


def test_absent_and_predicates() -> None:
    assert matches({"spec": {"minMember": ABSENT}}, PODGROUP)
    assert not matches({"spec": {"queue": ABSENT}}, PODGROUP)

    @predicate("at least one subgroup")
    def some(value: list) -> bool:
        return len(value) > 0

    assert matches({"spec": {"subGroups": some}}, PODGROUP)
    assert "at least one subgroup" in str(mismatches({"spec": {"queue": some}}, {"spec": {"queue": []}})[0])


def test_diff_shows_only_asserted_fields() -> None:
    text = diff({"spec": {"queue": "other"}}, PODGROUP)
    assert "-  queue: other" in text and "+  queue: q" in text
    assert "subGroups" not in text


def test_observe_match_reports_missing_objects_and_mismatches() -> None:
    assert not observe_match({"spec": {}}, None, "PodGroup pg").ok
    seen = observe_match({"spec": {"queue": "other"}}, PODGROUP, "PodGroup pg")
    assert seen.summary == "PodGroup pg: spec.queue: expected 'other', got 'q'"
    assert "+  queue: q" in seen.account()
