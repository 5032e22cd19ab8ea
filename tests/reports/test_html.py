"""The HTML report is one self-contained file: no external asset, every link resolves, every text escaped,
and it renders in headless Chromium (Debian's chromium; skipped with the reason where it is not installed)."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kai_conformance.reports import chromium, generate, sample
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord, DetectorVerdict, PodTimes
from kai_conformance.reports.runinfo import RunInfo

#: Attributes through which a page loads something (or navigates away).
LOADING_ATTRIBUTES = {"src", "href", "xlink:href", "srcset", "poster", "data", "action", "formaction", "background"}
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.styles: list[str] = []
        self.scripts: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        self._in = tag if tag in ("style", "script") else None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.styles.append(data)
        elif self._in == "script":
            self.scripts.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in = None


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> generate.Written:
    base = tmp_path_factory.mktemp("sample")
    return generate.merge(base / "report", sample.write_run_dirs(base / "runs"), sample.TITLE)


def test_a_passed_control_case_shows_its_detector_fired(sample_report: generate.Written) -> None:
    html = sample_report.html.read_text()
    assert "control: detector fired as expected" in html
    assert "control: must fire" not in html


def test_the_report_loads_nothing_from_anywhere(sample_report: generate.Written) -> None:
    page = parse(sample_report.html.read_text())
    assert not [t for t, _ in page.tags if t in ("link", "img", "iframe", "object", "embed", "video", "audio")]
    for tag, attributes in page.tags:
        for name, value in attributes.items():
            if name in LOADING_ATTRIBUTES and value:
                assert "//" not in value and ":" not in value.split("/", 1)[0], (tag, name, value)
        if tag == "script":
            assert "src" not in attributes
        if "xmlns" in attributes:
            assert attributes["xmlns"] == SVG_NAMESPACE  # a namespace name, never fetched
    css = "\n".join(page.styles) + "".join(a.get("style") or "" for _, a in page.tags)
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    assert not re.search(r"https?://|fetch\(|XMLHttpRequest|import\(", "\n".join(page.scripts))


def test_every_link_resolves_in_the_page_or_next_to_it(sample_report: generate.Written) -> None:
    page = parse(sample_report.html.read_text())
    links = [a["href"] for t, a in page.tags if t == "a" and a.get("href")]
    internal = [link[1:] for link in links if link.startswith("#")]
    assert internal and set(internal) <= page.ids
    files = [link for link in links if not link.startswith("#")]
    assert any(link.startswith("runs/") and "/diagnostics/" in link for link in files)
    for link in files:
        assert (sample_report.html.parent / link).exists(), link


def test_everything_a_record_says_is_escaped(tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script><img src=http://evil>'
    record = CaseRecord(
        "suites/test_x.py::test_<b>", title=hostile, area="gang", outcome="failed", failure_kind="product",
        message=hostile, notes=[hostile], params={"case": hostile}, run_id="r", expectations=hostile,
        verdicts=[DetectorVerdict(hostile, False, hostile)],
        timelines={hostile: [PodTimes(hostile, hostile, hostile, 1.0, 2.0)]},
    )  # fmt: skip
    written = generate.write_reports(tmp_path, [RunRecords(RunInfo("r", stack={"k": hostile}), [record])])
    page = parse(written.html.read_text())
    assert [t for t, _ in page.tags if t in ("img", "b")] == []
    assert len([t for t, _ in page.tags if t == "script"]) == 1  # the report's own
    assert "&lt;script&gt;" in written.html.read_text()


@pytest.fixture(scope="module")
def browser() -> str:
    try:
        return chromium.find()
    except chromium.ChromiumMissing as exc:
        if os.environ.get("KAI_CONFORMANCE_REQUIRE_CHROMIUM"):
            raise  # CI installs it (scripts/ensure_chromium.sh): its absence there is a failure
        pytest.skip(str(exc))


def test_chromium_renders_the_report_offline(browser: str, sample_report: generate.Written, tmp_path: Path) -> None:
    """The DOM after the inline script ran (it opens the case a link points at) and a real screenshot."""
    failed = next(c for c in sample_report.report.product_failures)
    page = sample_report.html.parent / "failed.html"
    page.write_text(sample_report.html.read_text().replace("openTarget();\n</script>", f'location.hash = "#{failed.anchor}";\nopenTarget();\n</script>'))  # fmt: skip
    dom = chromium.dump_dom(page)
    png = chromium.screenshot(sample_report.html, tmp_path / "report.png", 1280, 900)
    assert "Not conformant: 2 product failures" in dom
    assert dom.count("<svg") >= len(sample_report.report.timeline_cases)
    opened = re.search(rf'<details class="case c-failed" id="{failed.anchor}"[^>]*>', dom)
    assert opened and " open" in opened.group(0)
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # a blank page compresses to ~5 KB
