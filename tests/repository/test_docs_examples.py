"""The commands in README.md and docs/*.md give path values with `=` (`--kubeconfig=PATH`), as the README asks:
pytest sets a separate value of a plugin's option aside as a test path while it looks for its configuration
(pytest-dev/pytest#8846)."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from kai_conformance.fixtures.plugin import options

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCED = re.compile(r"^```(?:bash|sh|yaml)?\n(.*?)^```", re.M | re.S)


class RecordingParser:
    def __init__(self) -> None:
        self.metavars: dict[str, str] = {}

    def getgroup(self, name: str) -> RecordingParser:
        return self

    def addoption(self, *names: str, **attributes: object) -> None:
        self.metavars[names[0]] = str(attributes.get("metavar") or "")


def path_options() -> dict[str, str]:
    parser = RecordingParser()
    options.pytest_addoption(parser, SimpleNamespace(has_plugin=lambda name: False))  # type: ignore[arg-type]
    return {name: metavar for name, metavar in parser.metavars.items() if re.search(r"PATH|DIR|FILE", metavar)}


def separate_path_values(text: str, path_valued: dict[str, str]) -> list[str]:
    """``--opt VALUE`` in the document's commands, for options taking a path (a NAME of a NAME|PATH option is fine)."""
    found = []
    for block in FENCED.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            if "pytest" not in line:
                continue
            words = shlex.split(line.split(" #", 1)[0], posix=True)
            for option, value in itertools.pairwise(words):
                metavar = path_valued.get(option)
                if metavar and not ("NAME" in metavar and "/" not in value):
                    found.append(f"{option} {value}")
    return found


def test_the_path_options_are_known() -> None:
    assert {"--kubeconfig", "--report-dir", "--render-manifests", "--kai-chart", "--topology"} <= set(path_options())


def test_a_separate_path_value_is_found() -> None:
    text = "```bash\npytest suites --render-manifests out/ --topology release --topology=x.yaml \\\n  --kai-chart ../k\n```\n"
    assert separate_path_values(text, path_options()) == ["--render-manifests out/", "--kai-chart ../k"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_documented_commands_give_paths_with_equals(document: Path) -> None:
    assert separate_path_values(document.read_text(), path_options()) == []
