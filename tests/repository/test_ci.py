""".ci/run in a clone: without the upstream CRD schemas it stops at once with one line naming how to provide
them; with them (from the environment, beside the repository, or fetched into .crds/) it goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Stands in for python3: records where the schemas came from and stops CI before it builds a virtualenv.
PYTHON_STUB = '#!/bin/sh\necho "crds=${KAI_CONFORMANCE_CRDS:-unset}" > "$(dirname "$0")/called"\nexit 97\n'


def ci_in_a_clone(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, str | None]:
    clone = tmp_path / "clone"
    (clone / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", clone / ".ci" / "run")
    stub_bin = tmp_path / "bin"
    stub_bin.mkdir()
    (stub_bin / "python3").write_text(PYTHON_STUB)
    (stub_bin / "python3").chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "KAI_CONFORMANCE_CRDS"}
    environment.update(env, PATH=f"{stub_bin}:{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(clone / ".ci" / "run")], env=environment, capture_output=True, text=True, timeout=30, check=False
    )
    called = stub_bin / "called"
    return result, called.read_text().strip() if called.exists() else None


def test_a_clone_without_crd_schemas_fails_with_one_line(tmp_path: Path) -> None:
    result, called = ci_in_a_clone(tmp_path, {})
    assert result.returncode == 2
    assert called is None  # stopped before building anything
    (line,) = result.stderr.splitlines()
    assert line.startswith(".ci/run: no upstream CRD schemas")
    assert "KAI_CONFORMANCE_CRDS=/path/to/crds" in line and "python scripts/fetch_crds.py" in line


def test_a_crd_directory_that_is_not_there_fails_with_one_line(tmp_path: Path) -> None:
    result, called = ci_in_a_clone(tmp_path, {"KAI_CONFORMANCE_CRDS": str(tmp_path / "missing")})
    assert result.returncode == 2 and called is None
    (line,) = result.stderr.splitlines()
    assert line.startswith(f".ci/run: KAI_CONFORMANCE_CRDS={tmp_path / 'missing'} is not a directory")


@pytest.mark.parametrize("where", ["environment", "beside the repository", ".crds"])
def test_schemas_from_each_place_let_ci_go_on(tmp_path: Path, where: str) -> None:
    env = {}
    if where == "environment":
        (tmp_path / "schemas").mkdir()
        env["KAI_CONFORMANCE_CRDS"] = str(tmp_path / "schemas")
        expected = f"crds={tmp_path / 'schemas'}"
    elif where == "beside the repository":
        (tmp_path / "shared" / "crds").mkdir(parents=True)
        expected = f"crds={tmp_path / 'shared' / 'crds'}"
    else:
        (tmp_path / "clone" / ".crds").mkdir(parents=True)
        expected = "crds=unset"  # the self-tests read .crds/ themselves
    result, called = ci_in_a_clone(tmp_path, env)
    assert called == expected, result.stderr
    assert result.returncode == 97
