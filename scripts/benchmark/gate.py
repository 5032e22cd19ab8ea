#!/usr/bin/env python3
"""Measure the PR gate (``pytest suites -m "not slow"``) on a cluster in several modes, back to back, and write the
figures. A benchmark, not a test: it times the real suite, so it needs what a suite run needs (docs/clusters.md).

    python scripts/benchmark/gate.py --modes serial,2,4 --out DIR -- --reuse-cluster kai-bench [pytest options]

Each mode runs ``python -m pytest suites -m "not slow" [-n N] --report-dir=DIR/<mode> <pytest options>`` from the
repository's root with this interpreter (modes ``serial``, ``n2``, ``n4``: report directories DIR/serial, DIR/n2,
...), streaming its output prefixed with ``[<mode>]``. Without ``--reuse-cluster`` (or ``--cluster existing``)
every mode creates and deletes its own kind cluster, and that time is in its wall time.

Written after every mode, and printed at the end: DIR/benchmark.md and DIR/benchmark.json (the machine; per mode
the command, wall time, exit code, load average before and after, outcomes, and from its ``junit.xml`` the summed
case time, per area and the time cases waited for a slot, the ``slot-wait-seconds`` property; each mode against the
serial one; an estimate for 4 workers from the serial mode's figures, with its formula).

Ctrl-C or SIGTERM goes to the running pytest's process group (the suite cleans up as on its own Ctrl-C); the
benchmark waits for it, runs no further mode, writes what was measured and exits with 128 + the signal number.
Otherwise it exits 0 when every mode's pytest did, else 1 (the figures are written either way).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

# ruff: noqa: E402 - run as a script, the repository's root is put on the path first
from scripts.benchmark.gate_figures import JUNIT, ModeResult, figures_of, write

#: What runs a mode: (mode, its report directory) → the argv (the self-tests pass a fake pytest).
Command = Callable[[str, Path], list[str]]
#: Options the benchmark sets per mode; given after ``--`` they would make the modes' figures meaningless.
OWNED_OPTIONS = ("--report-dir", "--junitxml", "--junit-xml", "-n", "--numprocesses", "-m")
FORWARDED = (signal.SIGINT, signal.SIGTERM)


def parse_modes(text: str) -> list[str]:
    """``serial,2,4`` → ``["serial", "n2", "n4"]``."""
    modes = []
    for word in (w.strip() for w in text.split(",")):
        if word == "serial":
            modes.append("serial")
        elif word.isdigit() and int(word) >= 1:
            modes.append(f"n{int(word)}")
        else:
            raise ValueError(f"mode {word!r}: expected 'serial' or a number of xdist workers (e.g. serial,2,4)")
    if len(set(modes)) != len(modes) or not modes:
        raise ValueError(f"modes {text!r}: each mode once, at least one")
    return modes


def owned_options(extra: list[str]) -> list[str]:
    def owned(arg: str, option: str) -> bool:
        short = len(option) == 2 and arg.startswith(option) and not arg.startswith("--")  # -n4, -mslow
        return arg == option or arg.startswith(option + "=") or short

    return [arg for arg in extra if any(owned(arg, option) for option in OWNED_OPTIONS)]


def pytest_command(extra: list[str]) -> Command:
    def build(mode: str, report_dir: Path) -> list[str]:
        workers = [] if mode == "serial" else ["-n", mode.removeprefix("n")]
        # --report-dir=DIR, not a separate value: pytest would take DIR for a test path while it looks for its
        # configuration (pytest-dev/pytest#8846; tests/repository/test_docs_examples.py).
        return [sys.executable, "-m", "pytest", "suites", "-m", "not slow", *workers, f"--report-dir={report_dir}",
                *extra]  # fmt: skip

    return build


# ------------------------------------------------------------------------------------------------ the machine
def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name") and ":" in line:
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _memory() -> str:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    return ""


def _docker_cgroup() -> str:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker"
    try:
        done = subprocess.run([docker, "info", "--format", "{{.CgroupVersion}}"], capture_output=True, text=True,
                              timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if done.returncode != 0:
        return "docker info failed: " + (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]
    return f"cgroup v{done.stdout.strip()}"


def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "cpu model": _cpu_model(),
        "memory": _memory(),
        "kernel": platform.release(),
        "docker": _docker_cgroup(),
        "python": platform.python_version(),
    }


# ------------------------------------------------------------------------------------------------ running
class Forwarder:
    """While entered, Ctrl-C and SIGTERM go to the running child's process group (the child runs in a session of
    its own, so a terminal's Ctrl-C reaches it only this way, once) and are remembered: no mode starts after."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[str] | None = None
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Forwarder:
        for signum in FORWARDED:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        self.forward(signum)

    def forward(self, signum: int) -> None:
        child = self.child
        if child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                os.killpg(child.pid, signum)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.received).name if self.received is not None else ""


