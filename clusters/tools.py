"""The command-line tools the real run needs (docker, kind, kubectl, helm), found on PATH or in ``.tools/bin``.

``scripts/fetch_tools.py`` downloads kind, kubectl and helm at the versions pinned in ``clusters/versions.yaml``
(checksum-verified) into ``.tools/bin``; PATH wins when a tool is there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where fetched tools live; overridable so self-tests can simulate a machine without them.
TOOLS_BIN = Path(os.environ.get("KAI_CONFORMANCE_TOOLS_BIN", REPO_ROOT / ".tools" / "bin"))
#: How to get a missing kind/kubectl/helm, quoted by preflight and by the command runner.
FETCH_HINT = "python scripts/fetch_tools.py {tool}   (pinned version, checksum-verified, into .tools/bin)"


def find_tool(name: str, path: str | None = None) -> str | None:
    """Absolute path of ``name`` on PATH (or ``path``), else in ``.tools/bin``, else ``None``."""
    found = shutil.which(name, path=path)
    if found:
        return found
    pinned = TOOLS_BIN / name
    return str(pinned) if pinned.is_file() and os.access(pinned, os.X_OK) else None
