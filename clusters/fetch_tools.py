"""Fetch kind, kubectl and helm at the versions pinned in clusters/versions.yaml (``tools:``) into the tools folder.

Every download is checked against the pinned sha256 before it is installed; nothing unverified is ever put in
place. The suite uses a tool from PATH when there is one, and falls back to the tools folder
(:data:`~clusters.tools.TOOLS_BIN`: ``.tools/bin`` in a clone, the user's cache when installed from the wheel).
It is part of the package so that the hint a missing tool prints works for both; ``scripts/fetch_tools.py`` in a
clone runs the same thing.

    python -m kai_conformance.clusters.fetch_tools              # all three
    python -m kai_conformance.clusters.fetch_tools kind helm    # some
    python -m kai_conformance.clusters.fetch_tools --force      # download again even if the pinned version is there
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import platform
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kai_conformance.clusters.catalog import VERSIONS_FILE, Catalog
from kai_conformance.clusters.tools import TOOLS_BIN

STAMP = ".versions.json"
INSTALL_HINTS = {
    "kind": "https://kind.sigs.k8s.io/docs/user/quick-start/#installation",
    "kubectl": "https://kubernetes.io/docs/tasks/tools/",
    "helm": "https://helm.sh/docs/intro/install/",
}


class FetchError(Exception):
    """A tool could not be fetched; the message names why and what to do instead."""


def current_platform() -> tuple[str, str]:
    system = platform.system().lower()
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return system, arch


def _download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def fetch(name: str, spec: dict[str, Any], dest: Path, *, system: str, arch: str, timeout: float = 120.0) -> Path:
    """Download ``name`` per its pinned ``spec``, verify it, and install it as ``dest/name``."""
    version = spec["version"]
    fix = f"install {name} {version} yourself ({INSTALL_HINTS.get(name, 'see its docs')}) and put it on PATH"
    expected = (spec.get("sha256") or {}).get(f"{system}-{arch}")
    if not expected:
        raise FetchError(f"no pinned checksum for {name} {version} on {system}-{arch} in {VERSIONS_FILE.name}; {fix}")
    url = spec["url"].format(version=version, os=system, arch=arch)
    try:
        data = _download(url, timeout)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(f"cannot download {url}: {reason} (offline?); {fix}, or copy it to {dest / name}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise FetchError(f"checksum mismatch for {url}: expected {expected}, got {digest}; nothing was installed")
    member = spec.get("archive_member")
    if member:
        data = _extract(data, member.format(version=version, os=system, arch=arch), url)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / name
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)
    _stamp(dest, name, version)
    return target


def _extract(archive: bytes, member: str, url: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        try:
            extracted = tar.extractfile(member)
        except KeyError:
            extracted = None
        if extracted is None:
            raise FetchError(f"{url} has no file {member}")
        return extracted.read()


def _stamps(dest: Path) -> dict[str, str]:
    path = dest / STAMP
    return json.loads(path.read_text()) if path.is_file() else {}


def _stamp(dest: Path, name: str, version: str) -> None:
    (dest / STAMP).write_text(json.dumps({**_stamps(dest), name: version}, indent=2, sort_keys=True))


def installed_version(dest: Path, name: str) -> str | None:
    return _stamps(dest).get(name) if (dest / name).is_file() else None


def main(argv: list[str] | None = None, catalog: Catalog | None = None) -> int:
    catalog = catalog or Catalog.load()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tools", nargs="*", metavar="TOOL", help=f"among {', '.join(catalog.tools)} (default: all)")
    parser.add_argument("--force", action="store_true", help="download even if the pinned version is installed")
    parser.add_argument("--dest", type=Path, default=TOOLS_BIN, help=f"where to install (default: {TOOLS_BIN})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tools) - set(catalog.tools))
    if unknown:
        parser.error(f"unknown tool(s) {unknown}; pinned: {', '.join(catalog.tools)}")
    system, arch = current_platform()
    failures = 0
    for name in args.tools or list(catalog.tools):
        spec = catalog.tools[name]
        if not args.force and installed_version(args.dest, name) == spec["version"]:
            print(f"{name} {spec['version']}: already in {args.dest}")
            continue
        try:
            path = fetch(name, spec, args.dest, system=system, arch=arch)
        except FetchError as exc:
            failures += 1
            print(f"{name}: {exc}", file=sys.stderr)
            continue
        print(f"{name} {spec['version']}: installed {path} (sha256 verified)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
