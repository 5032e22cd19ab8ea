"""The one way the suite runs command-line tools (helm, kubectl, kind, docker).

Every call has a timeout and captured output; a failure raises :class:`CommandFailed` naming the command, how it
ended and the tail of what it printed, plus a hint for the fix when the caller knows one. Callers take a
``runner`` argument (default :func:`run`), so the self-tests substitute a fake that records command lines.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kai_conformance.clusters.tools import FETCH_HINT, find_tool
from kai_conformance.fixtures import errors

#: Lines of a failed command's output quoted in the error.
TAIL_LINES = 20
#: Seconds a command is given at least, whatever its budget: starting a process (a Python tool, docker's client)
#: alone takes seconds on a busy machine, so a budget scaled below that (``--timeout-scale 0.01``, as the self-tests
#: run the plugin) would fail a command that was never slow.
MIN_COMMAND_SECONDS = 10.0


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class CommandFailed(errors.InfrastructureError):
    """A command exited non-zero, timed out or could not start."""

    def __init__(self, argv: Sequence[str], how: str, output: str = "", hint: str = "") -> None:
        self.argv = tuple(argv)
        self.how = how
        self.output = output
        self.hint = hint
        message = f"`{display(argv)}` {how}"
        if output.strip():
            message += ":\n  " + "\n  ".join(tail(output))
        if hint:
            message += f"\nfix: {hint}"
        super().__init__(message)


class Runner(Protocol):
    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> Completed: ...


def display(argv: Sequence[str]) -> str:
    """The command line as a user would type it (tool by name, not by absolute path)."""
    if not argv:
        return ""
    return shlex.join([Path(argv[0]).name, *argv[1:]])


def tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    return [line for line in text.strip().splitlines() if line.strip()][-lines:]


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> Completed:
    """Run ``argv`` and capture its output; raises :class:`CommandFailed` unless ``check`` is off. ``timeout`` is
    raised to :data:`MIN_COMMAND_SECONDS`."""
    timeout = max(timeout, MIN_COMMAND_SECONDS)
    full_env = {**os.environ, **env} if env else None
    try:
        proc = subprocess.run(
            list(argv), input=input, capture_output=True, text=True, timeout=timeout, env=full_env, check=False
        )
    except FileNotFoundError:
        raise CommandFailed(argv, "could not start: executable not found", hint=_install_hint(argv[0])) from None
    except PermissionError:
        raise CommandFailed(argv, "could not start: not executable", hint=f"chmod +x {argv[0]}") from None
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stderr) + _text(exc.stdout)
        raise CommandFailed(argv, f"did not finish within {timeout:.0f}s", output) from None
    result = Completed(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
    return checked(result) if check else result


def checked(result: Completed) -> Completed:
    """``result``, or :class:`CommandFailed` quoting its output when it exited non-zero."""
    if result.returncode != 0:
        raise CommandFailed(result.argv, f"failed (exit {result.returncode})", result.stderr or result.stdout)
    return result


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _install_hint(executable: str) -> str:
    name = Path(executable).name
    if name in ("kind", "kubectl", "helm"):
        return FETCH_HINT.format(tool=name)
    return f"install {name} and make sure it is on PATH"


def tool(name: str) -> str:
    """Absolute path of a required tool (PATH, then ``.tools/bin``); a usage error naming the fix otherwise."""
    found = find_tool(name)
    if found is None:
        raise errors.UsageError(f"{name} is not on PATH; fix: {_install_hint(name)}")
    return found


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Capture what child processes write to this process's stdout/stderr (file descriptors 1 and 2).

    For libraries that run tools without capturing their output (pytest-kind-ng's ``KindCluster``): the text
    is appended to the yielded list when the block ends, so errors can quote it.
    """
    collected: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        _flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            for fd in (1, 2):
                os.dup2(sink.fileno(), fd)
            yield collected
        finally:
            _flush()
            for fd, original in zip((1, 2), saved, strict=True):
                os.dup2(original, fd)
                os.close(original)
            sink.seek(0)
            collected.append(sink.read().decode(errors="replace"))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
