"""The known-bugs table (suites/support/known_bugs.py) and the read builds (clusters/builds.py): which versions have
each bug, how a build resolves to rows and CRD schemas, and that every case it names is collected."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.suites.support.expectations import expectations_for
from kai_conformance.suites.support.known_bugs import BY_KEY, KNOWN_BUGS, gap
from tests import crd_schemas
from tests.fakes.crd_bounds import ROOT_MINIMUM, SUBGROUP_MINIMUM
from tests.suite_cases import suite_cases

CATALOG = Catalog.load()


@pytest.mark.parametrize(
    ("key", "version", "has_it"),
    [
        ("KAI #1968", "v0.16.1", False), ("KAI #1968", "v0.16.8", True), ("KAI #1968", "v0.16.9", True),
        ("KAI #1968", "v0.17.0", True), ("KAI #1968", "v0.17.1", False), ("KAI #1968", "main", False),
        ("KAI #1968", "v0.17", False), ("KAI #1888", "v0.16.8", True), ("KAI #1888", "v0.17.0", False),
        ("KAI #1888", "v0.15.2", None), ("KAI #1944", "v0.16.8", True), ("KAI #1944", "v0.16.9", False),
        ("KAI #1944", "v0.17.0", True), ("KAI #1944", "main", False), ("KAI PR #2096", "v0.17.1", True),
        ("KAI PR #2096", "v0.17.2", False), ("KAI PR #2096", "main", True), ("KAI PR #2096", "pr-42", False),
        ("KAI #1209", "main", True), ("KAI #1209", "pr-42", True), ("KAI #1209", "v0.15.2", False),
        ("KAI #1448", "v0.14.0", True), ("KAI #1448", "v0.14.1", False), ("KAI #1448", "v0.17.0", False),
        ("Trainer #3779", "v2.3.0", True), ("Trainer #3779", "master", False), ("Trainer #3737", "v2.2.0", True),
        ("Trainer #3737", "master", False), ("Trainer #3008", "v2.3.0", None), ("Trainer #3008", "master", None),
    ],
)  # fmt: skip
def test_each_bug_names_the_versions_and_builds_that_have_it(key: str, version: str, has_it: bool | None) -> None:
    assert BY_KEY[key].affects(version) is has_it
    reason = gap(key, version)
    assert (reason is not None) is bool(has_it)
    if reason:  # the xfail reason starts with the bug, so the report can tell the case failed for it
        assert reason.startswith(f"{key} in {version}: ") and BY_KEY[key].source in reason


def test_every_bug_has_a_source_and_a_collected_case_or_says_why_not() -> None:
    collected = {f"suites/{c.test}" for c in suite_cases()}
    for bug in KNOWN_BUGS:
        assert bug.source and bug.url.endswith(bug.number), bug.key
        assert bool(bug.cases) is not bool(bug.not_observable or bug.no_case_yet), bug.key
        for case in bug.cases:
            assert any(c.startswith(case) for c in collected), f"{bug.key}: no collected case {case}"


@pytest.mark.parametrize(
    ("kwargs", "folders"),
    [
        ({"kai": "main"}, ("kai-scheduler/main-2026-08-07", "trainer/v2.3.0", "jobset/v0.12.0")),
        ({"kai": "v0.17"}, ("kai-scheduler/v0.17-branch-2026-08-07", "trainer/v2.3.0", "jobset/v0.12.0")),
        (
            {"kai": "main", "trainer": "master", "jobset": "main"},
            ("kai-scheduler/main-2026-08-07", "trainer/master-2026-08-21", "jobset/main-2026-08-18"),
        ),
    ],
)
def test_a_read_build_resolves_to_the_newest_rows_and_its_own_crd_schemas(kwargs: dict, folders: tuple) -> None:
    combination = CATALOG.resolve(**kwargs)
    assert (combination.kai.crds, combination.trainer.crds, combination.jobset.crds) == folders
    expect = expectations_for(combination)
    assert (expect.kai.minor, expect.trainer.minor, expect.jobset.minor) == ("v0.17", "v2.3", "v0.12")
    # The rows are the newest release's; what the build fixed comes from the known-bugs table, not from them.
    kai = combination.kai.version
    assert expect.lifecycle.kai.completing_gang_gap(kai) is None
    assert expect.kai.podset_floor_gap(kai) is not None
    assert expect.kai.depends_on_gap is not None


def _podgroup(min_member: int) -> dict:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": min_member, "queue": "q"},
    }


@pytest.mark.parametrize(
    ("folder", "refused"),
    [("v0.16.8", True), ("v0.17.0", True), ("main-2026-08-07", False), ("v0.17-branch-2026-08-07", False)],
)
def test_kai_1944_the_podgroup_crd_takes_min_member_0_only_where_fixed(
    folder: str, refused: bool, schema_root: Path
) -> None:
    """KAI #1944 read in the CRDs themselves (the case asks the API server: suites/test_podgroup_api.py)."""
    directory = schema_root / "kai-scheduler" / folder
    if not any(directory.glob("*.yaml")):
        pytest.skip(f"no CRD schemas in {directory} (a branch head's: ../shared/crds)")
    schemas = crd_schemas.SchemaSet.load([directory])
    problems = schemas.problems(copy.deepcopy(_podgroup(0)))
    assert bool(problems) is refused, problems
    assert not schemas.problems(_podgroup(1))
    assert BY_KEY["KAI #1944"].affects(folder.split("-", maxsplit=1)[0]) is refused


@pytest.mark.parametrize("folder", sorted(ROOT_MINIMUM))
def test_the_fake_api_servers_podgroup_minima_are_the_crd_schemas(folder: str, schema_root: Path) -> None:
    """tests/fakes/crd_bounds.py refuses what each version's PodGroup CRD refuses: its table is the schemas'."""
    path = schema_root / folder / "scheduling.run.ai_podgroups.yaml"
    if not path.is_file():
        pytest.skip(f"no {path} (a branch head's: ../shared/crds)")
    versions = yaml.safe_load(path.read_text())["spec"]["versions"]
    version = next(v for v in versions if v["name"] == "v2alpha2")
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    subgroup = spec["subGroups"]["items"]["properties"]
    assert {spec[f]["minimum"] for f in ("minMember", "minSubGroup")} == {ROOT_MINIMUM[folder]}
    assert {subgroup[f]["minimum"] for f in ("minMember", "minSubGroup")} == {SUBGROUP_MINIMUM}
