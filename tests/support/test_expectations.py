"""The per-version expectation table: covers every supported version, fails clearly for unknown ones, and predicts
the PodGroup shapes the research documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.fixtures import matching
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.expectations import FlatMinMember, PodGroupShape, ReplicatedJob, UnknownVersion

CATALOG = Catalog.load()


@pytest.mark.parametrize("combo", CATALOG.combinations, ids=lambda c: c.name)
def test_every_supported_combination_has_rows(combo) -> None:
    expect = ex.expectations_for(combo)
    assert expect.kai.minor == ex.minor(combo.kai.version)
    assert expect.trainer.minor == ex.minor(combo.trainer.version)
    assert expect.jobset.minor == ex.minor(combo.jobset.version)
    assert expect.kai.name in expect.describe()
    assert expect.trainer.name in expect.describe()


def test_every_cataloged_component_version_has_a_row() -> None:
    for kind, lookup in (("kai", ex.kai_row), ("trainer", ex.trainer_row), ("jobset", ex.jobset_row)):
        for version in CATALOG.components[kind]:
            assert lookup(version).minor == ex.minor(version)


def test_the_table_covers_kai_v013_to_v017_and_both_trainer_minors() -> None:
    assert set(ex.KAI_ROWS) >= {"v0.13", "v0.14", "v0.15", "v0.16", "v0.17"}
    assert set(ex.TRAINER_ROWS) >= {"v2.2", "v2.3"}


@pytest.mark.parametrize(
    ("lookup", "version", "component"),
    [(ex.kai_row, "v0.18.0", "KAI"), (ex.trainer_row, "v2.9.1", "Trainer"), (ex.jobset_row, "v0.99.0", "JobSet")],
)
def test_an_unknown_version_fails_naming_the_known_rows_and_the_fix(lookup, version: str, component: str) -> None:
    with pytest.raises(UnknownVersion) as failure:
        lookup(version)
    message = str(failure.value)
    assert f"no {component} expectation row for {version}" in message
    assert "known:" in message
    assert "suites/support/expectations/__init__.py" in message


def test_minor_normalises_patch_and_prefix() -> None:
    assert ex.minor("v0.16.8") == "v0.16"
    assert ex.minor("0.17.0") == "v0.17"
    assert ex.minor("v2.3") == "v2.3"


def test_subgroup_rows_predict_root_parent_and_leaf_like_kai_e2e() -> None:
    row = ex.kai_row("v0.17.0")
    spec = row.podgroup_spec([ReplicatedJob("node", 4)])
    actual = {
        "minSubGroup": 1,
        "queue": "q",
        "subGroups": [{"name": "node", "minSubGroup": 1}, {"name": "node-replica-0", "parent": "node", "minMember": 4}],
    }
    assert matching.matches(spec, actual)
    assert not matching.matches(spec, {**actual, "minMember": 4}), "a root minMember must not appear with SubGroups"
    wrong_leaf = {
        **actual,
        "subGroups": [{"name": "node", "minSubGroup": 1}, {"name": "node-replica-0", "minMember": 1}],
    }
    assert not matching.matches(spec, wrong_leaf)


def test_two_replicated_jobs_give_one_podgroup_with_two_parent_subgroups() -> None:
    row = ex.kai_row("v0.16.8")
    jobs = [ReplicatedJob("node", 2), ReplicatedJob("aux", 1)]
    spec = row.podgroup_spec(jobs)
    assert spec["minSubGroup"] == 2  # AnyOrder: len(replicatedJobs)
    names = {sg["name"] for sg in spec["subGroups"].items}
    assert names == {"node", "node-replica-0", "aux", "aux-replica-0"}
    assert row.podgroup_spec(jobs, min_member=1)["minSubGroup"] == 1  # the annotation caps the root


@pytest.mark.parametrize(
    ("version", "without", "annotated"),
    [("v0.13.0", 5, 5), ("v0.14.7", 5, 3), ("v0.15.3", 1, 3)],
)
def test_flat_rows_size_the_gang_per_version(version: str, without: int, annotated: int) -> None:
    row = ex.kai_row(version)
    jobs = [ReplicatedJob("node", 4), ReplicatedJob("aux", 1)]
    assert row.podgroup_shape is PodGroupShape.FLAT
    assert row.podgroup_spec(jobs)["minMember"] == without
    assert row.podgroup_spec(jobs, min_member=3)["minMember"] == annotated
    assert row.subgroup_of("node") is None


def test_only_v015_needs_the_annotation_for_a_gang() -> None:
    assert ex.kai_row("v0.15.3").flat_min_member is FlatMinMember.ONE
    assert ex.kai_row("v0.15.3").gang_annotations(4) == {ex.MIN_MEMBER_ANNOTATION: "4"}
    for version in ("v0.13.0", "v0.14.7", "v0.16.8", "v0.17.0"):
        assert ex.kai_row(version).gang_annotations(4) == {}


def test_known_gaps_and_version_specific_behaviour() -> None:
    assert "#1209" in (ex.kai_row("v0.16.8").depends_on_gap or "")
    assert ex.trainer_row("v2.2.0").resources_per_node != ex.trainer_row("v2.3.0").resources_per_node


def test_label_arrival_table_names_only_known_levels_and_never_pods_for_trainjob_metadata() -> None:
    for levels in ex.ARRIVALS.values():
        assert levels <= set(ex.LEVELS)
    assert "Pod" not in ex.ARRIVALS["trainjob-metadata"]
    assert "PodGroup" in ex.ARRIVALS["trainjob-metadata"]
    assert set(ex.QUEUE_LABEL_PRECEDENCE) <= set(ex.ARRIVALS)


def test_docs_show_every_row() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "suites.md").read_text()
    for minor in [*ex.KAI_ROWS, *ex.TRAINER_ROWS, *ex.JOBSET_ROWS]:
        assert f"| {minor}" in text or f", {minor}" in text, f"docs/suites.md lacks the {minor} row"


def test_an_assumed_version_takes_the_rows_of_the_version_it_assumes_and_says_so() -> None:
    combo = CATALOG.resolve(None, kai="v0.18.1", jobset="v0.13.0")
    expect = ex.expectations_for(
        combo, "Kubernetes 1.38 is not in the expectation tables: expectations assumed from 1.35"
    )
    assert (expect.kai.minor, expect.jobset.minor) == ("v0.17", "v0.12")
    assert expect.consolidation == ex.expectations_for(CATALOG.combination("kai-v0.17.0+trainer-v2.3.0")).consolidation
    described = expect.describe()
    assert "[assumed: KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0]" in described
    assert "[assumed: JobSet v0.13.0 is not in the expectation tables" in described
    assert "[assumed: Kubernetes 1.38" in described
    assert "assumed" not in ex.expectations_for(CATALOG.combination("kai-v0.17.0+trainer-v2.3.0")).describe()
