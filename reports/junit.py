"""Merging JUnit XML files of several runs into one ``<testsuites>`` document (one suite per run)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

COUNTERS = ("tests", "failures", "errors", "skipped")


def merge(sources: list[tuple[Path, str]], target: Path) -> int:
    """``sources``: (junit.xml, label); each testsuite is renamed ``<name> [<label>]``. Returns suites merged."""
    root = ET.Element("testsuites", {"name": "kai-conformance"})
    totals = dict.fromkeys(COUNTERS, 0)
    seconds = 0.0
    for path, label in sources:
        document = ET.parse(path).getroot()
        suites = [document] if document.tag == "testsuite" else list(document.iter("testsuite"))
        for suite in suites:
            suite.set("name", f"{suite.get('name', 'pytest')} [{label}]")
            for counter in COUNTERS:
                totals[counter] += int(suite.get(counter, "0") or 0)
            seconds += float(suite.get("time", "0") or 0)
            root.append(suite)
    for counter, value in totals.items():
        root.set(counter, str(value))
    root.set("time", f"{seconds:.3f}")
    target.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(target, encoding="utf-8", xml_declaration=True)
    return len(root)
