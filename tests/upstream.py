"""Where the self-tests find the shared upstream copies (``/work/shared/upstream`` in CI): read and validated
against, never vendored into the repository.

``$KAI_CONFORMANCE_UPSTREAM``, else ``upstream/`` beside ``$KAI_CONFORMANCE_CRDS`` (CI's ``../shared/crds``), else
``../shared/upstream`` beside the clone. Absent → the caller skips, unless ``KAI_CONFORMANCE_REQUIRE_CRDS=1`` (CI),
which turns the skip into a failure, as for the CRD schemas (tests/crd_schemas.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import crd_schemas

UPSTREAM_ENV = "KAI_CONFORMANCE_UPSTREAM"
#: Trainer's manifests/base/runtimes/ files at v2.3.0, as the shared copy holds them (no kustomization.yaml).
TRAINER_RUNTIMES = Path("trainer-v2.3.0") / "runtimes"


def upstream_root() -> Path | None:
    configured = os.environ.get(UPSTREAM_ENV)
    if configured:
        return Path(configured)
    crds = os.environ.get(crd_schemas.CRDS_ENV)
    for candidate in ([Path(crds).parent / "upstream"] if crds else []) + [
        crd_schemas.ROOT.parent / "shared" / "upstream"
    ]:
        if candidate.is_dir():
            return candidate
    return None


def required(relative: Path) -> Path:
    """``relative`` under the upstream copies; a skip (a failure under KAI_CONFORMANCE_REQUIRE_CRDS=1) if absent."""
    root = upstream_root()
    path = root / relative if root is not None else None
    if path is None or not path.exists():
        reason = (
            f"no shared upstream copy {relative} (set {UPSTREAM_ENV} to the directory holding it, or keep "
            "../shared/upstream beside the clone)"
        )
        if crd_schemas.schemas_required():
            pytest.fail(f"{crd_schemas.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    return path
