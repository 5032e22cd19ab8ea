#!/usr/bin/env python3
"""Pictures of the sample conformance report for the README (docs/images/report-*.png).

    python scripts/screenshot_report.py [--out docs/images]

Builds the sample report (``python -m kai_conformance.reports sample``: made-up data, two version combinations, every
status) and photographs it with headless Chromium: the overview (verdict, summary, failures first), the
behaviour × version matrix with the label-propagation table, and the pod timelines. Each picture is the
report itself with the other sections hidden by one extra style rule.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kai_conformance.reports import chromium, generate, sample

REPO = Path(__file__).resolve().parent.parent


#: name → (sections shown, or None for the page as is; window height)
SHOTS = {
    "report-overview": (None, 1560),
    "report-matrix": (("matrix", "labels"), 1180),
    "report-timelines": (("timelines",), 1060),
}


def only(html: str, sections: tuple[str, ...]) -> str:
    hidden = "main > section" + "".join(f":not(#{s})" for s in sections)
    return html.replace("</style>", f"{hidden} {{ display: none; }} footer {{ display: none; }}\n</style>", 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = parser.parse_args()
    try:
        chromium.find()
    except chromium.ChromiumMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kai-report-sample-") as tmp:
        base = Path(tmp)
        written = generate.merge(base / "report", sample.write_run_dirs(base / "runs"), sample.TITLE)
        html = written.html.read_text()
        for name, (sections, height) in SHOTS.items():
            page = written.html if sections is None else written.html.with_name(f"{name}.html")
            if sections is not None:
                page.write_text(only(html, sections))
            target = chromium.screenshot(page, args.out / f"{name}.png", height=height)
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
