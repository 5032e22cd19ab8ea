"""Headless Chromium for looking at the HTML report the way a reader does: its DOM after scripts ran, or a
PNG of it (the self-tests and ``scripts/screenshot_report.py``). Debian's ``chromium`` package; nothing is
downloaded, and the flags keep Chromium from reaching any network service on its own."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "install Debian's chromium package: scripts/ensure_chromium.sh (or apt-get install chromium)"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    # Fail any name lookup: a report that needed the network would visibly break instead of fetching.
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
TIMEOUT = 60


class ChromiumMissing(Exception):
    pass


def find() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise ChromiumMissing(f"no Chromium on PATH ({', '.join(CANDIDATES)}); {INSTALL_HINT}")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="kai-chromium-") as profile:
        command = [find(), *FLAGS, f"--user-data-dir={profile}", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"chromium failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    return result


def dump_dom(page: Path) -> str:
    """The page's DOM after load and its inline script, serialized."""
    return _run(["--dump-dom", page.resolve().as_uri()]).stdout


def screenshot(page: Path, target: Path, width: int = 1280, height: int = 1500) -> Path:
    """A PNG of the top ``width`` x ``height`` pixels of the page."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--window-size={width},{height}", f"--screenshot={target.resolve()}", page.resolve().as_uri()])
    return target
