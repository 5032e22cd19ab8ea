"""Render mode writes, per case, exactly the objects the case applies (labels and namespace included)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.topology import load_topology
from kai_conformance.fixtures.errors import UsageError
from kai_conformance.fixtures.ownership import MANAGED_BY, SCOPE_LABEL, TEST_ID_ANNOTATION
from kai_conformance.fixtures.plugin.session import create_render_dir
from kai_conformance.fixtures.render import RenderContext, case_documents, case_of, file_name, render

CATALOG = Catalog.load()


@dataclass(frozen=True)
class TinyCase:
    id: str = "tiny"

    def manifests(self, ctx: RenderContext) -> list[dict]:
        gpus = ctx.layout.max_per_node
        return [
            {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": f"q-{ctx.namespace}"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
             "spec": {"containers": [{"name": "c", "image": ctx.workload_image,
                                      "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}},
        ]  # fmt: skip


def item(nodeid: str, case: object | None) -> SimpleNamespace:
    params = {"case": case} if case is not None else {}
    return SimpleNamespace(
        nodeid=nodeid, name=nodeid.rsplit("::", maxsplit=1)[-1], callspec=SimpleNamespace(params=params)
    )


def context_for(namespace: str) -> RenderContext:
    combo = CATALOG.combination(CATALOG.defaults["combination"])
    return RenderContext(namespace, combo, load_topology("pr-gate").layout("kc"), "render", "pause:1")


def test_file_names_follow_the_test_id() -> None:
    assert file_name("suites/test_gang.py::test_fits[2-pods]") == "test_gang.py__test_fits[2-pods].yaml"
    assert file_name("suites/sub/test_x.py::test_y[a b/c]") == "sub_test_x.py__test_y[a_b_c].yaml"


def test_case_documents_are_prepared_like_the_workspace_applies_them() -> None:
    docs = case_documents(item("suites/test_x.py::test_y[tiny]", TinyCase()), context_for)
    namespace, queue, pod = docs
    assert namespace["kind"] == "Namespace" and namespace["metadata"]["name"] == "kc-test-y-tiny-render"
    assert queue["metadata"]["name"] == "q-kc-test-y-tiny-render" and "namespace" not in queue["metadata"]
    assert pod["metadata"]["namespace"] == "kc-test-y-tiny-render"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4  # from the topology
    for doc in docs:
        assert doc["metadata"]["labels"][MANAGED_BY] == "kai-conformance"
        assert doc["metadata"]["labels"][SCOPE_LABEL] == "case"
        assert doc["metadata"]["annotations"][TEST_ID_ANNOTATION] == "suites/test_x.py::test_y[tiny]"


def test_items_without_a_case_render_their_namespace_only() -> None:
    assert case_of(item("suites/t.py::t", None)) is None
    (namespace,) = case_documents(item("suites/t.py::t", None), context_for)
    assert namespace["kind"] == "Namespace"


def test_render_writes_one_file_per_case_plus_the_stack(tmp_path: Path) -> None:
    items = [item("suites/test_a.py::test_one[tiny]", TinyCase()), item("suites/test_a.py::test_two", None)]
    stack = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "s"}}]
    assert render(items, tmp_path, context_for, stack) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_stack.yaml", "test_a.py__test_one[tiny].yaml", "test_a.py__test_two.yaml",
    ]  # fmt: skip
    text = (tmp_path / "test_a.py__test_one[tiny].yaml").read_text()
    assert text.startswith("# suites/test_a.py::test_one[tiny]\n")
    assert [d["kind"] for d in yaml.safe_load_all(text)] == ["Namespace", "Queue", "Pod"]


def test_cases_may_only_create_known_kinds() -> None:
    @dataclass(frozen=True)
    class Odd:
        def manifests(self, ctx: RenderContext) -> list[dict]:
            return [{"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}]

    with pytest.raises(UsageError, match="not Gadget"):
        case_documents(item("suites/t.py::t[odd]", Odd()), context_for)


def test_a_render_directory_that_cannot_be_made_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(pytest.UsageError) as raised:
        create_render_dir(tmp_path / "file" / "rendered")
    assert f"1. cannot create the --render-manifests directory {tmp_path}/file/rendered: Not a directory" in str(
        raised.value
    )
    create_render_dir(tmp_path / "new" / "rendered")
    assert (tmp_path / "new" / "rendered").is_dir()
