"""The command-line tools the real run needs (docker, kind, kubectl, helm), found on PATH or in the tools folder.

``python -m kai_conformance.clusters.fetch_tools`` downloads kind, kubectl and helm at the versions pinned in
``clusters/versions.yaml`` (checksum-verified) into the tools folder; PATH wins when a tool is there. The folder is
``.tools/bin`` in a clone and the user's cache when the suite is installed from its wheel (site-packages is no
place for downloads), or ``$KAI_CONFORMANCE_TOOLS_BIN``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def default_tools_bin(root: Path = REPO_ROOT, environ: os._Environ | dict[str, str] = os.environ) -> Path:
    """``.tools/bin`` of a clone (it has a pyproject.toml); else ``$XDG_CACHE_HOME/kai-conformance/tools/bin``."""
    if (root / "pyproject.toml").is_file():
        return root / ".tools" / "bin"
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kai-conformance" / "tools" / "bin"


#: Where fetched tools live; overridable so self-tests can simulate a machine without them.
TOOLS_BIN = Path(os.environ.get("KAI_CONFORMANCE_TOOLS_BIN") or default_tools_bin())
#: How to get a missing kind/kubectl/helm, quoted by preflight and by the command runner. The module ships with the
#: package, so the command works in a clone and for an installed suite alike.
FETCH_HINT = (
    "python -m kai_conformance.clusters.fetch_tools {tool}   (pinned version, checksum-verified, into "
    + str(TOOLS_BIN).replace("{", "{{").replace("}", "}}")
    + ")"
)


def find_tool(name: str, path: str | None = None) -> str | None:
    """Absolute path of ``name`` on PATH (or ``path``), else in the tools folder, else ``None``."""
    found = shutil.which(name, path=path)
    if found:
        return found
    pinned = TOOLS_BIN / name
    return str(pinned) if pinned.is_file() and os.access(pinned, os.X_OK) else None
