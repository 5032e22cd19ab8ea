"""The figures of ``scripts/benchmark/gate.py``: what one mode's report directory says (its JUnit XML and the
cases' markers), summed per area, compared between modes, the 4-core estimate, and the Markdown/JSON output.

No cluster and no package import: the inputs are files a run left (``<report-dir>/junit.xml``, the records in
``<report-dir>/.state/records/`` or else the cases of ``<report-dir>/summary.json``).
"""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

JUNIT = "junit.xml"  # reports/generate.py JUNIT: where the suite points --junitxml by default
RECORDS = Path(".state") / "records"  # reports/generate.py STATE + reports/records.py RECORDS_DIR
SUMMARY = "summary.json"  # reports/generate.py JSON
SLOT_WAIT = "slot-wait-seconds"  # the JUnit testcase property the suite writes (record_property)
PARTITION = "partition"  # the slice a case ran in (fixtures/plugin/scheduling.py); absent: the shared workers
WHOLE_CLUSTER = "serial"  # the marker of cases that take the whole cluster (fixtures/plugin/markers.py)
ESTIMATE_WORKERS = 4
TOP_WAITS = 10


@dataclass(frozen=True)
class CaseTime:
    nodeid: str
    area: str
    seconds: float
    slot_wait: float | None  # None: the case did not report it (counted as 0)
    outcome: str  # passed | failed | error | skipped | xfailed
    partition: str = ""  # the slice it ran in; "" for the shared workers


@dataclass
class ModeResult:
    """One mode as measured: what ran, how long, how it ended, and the machine's load around it."""

    mode: str
    command: list[str]
    report_dir: str
    wall_seconds: float = 0.0
    exit_code: int | None = None
    interrupted: str = ""  # the signal that stopped it, e.g. "SIGTERM"
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)


def _nodeid_and_area(classname: str, name: str) -> tuple[str, str]:
    """pytest's junitxml writes ``suites/test_gang.py::Cls::test_x[p]`` as classname ``suites.test_gang.Cls``."""
    parts = classname.split(".") if classname else []
    module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
    if module < 0:
        return name, ""
    path = "/".join(parts[: module + 1]) + ".py"
    return "::".join([path, *parts[module + 1 :], name]), parts[module].removeprefix("test_")


def _outcome(testcase: ET.Element) -> str:
    for tag in ("failure", "error"):
        if testcase.find(tag) is not None:
            return "failed" if tag == "failure" else "error"
    skipped = testcase.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def _slot_wait(testcase: ET.Element) -> float | None:
    for prop in testcase.iterfind("properties/property"):
        if prop.get("name") == SLOT_WAIT:
            try:
                return float(prop.get("value", ""))
            except ValueError:
                return None
    return None


def _partition(testcase: ET.Element) -> str:
    return next(
        (p.get("value", "") for p in testcase.iterfind("properties/property") if p.get("name") == PARTITION), ""
    )


def parse_junit(path: Path) -> list[CaseTime]:
    """Every testcase of a JUnit file; a file cut short (a run killed while writing it) reads as no cases."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    cases = []
    for testcase in root.iter("testcase"):
        nodeid, area = _nodeid_and_area(testcase.get("classname", ""), testcase.get("name", ""))
        try:
            seconds = float(testcase.get("time", "0") or 0)
        except ValueError:
            seconds = 0.0
        cases.append(CaseTime(nodeid, area, seconds, _slot_wait(testcase), _outcome(testcase), _partition(testcase)))
    return cases


def case_markers(report_dir: Path) -> dict[str, list[str]]:
    """Node id → markers, from the run's records, else from its summary.json; empty when neither is there."""
    records = sorted((report_dir / RECORDS).glob("*.json"))
    try:
        if records:
            cases = [json.loads(p.read_text()) for p in records]
        elif (report_dir / SUMMARY).is_file():
            cases = json.loads((report_dir / SUMMARY).read_text()).get("cases", [])
        else:
            return {}
    except (OSError, ValueError):
        return {}
    return {c["nodeid"]: list(c.get("markers", [])) for c in cases if isinstance(c, dict) and "nodeid" in c}


def _r(seconds: float) -> float:
    return round(seconds, 1)


