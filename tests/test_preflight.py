"""Prerequisites: every missing piece named with its fix, in one message, within seconds, creating nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures import errors, preflight
from tests.fakes.kube import FakeKube

REPO = Path(__file__).resolve().parent.parent


def completed(code: int, out: str = "", err: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], code, out, err)


def test_missing_docker_names_the_install_fix() -> None:
    (problem,) = preflight.check_docker(find=lambda tool: None)
    assert problem.what.startswith("docker is not installed")
    assert "https://docs.docker.com/engine/install/" in problem.fix


def test_docker_without_engine_names_the_daemon() -> None:
    answer = completed(1, err="Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")
    (problem,) = preflight.check_docker(run=lambda argv, timeout: answer, find=lambda tool: "/usr/bin/docker")
    assert problem.what == (
        "the Docker engine is not reachable: Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
    )
    assert "start the Docker daemon" in problem.fix


def test_hanging_docker_is_reported_not_waited_for() -> None:
    def hang(argv, timeout):
        raise subprocess.TimeoutExpired(argv, timeout)

    (problem,) = preflight.check_docker(run=hang, find=lambda tool: "/usr/bin/docker")
    assert "did not answer" in problem.what


def test_working_docker_is_no_problem() -> None:
    assert preflight.check_docker(run=lambda a, t: completed(0, "28.2.2\n"), find=lambda tool: "/d") == []


def test_each_missing_tool_gets_a_fetch_and_an_install_hint() -> None:
    problems = preflight.check_tools(("kind", "kubectl", "helm"), find=lambda tool: None if tool != "kubectl" else "/k")
    assert [p.what for p in problems] == ["kind is not on PATH", "helm is not on PATH"]
    assert "python scripts/fetch_tools.py kind" in problems[0].fix
    assert "https://helm.sh/docs/intro/install/" in problems[1].fix


def test_existing_cluster_bad_kubeconfig_and_unreachable_server() -> None:
    def bad(kubeconfig, context):
        raise errors.UsageError("cannot load kubeconfig /x: [Errno 2] No such file")

    (problem,) = preflight.check_existing_cluster("/x", None, connect=bad)
    assert "the kubeconfig cannot be used: cannot load kubeconfig /x" in problem.what
    assert "--kubeconfig PATH" in problem.fix

    down = FakeKube()
    down.fail("version", 0, message="connection refused")
    (problem,) = preflight.check_existing_cluster("/k", None, connect=lambda k, c: down)
    assert problem.what.startswith("the cluster in /k is unreachable") and "connection refused" in problem.what
    assert preflight.check_existing_cluster("/k", None, connect=lambda k, c: FakeKube()) == []


def test_problems_are_numbered_with_their_fixes() -> None:
    text = preflight.format_problems([preflight.Problem("a broke", "do x"), preflight.Problem("b broke", "do y")])
    assert text.splitlines()[:5] == [
        "kai-conformance cannot start (2 problems):",
        "  1. a broke",
        "     fix: do x",
        "  2. b broke",
        "     fix: do y",
    ]


def run_suite(args: list[str], tmp_path: Path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, "KAI_CONFORMANCE_TOOLS_BIN": str(tmp_path / "no-tools")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "--report-dir", str(tmp_path / "r"), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_pytest_suites_without_any_tool_stops_with_one_message(tmp_path: Path) -> None:
    """End to end: no docker/kind/kubectl/helm and an unknown version → one message, exit 4, in seconds."""
    started = time.monotonic()
    result = run_suite(["--kai-version", "v9.9.9"], tmp_path, path=str(tmp_path))
    assert time.monotonic() - started < 20
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "kai-conformance cannot start (5 problems):" in output
    expected = ["1. docker is not installed", "2. kind is not on PATH", "3. kubectl is not on PATH",
                "4. helm is not on PATH", "5. unknown kai version 'v9.9.9'"]  # fmt: skip
    positions = [output.index(line) for line in expected]  # docker first: the one piece we cannot fetch
    assert positions == sorted(positions)
    assert not (tmp_path / "r" / ".state" / "cluster.json").exists()


def test_pytest_suites_on_an_unreachable_existing_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    result = run_suite(["--cluster", "existing", f"--kubeconfig={kubeconfig}"], tmp_path, path=os.environ["PATH"])
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert f"the cluster in {kubeconfig} is unreachable" in output
