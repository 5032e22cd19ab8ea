"""The command runner: captured output, the error naming the command and its output's tail, timeouts, a tool
that is missing, and the capture of what a library's child process prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kai_conformance.clusters import commands, tools
from kai_conformance.fixtures import errors

PY = [sys.executable, "-S", "-c"]


def test_output_is_captured_and_returned() -> None:
    result = commands.run([*PY, "print('out'); import sys; print('err', file=sys.stderr)"], timeout=10)
    assert (result.returncode, result.stdout, result.stderr) == (0, "out\n", "err\n")


def test_failure_names_the_command_and_quotes_the_tail_of_its_output() -> None:
    script = "import sys\nfor i in range(30): print(f'line {i}', file=sys.stderr)\nsys.exit(3)"
    with pytest.raises(commands.CommandFailed) as caught:
        commands.run([*PY, script], timeout=10)
    message = str(caught.value)
    assert message.startswith(f"`{Path(sys.executable).name} -S -c ")
    assert "failed (exit 3):\n  line 10\n" in message
    assert message.endswith("line 29")
    assert "line 9\n" not in message  # only the last 20 lines
    assert isinstance(caught.value, errors.InfrastructureError)


def test_unchecked_failures_are_returned() -> None:
    assert commands.run([*PY, "raise SystemExit(2)"], timeout=10, check=False).returncode == 2


def test_timeout_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "MIN_COMMAND_SECONDS", 0.05)
    with pytest.raises(commands.CommandFailed, match=r"did not finish within 0s"):
        commands.run([*PY, "import time; time.sleep(5)"], timeout=0.05)


def test_a_budget_below_the_floor_gives_the_command_the_floor() -> None:
    """A budget scaled to a fraction of a second (``--timeout-scale 0.01``) still lets a command that takes 0.5 s
    finish: at the floor of 10 s a start on a loaded machine is covered twentyfold."""
    assert commands.MIN_COMMAND_SECONDS >= 10
    assert commands.run([*PY, "import time; time.sleep(0.5)"], timeout=0.01).returncode == 0


def test_a_missing_executable_names_how_to_get_it() -> None:
    with pytest.raises(commands.CommandFailed) as caught:
        commands.run(["/nonexistent/helm", "version"], timeout=5)
    assert str(caught.value) == (
        "`helm version` could not start: executable not found\n"
        f"fix: python -m kai_conformance.clusters.fetch_tools helm   (pinned version, checksum-verified, into "
        f"{tools.TOOLS_BIN})"
    )


def test_tool_lookup_prefers_path_then_the_pinned_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    (pinned / "helm").write_text("#!/bin/sh\n")
    (pinned / "helm").chmod(0o755)
    monkeypatch.setattr(tools, "TOOLS_BIN", pinned)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert commands.tool("helm") == str(pinned / "helm")
    with pytest.raises(
        errors.UsageError, match=r"^kubectl is not on PATH; fix: python -m kai_conformance.clusters.fetch_tools kubectl"
    ):
        commands.tool("kubectl")


def test_the_tools_folder_is_the_clones_own_or_the_users_cache_when_installed(tmp_path: Path) -> None:
    clone, installed = tmp_path / "clone", tmp_path / "site-packages" / "kai_conformance"
    clone.mkdir()
    (clone / "pyproject.toml").write_text("")
    installed.mkdir(parents=True)
    assert tools.default_tools_bin(clone, {}) == clone / ".tools" / "bin"
    cache = tmp_path / "cache"
    assert (
        tools.default_tools_bin(installed, {"XDG_CACHE_HOME": str(cache)})
        == cache / "kai-conformance" / "tools" / "bin"
    )


def test_captured_output_collects_what_child_processes_print() -> None:
    with commands.captured_output() as output:
        subprocess.run([*PY, "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"], check=True)
    assert output[0].splitlines() == ["to stdout", "to stderr"]