def run_mode(mode: str, argv: list[str], report_dir: Path, forwarder: Forwarder, stream: TextIO) -> ModeResult:
    """Run one mode to its end, streaming its output; the wall time is from start to exit."""
    result = ModeResult(mode, argv, str(report_dir), load_before=load_average())
    (report_dir / JUNIT).unlink(missing_ok=True)  # a run that stops before writing one must not show the last one's
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)  # fmt: skip
    forwarder.child = child
    if forwarder.received is not None:  # a signal came while it was starting
        forwarder.forward(forwarder.received)
    try:
        assert child.stdout is not None
        for line in child.stdout:
            stream.write(f"[{mode}] {line.rstrip(chr(10))}\n")
            stream.flush()
        result.exit_code = child.wait()
    finally:
        if child.poll() is None:  # the benchmark itself failed: do not leave the run behind
            forwarder.forward(signal.SIGTERM)
            result.exit_code = child.wait()
        forwarder.child = None
        result.wall_seconds = time.perf_counter() - started
        result.load_after = load_average()
    return result


def run(
    modes: list[str], out: Path, command: Command, info: dict[str, Any], stream: TextIO
) -> tuple[list[ModeResult], str, int | None]:
    """Every mode in turn until one is interrupted; the figures are written after each. Returns the modes run, the
    Markdown and the signal that stopped the benchmark, if one did."""
    results: list[ModeResult] = []
    out.mkdir(parents=True, exist_ok=True)
    text = write(out, figures_of(info, results))
    with Forwarder() as forwarder:
        for mode in modes:
            if forwarder.received is not None:
                break
            report_dir = out / mode
            mode_argv = command(mode, report_dir)
            stream.write(f"[{mode}] $ {shlex.join(mode_argv)}\n")
            results.append(run_mode(mode, mode_argv, report_dir, forwarder, stream))
            results[-1].interrupted = forwarder.signal_name
            text = write(out, figures_of(info, results))
        return results, text, forwarder.received


def main(argv: list[str] | None = None, command: Command | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="%(prog)s [--modes serial,2,4] --out DIR [-- pytest options]")  # fmt: skip
    parser.add_argument(
        "--modes", default="serial,2,4", help="'serial' and numbers of xdist workers (default serial,2,4)"
    )
    parser.add_argument("--out", required=True, type=Path, help="where each mode's report directory and the figures go")
    args = parser.parse_args(own)
    try:
        modes = parse_modes(args.modes)
    except ValueError as exc:
        parser.error(str(exc))
    if owned_options(extra):
        parser.error(f"the benchmark sets {', '.join(owned_options(extra))} itself, per mode; leave them out")
    out = args.out.resolve()
    results, text, received = run(modes, out, command or pytest_command(extra), machine(), sys.stdout)
    sys.stdout.write("\n" + text + f"\nwritten: {out / 'benchmark.md'}, {out / 'benchmark.json'}\n")
    if received is not None:
        return 128 + received
    return 0 if all(r.exit_code == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
