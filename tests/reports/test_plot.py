"""A case's series (name → [(t, value)]) survive the record's JSON and are drawn as an inline SVG line plot in the
case's section of report.html: well-formed, every series a line with its legend entry, values placed on the axes,
texts escaped, nothing loaded from anywhere."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from kai_conformance.reports import generate
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord, CaseRecorder
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import plot

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1_800_000_000.0
SHARES = {
    "GPUs held by light": [(T0, 12.0), (T0 + 5, 10.0), (T0 + 9, 6.0), (T0 + 30, 6.0)],
    "GPUs held by heavy": [(T0 + 2, 0.0), (T0 + 5, 2.0), (T0 + 9, 6.0), (T0 + 30, 6.0)],
}


def points_of(polyline: ET.Element) -> list[tuple[float, float]]:
    return [tuple(float(c) for c in pair.split(",")) for pair in polyline.get("points", "").split()]  # type: ignore[misc]


def test_no_point_draws_nothing() -> None:
    assert plot.render({}) == ""
    assert plot.render({"empty": []}) == ""


def test_each_series_is_a_line_placed_on_the_time_and_value_axes_with_a_legend_entry() -> None:
    svg = ET.fromstring(plot.render(SHARES, "GPUs per queue"))
    assert svg.find(f"{SVG}title").text == "GPUs per queue"
    light, heavy = svg.iter(f"{SVG}polyline")
    light_points, heavy_points = points_of(light), points_of(heavy)
    assert len(light_points) == 4 and len(heavy_points) == 4
    # Time runs left to right from the first point of any series; larger values are higher (smaller y).
    assert light_points[0][0] == plot.LEFT and light_points[-1][0] == plot.RIGHT
    assert heavy_points[0][0] > plot.LEFT
    assert light_points[0][1] < light_points[1][1] < light_points[2][1]
    assert heavy_points[0][1] == plot.BOTTOM  # 0 sits on the time axis
    assert light_points[2][1] == heavy_points[2][1]  # the same value, the same height
    # The two lines differ by more than colour, and the legend names both.
    assert light.get("stroke") != heavy.get("stroke") and light.get("stroke-dasharray") != heavy.get("stroke-dasharray")
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "GPUs held by light" in texts and "GPUs held by heavy" in texts
    assert "0 s" in texts and "30 s" in texts and "10" in texts


def test_a_long_series_keeps_every_point_in_its_line_but_thins_its_markers() -> None:
    many = {"v": [(T0 + i, float(i % 7)) for i in range(500)]}
    svg = ET.fromstring(plot.render(many))
    (line,) = svg.iter(f"{SVG}polyline")
    assert len(points_of(line)) == 500
    assert len(list(svg.iter(f"{SVG}circle"))) <= plot.MAX_MARKERS + 1  # + the legend's


def test_series_survive_the_records_json() -> None:
    recorder = CaseRecorder(CaseRecord("suites/test_x.py::test_y"))
    for name, points in SHARES.items():
        recorder.series(name, points)
    again = CaseRecord.from_json(json.loads(json.dumps(recorder.record.to_json())))
    assert again.series == {name: list(points) for name, points in SHARES.items()}
    assert CaseRecord.from_json({"nodeid": "old"}).series == {}  # records written before series existed


def test_the_plot_is_in_the_cases_section_of_the_report_with_escaped_names(tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script>'
    record = CaseRecord(
        "suites/test_fairness.py::test_z[equal]", title="fair", area="fairness", outcome="passed", run_id="r",
        series={**SHARES, hostile: [(T0, 1.0), (T0 + 1, 2.0)]},
    )  # fmt: skip
    plain = CaseRecord("suites/test_gang.py::test_g", title="gang", area="gang", outcome="passed", run_id="r")
    written = generate.write_reports(tmp_path, [RunRecords(RunInfo("r"), [record, plain])])
    html = written.html.read_text()
    section = re.search(r'<details class="case c-passed" id="[^"]*test-fairness[^"]*".*?</details>', html, re.S)
    assert section and section.group(0).count('<svg class="plot"') == 1
    assert html.count('<svg class="plot"') == 1  # the case without series has no plot
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    assert 'href="http' not in section.group(0) and "url(" not in section.group(0)