def summarise(result: ModeResult, cases: list[CaseTime], markers: dict[str, list[str]]) -> dict[str, Any]:
    """One mode's figures: totals, outcomes, per area, the longest slot waits, the whole-cluster split."""
    areas: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, int] = {}
    for case in cases:
        a = areas.setdefault(case.area, {"area": case.area, "cases": 0, "case_seconds": 0.0, "slot_wait_seconds": 0.0})
        a["cases"] += 1
        a["case_seconds"] += case.seconds
        a["slot_wait_seconds"] += case.slot_wait or 0.0
        outcomes[case.outcome] = outcomes.get(case.outcome, 0) + 1
    for a in areas.values():
        a["case_seconds"], a["slot_wait_seconds"] = _r(a["case_seconds"]), _r(a["slot_wait_seconds"])
    waits = sorted((c for c in cases if c.slot_wait), key=lambda c: -(c.slot_wait or 0))
    whole = [c for c in cases if WHOLE_CLUSTER in markers.get(c.nodeid, [])]
    return {
        **asdict(result),
        "wall_seconds": _r(result.wall_seconds),
        "junit": str(Path(result.report_dir) / JUNIT),
        "cases": len(cases),
        "slices": sorted({c.partition for c in cases if c.partition}),
        "outcomes": dict(sorted(outcomes.items())),
        "case_seconds": _r(sum(c.seconds for c in cases)),
        "slot_wait_seconds": _r(sum(c.slot_wait or 0.0 for c in cases)),
        "slot_wait_reported": sum(c.slot_wait is not None for c in cases),
        "areas": sorted(areas.values(), key=lambda a: (-a["case_seconds"], a["area"])),
        "slot_waits": [{"nodeid": c.nodeid, "seconds": _r(c.slot_wait or 0.0)} for c in waits[:TOP_WAITS]],
        "markers_known": bool(markers),
        "whole_cluster": {"cases": len(whole), "case_seconds": _r(sum(c.seconds for c in whole))},
    }


