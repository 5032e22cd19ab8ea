#!/usr/bin/env python3
"""CI (.ci/run): the built wheel, installed (not editable), runs the suites without a clone and claims no generic
top-level module name. Run it from a directory outside the repository:

    python /path/to/repo/scripts/check_installed_package.py NODE_IDS_FILE

``NODE_IDS_FILE`` holds the node ids ``pytest suites --collect-only -q`` printed in the clone: the installed
package must collect exactly those, import every suite module as ``kai_conformance.suites.*``, and render one
manifest file per case.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

GENERIC_NAMES = ("fixtures", "clusters", "reports", "suites")


class Probe:
    """What the run collected, and under which module names."""

    def __init__(self) -> None:
        self.nodeids: list[str] = []
        self.modules: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.nodeids = [item.nodeid for item in session.items]
        self.modules = {item.module.__name__ for item in session.items}


def generic_names_taken() -> list[str]:
    return [name for name in GENERIC_NAMES if name in sys.modules or importlib.util.find_spec(name)]


def problems(expected: list[str]) -> list[str]:
    found = []
    suites = Path(importlib.util.find_spec("kai_conformance.suites").origin).parent
    if "site-packages" not in suites.parts:
        found.append(f"kai_conformance.suites comes from {suites}, not from an installed wheel")
    if taken := generic_names_taken():
        found.append(f"importable before the run: {taken}")
    from kai_conformance.fixtures import cli

    probe = Probe()
    status = pytest.main(cli.pytest_args(["--collect-only", "-qq", "-p", "no:cacheprovider"], Path.cwd()),
                         plugins=[probe])  # fmt: skip
    if status != 0:
        found.append(f"collecting exited with {status}")
    if probe.nodeids != expected:
        missing, extra = sorted(set(expected) - set(probe.nodeids)), sorted(set(probe.nodeids) - set(expected))
        found.append(f"collected {len(probe.nodeids)} cases, not the clone's {len(expected)}: "
                     f"missing {missing[:3]}, extra {extra[:3]}")  # fmt: skip
    if stray := sorted(m for m in probe.modules if not m.startswith("kai_conformance.suites.")):
        found.append(f"suite modules imported under other names: {stray}")
    if taken := generic_names_taken():
        found.append(f"importable after the run: {taken}")
    from kai_conformance.clusters import tools

    if "site-packages" in tools.TOOLS_BIN.parts:
        found.append(f"fetched tools would go into the installed package: {tools.TOOLS_BIN}")
    helped = subprocess.run([sys.executable, "-m", "kai_conformance.clusters.fetch_tools", "--help"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if helped.returncode != 0:
        found.append(f"the missing-tool hint's command fails from the wheel: {helped.stderr[-500:]}")
    with tempfile.TemporaryDirectory() as scratch:
        # the console script pip installed next to this interpreter
        script = shutil.which("kai-conformance", path=str(Path(sys.executable).parent)) or "kai-conformance"
        result = subprocess.run([script, "--render-manifests=rendered", "-q"], cwd=scratch,
                                capture_output=True, text=True, check=False)  # fmt: skip
        rendered = list((Path(scratch) / "rendered").glob("*.yaml"))
        if result.returncode != 0 or len(rendered) != len(expected) + 1:
            found.append(f"kai-conformance --render-manifests exited {result.returncode} with {len(rendered)} files "
                         f"for {len(expected)} cases:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")  # fmt: skip
    return found


def main(argv: list[str]) -> int:
    expected = [line for line in Path(argv[0]).read_text().splitlines() if "::" in line]
    if not expected:
        print(f"check_installed_package: {argv[0]} names no case", file=sys.stderr)
        return 2
    found = problems(expected)
    for problem in found:
        print(f"check_installed_package: {problem}", file=sys.stderr)
    if not found:
        print(f"installed package: {len(expected)} cases collected as kai_conformance.suites.* and rendered; "
              f"none of {', '.join(GENERIC_NAMES)} importable")  # fmt: skip
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
