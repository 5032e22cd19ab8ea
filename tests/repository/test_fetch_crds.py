"""scripts/fetch_crds.py: plans one download per CRD file of every cataloged version, into the layout the schema
helper reads, and reports what it could not fetch (no network needed: the opener is faked)."""

from __future__ import annotations

import importlib.util
import sys
import urllib.error
from pathlib import Path

from kai_conformance.clusters.catalog import Catalog
from tests import crd_schemas

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch_crds.py"
_spec = importlib.util.spec_from_file_location("fetch_crds", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
fetch_crds = importlib.util.module_from_spec(_spec)
sys.modules["fetch_crds"] = fetch_crds  # dataclasses resolve annotations through the module registry
_spec.loader.exec_module(fetch_crds)


def test_the_plan_covers_every_cataloged_version_at_its_release_tag(tmp_path: Path) -> None:
    catalog = Catalog.load()
    downloads = fetch_crds.plan(catalog, tmp_path)
    for versions in catalog.components.values():
        for version, component in versions.items():
            mine = [d for d in downloads if d.target.parent == tmp_path / component.crds]
            assert mine, component.crds
            assert all(f"/{version}/" in d.url for d in mine)
    assert any(d.target.name == "trainer.kubeflow.org_trainjobs.yaml" for d in downloads)


def test_the_plan_matches_the_layout_of_the_shared_schemas(tmp_path: Path) -> None:
    root = crd_schemas.crds_root()
    if root is None or not root.is_dir():
        return  # nothing to compare with; the plan test above still ran
    for download in fetch_crds.plan(Catalog.load(), tmp_path):
        assert (root / download.target.relative_to(tmp_path)).is_file(), download.target


def test_fetch_writes_crds_keeps_existing_files_and_reports_problems(tmp_path: Path) -> None:
    downloads = [
        fetch_crds.Download("https://example/ok.yaml", tmp_path / "a" / "ok.yaml"),
        fetch_crds.Download("https://example/html.yaml", tmp_path / "a" / "html.yaml"),
        fetch_crds.Download("https://example/down.yaml", tmp_path / "a" / "down.yaml"),
    ]
    served = {"https://example/ok.yaml": b"kind: CustomResourceDefinition\n", "https://example/html.yaml": b"<html>"}

    def opener(url: str) -> bytes:
        if url not in served:
            raise urllib.error.URLError("no route to host")
        return served[url]

    problems = fetch_crds.fetch(downloads, opener=opener)
    assert (tmp_path / "a" / "ok.yaml").read_bytes() == served["https://example/ok.yaml"]
    assert problems == ["https://example/html.yaml: not a CRD document",
                        "https://example/down.yaml: <urlopen error no route to host>"]  # fmt: skip
    (tmp_path / "a" / "ok.yaml").write_text("kept")
    fetch_crds.fetch(downloads[:1], opener=opener)
    assert (tmp_path / "a" / "ok.yaml").read_text() == "kept"
    fetch_crds.fetch(downloads[:1], opener=opener, force=True)
    assert (tmp_path / "a" / "ok.yaml").read_bytes() == served["https://example/ok.yaml"]