def comparison(modes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each mode against the serial one (else the first): wall time and summed case time, as ratios."""
    if not modes:
        return []
    base = next((m for m in modes if m["mode"] == "serial"), modes[0])
    rows = []
    for m in modes:
        if m is base:
            continue
        rows.append({
            "mode": m["mode"], "against": base["mode"],
            "wall_ratio": round(m["wall_seconds"] / base["wall_seconds"], 2) if base["wall_seconds"] else None,
            "case_time_ratio": round(m["case_seconds"] / base["case_seconds"], 2) if base["case_seconds"] else None,
        })  # fmt: skip
    return rows


def estimate(modes: list[dict[str, Any]], workers: int = ESTIMATE_WORKERS, slices: int | None = None) -> dict[str, Any]:
    """From the serial mode: S = summed time of the whole-cluster (``serial``) cases; P = summed time of the others;
    O = wall − (S + P), the run's own work outside cases (preflight, cluster and install, reports), done once.

    Without slices a serial case runs alone: T(N) ≈ O + S + P / N. With ``slices`` (the slices the measured runs
    used, from the cases' ``partition`` property, unless given) up to k = min(N, slices + 1) serial cases run at
    once, those in slices beside the others: T(N) ≈ O + max(S / k, (S + P) / N). Optimistic: it assumes N workers
    run as fast as one (no CPU contention), no waits for GPU leases or for the drain before a whole-cluster case,
    and an even spread."""
    if slices is None:
        slices = max((len(m.get("slices", [])) for m in modes), default=0)
    places = min(workers, slices + 1)
    formula = (f"T({workers}) ≈ O + max(S / {places}, (S + P) / {workers})  ({slices} slice(s))" if slices
               else f"T({workers}) ≈ O + S + P / {workers}")  # fmt: skip
    serial = next((m for m in modes if m["mode"] == "serial"), None)
    if serial is None or not serial["cases"]:
        return {"workers": workers, "formula": formula, "seconds": None, "why_not": "needs a serial mode with cases"}
    if serial["interrupted"]:
        return {"workers": workers, "formula": formula, "seconds": None, "why_not": "the serial mode was interrupted"}
    if not serial["markers_known"]:
        return {"workers": workers, "formula": formula, "seconds": None,
                "why_not": f"no case markers in {serial['report_dir']} (neither {RECORDS} nor {SUMMARY})"}  # fmt: skip
    s = serial["whole_cluster"]["case_seconds"]
    p = serial["case_seconds"] - s
    o = max(0.0, serial["wall_seconds"] - serial["case_seconds"])
    seconds = o + max(s / places, (s + p) / workers) if slices else o + s + p / workers
    return {"workers": workers, "formula": formula, "from_mode": "serial", "O": _r(o), "S": _r(s), "P": _r(p),
            "slices": slices, "whole_cluster_cases": serial["whole_cluster"]["cases"], "seconds": _r(seconds)}  # fmt: skip


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes, rest = divmod(round(seconds), 60)
    return f"{seconds:.1f} s ({minutes} min {rest} s)" if minutes else f"{seconds:.1f} s"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value}"


def _load(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "–"


def _modes_table(modes: list[dict[str, Any]]) -> list[str]:
    lines = ["| mode | wall time | exit | cases | outcomes | summed case time | slot wait | load 1/5/15 min before → after |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for m in modes:
        ended = f"{m['exit_code']}" + (f" ({m['interrupted']})" if m["interrupted"] else "")
        outcomes = ", ".join(f"{n} {k}" for k, n in m["outcomes"].items()) or "–"
        lines.append(f"| {m['mode']} | {clock(m['wall_seconds'])} | {ended} | {m['cases']} | {outcomes} "
                     f"| {clock(m['case_seconds'])} | {clock(m['slot_wait_seconds'])} "
                     f"| {_load(m['load_before'])} → {_load(m['load_after'])} |")  # fmt: skip
    return ["", *lines, "", *(f"* {m['mode']}: `{shlex.join(m['command'])}`" for m in modes)]


def _areas(m: dict[str, Any]) -> list[str]:
    lines = ["", f"## {m['mode']}: per area", ""]
    if not m["cases"]:
        return [*lines, f"No cases in {m['junit']} (missing or cut short)."]
    lines += ["| area | cases | summed case time | slot wait |", "| --- | --- | --- | --- |"]
    lines += [f"| {a['area'] or '?'} | {a['cases']} | {a['case_seconds']:.1f} s | {a['slot_wait_seconds']:.1f} s |"
              for a in m["areas"]]  # fmt: skip
    if not m["slot_wait_reported"]:
        return [*lines, "", f"No case reported `{SLOT_WAIT}`: slot waits are counted as 0."]
    reported = f"{m['slot_wait_reported']} of {m['cases']} cases reported `{SLOT_WAIT}` (the others count 0)"
    if not m["slot_waits"]:
        return [*lines, "", f"{reported}; none of them waited for a slot."]
    lines += ["", f"{reported}; the longest waits:", ""]
    return lines + [f"* {w['seconds']:.1f} s `{w['nodeid']}`" for w in m["slot_waits"]]


def _estimate(e: dict[str, Any]) -> list[str]:
    n = e["workers"]
    lines = ["", f"## Estimate for `-n {n}` on {n} cores (an estimate, not measured)", "", f"`{e['formula']}`", ""]
    if e["seconds"] is None:
        return [*lines, f"Not computed: {e['why_not']}."]
    return [*lines, (
        f"From the serial mode: O (the run outside cases: wall time − summed case time) = {e['O']:.1f} s, "
        f"S (the {e['whole_cluster_cases']} cases marked `{WHOLE_CLUSTER}`, which run alone or in a slice) = "
        f"{e['S']:.1f} s, "
        f"P (the other cases, which run side by side) = {e['P']:.1f} s: **≈ {clock(e['seconds'])}**. Optimistic: it "
        f"assumes {n} workers run each case as fast as one does (no CPU contention), no waits for GPU leases or "
        "for the drain before a serial case, and an even spread."
    )]  # fmt: skip


def render_markdown(figures: dict[str, Any]) -> str:
    machine = ", ".join(f"{key} {value}" for key, value in figures["machine"].items() if value not in (None, ""))
    lines = ["# PR-gate benchmark", "", f"**Measured** (wall clock) on: {machine}.", *_modes_table(figures["modes"])]
    if figures["comparison"]:
        lines += ["", "## Comparison", "", "| mode | against | wall time ratio | summed case time ratio |",
                  "| --- | --- | --- | --- |"]  # fmt: skip
        lines += [f"| {c['mode']} | {c['against']} | {_ratio(c['wall_ratio'])} | {_ratio(c['case_time_ratio'])} |"
                  for c in figures["comparison"]]  # fmt: skip
    for m in figures["modes"]:
        lines += _areas(m)
    return "\n".join([*lines, *_estimate(figures["estimate"])]) + "\n"


def figures_of(machine: dict[str, Any], results: list[ModeResult]) -> dict[str, Any]:
    modes = []
    for result in results:
        report_dir = Path(result.report_dir)
        modes.append(summarise(result, parse_junit(report_dir / JUNIT), case_markers(report_dir)))
    return {"machine": machine, "modes": modes, "comparison": comparison(modes), "estimate": estimate(modes)}


def write(out: Path, figures: dict[str, Any]) -> str:
    """DIR/benchmark.md and DIR/benchmark.json; returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    text = render_markdown(figures)
    (out / "benchmark.md").write_text(text)
    (out / "benchmark.json").write_text(json.dumps(figures, indent=1) + "\n")
    return text
