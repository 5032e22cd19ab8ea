"""clusters/fetch_tools.py: pinned downloads verified by sha256 (plain binaries and helm's archive), nothing
installed on a mismatch, and clear messages offline or on a platform without a pinned checksum."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from kai_conformance.clusters import fetch_tools


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spec_for(tmp_path: Path, data: bytes, **extra) -> dict:
    (tmp_path / "kind-linux-amd64").write_bytes(data)
    return {"version": "v0.32.0", "url": f"file://{tmp_path}/kind-{{os}}-{{arch}}",
            "sha256": {"linux-amd64": sha(data)}, **extra}  # fmt: skip


def test_a_verified_binary_is_installed_executable_and_stamped(tmp_path: Path) -> None:
    dest = tmp_path / "bin"
    path = fetch_tools.fetch("kind", spec_for(tmp_path, b"kind binary"), dest, system="linux", arch="amd64")
    assert path == dest / "kind"
    assert path.read_bytes() == b"kind binary"
    assert path.stat().st_mode & 0o111
    assert fetch_tools.installed_version(dest, "kind") == "v0.32.0"


def test_helm_is_taken_out_of_its_archive(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("linux-amd64/helm")
        info.size = len(b"helm binary")
        tar.addfile(info, io.BytesIO(b"helm binary"))
    archive = buffer.getvalue()
    (tmp_path / "helm-v3.21.4-linux-amd64.tar.gz").write_bytes(archive)
    spec = {"version": "v3.21.4", "url": f"file://{tmp_path}/helm-{{version}}-{{os}}-{{arch}}.tar.gz",
            "archive_member": "{os}-{arch}/helm", "sha256": {"linux-amd64": sha(archive)}}  # fmt: skip
    path = fetch_tools.fetch("helm", spec, tmp_path / "bin", system="linux", arch="amd64")
    assert path.read_bytes() == b"helm binary"


def test_a_checksum_mismatch_installs_nothing(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, b"tampered")
    spec["sha256"]["linux-amd64"] = sha(b"the real one")
    with pytest.raises(fetch_tools.FetchError, match=r"checksum mismatch for file://.*nothing was installed"):
        fetch_tools.fetch("kind", spec, tmp_path / "bin", system="linux", arch="amd64")
    assert not (tmp_path / "bin" / "kind").exists()


def test_offline_names_the_url_and_the_way_out(tmp_path: Path) -> None:
    spec = {"version": "v0.32.0", "url": "http://127.0.0.1:9/kind-{os}-{arch}", "sha256": {"linux-amd64": "00"}}
    with pytest.raises(fetch_tools.FetchError) as caught:
        fetch_tools.fetch("kind", spec, tmp_path / "bin", system="linux", arch="amd64", timeout=2)
    message = str(caught.value)
    assert message.startswith("cannot download http://127.0.0.1:9/kind-linux-amd64: ")
    assert "(offline?); install kind v0.32.0 yourself (https://kind.sigs.k8s.io/" in message
    assert f"or copy it to {tmp_path / 'bin' / 'kind'}" in message


def test_a_platform_without_a_pinned_checksum_is_named(tmp_path: Path) -> None:
    with pytest.raises(fetch_tools.FetchError, match=r"no pinned checksum for kubectl v1.35.5 on darwin-arm64"):
        fetch_tools.fetch("kubectl", {"version": "v1.35.5", "url": "x", "sha256": {"linux-amd64": "0"}}, tmp_path,
                          system="darwin", arch="arm64")  # fmt: skip


def test_the_pinned_catalog_covers_linux_for_every_tool() -> None:
    from kai_conformance.clusters.catalog import Catalog

    tools = Catalog.load().tools
    assert sorted(tools) == ["helm", "kind", "kubectl"]
    for name, spec in tools.items():
        for platform in ("linux-amd64", "linux-arm64"):
            assert len(spec["sha256"][platform]) == 64, (name, platform)


def test_main_reports_failures_with_a_nonzero_exit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kai_conformance.clusters.catalog import Catalog

    monkeypatch.setattr(fetch_tools, "current_platform", lambda: ("linux", "amd64"))
    catalog = Catalog.load()
    offline = {name: {**spec, "url": "http://127.0.0.1:9/x"} for name, spec in catalog.tools.items()}
    assert fetch_tools.main(["kind", "--dest", str(tmp_path)], dataclasses.replace(catalog, tools=offline)) == 1
    assert "kind: cannot download http://127.0.0.1:9/x" in capsys.readouterr().err
