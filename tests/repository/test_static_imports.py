"""An editor follows every import: with the README's set-up (``pip install -e '.[dev]'``), Jedi — the engine of
python-lsp-server and of editors' Python completion — resolves ``kai_conformance.*`` imports in the real source
files to the repository's files, not only Python at run time.

The installed package's folders are links in ``src/kai_conformance/`` to the repository's folders, and the editable
install puts ``src/`` on ``sys.path`` as a plain path (docs/ARCHITECTURE.md, "One package, two views of the same
files"); an import hook, as setuptools installs for folders mapped under other names, is invisible to Jedi and
Pyright. Jedi is given the interpreter's environment as an editor is, by path, and reads it in a subprocess: what it
sees is the installed environment, not this test process's ``sys.path`` (which pytest extends).
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import jedi

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency on Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "kai_conformance"
#: Where the imports are read: the product's folders and what uses them.
SOURCES = ("fixtures", "clusters", "reports", "suites", "tests", "scripts")
#: Packages that hold data only (YAML, templates): nothing imports them.
DATA_PACKAGES = {"kai_conformance.clusters.topologies", "kai_conformance.reports.templates"}
#: Imports that must resolve whatever else the sample picks: the ones the issue found unresolved.
REQUIRED = {
    ("suites/test_gang.py", "kai_conformance.fixtures", "errors"),
    ("suites/test_gang.py", "kai_conformance.suites.support.cases.gang", "BlockedGangCase"),
}
PER_PACKAGE = 3


#: ``from kai_conformance.… import NAMES`` (one line, or parenthesized): found by text, confirmed by ast when sampled.
IMPORT_FROM = re.compile(r"^[ \t]*from[ \t]+(kai_conformance(?:\.\w+)+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
IMPORTED_NAME = re.compile(r"\b([A-Za-z_]\w*)(?:[ \t]+as[ \t]+\w+)?")


@dataclass(frozen=True)
class Imported:
    """``from MODULE import NAME`` at LINE:COLUMN (Jedi's: 1-based line, 0-based column) of SOURCE."""

    source: str
    module: str
    name: str
    line: int
    column: int

    @property
    def package(self) -> str:
        """The package the import reaches into: the module's own if it is a package, else its parent."""
        folder = REPO.joinpath(*self.module.split(".")[1:])
        return self.module if folder.is_dir() else self.module.rpartition(".")[0]

    @property
    def target(self) -> Path | None:
        """The repository file that defines NAME: a submodule's, or the module's that defines it itself (not one
        that re-exports it: Jedi rightly goes on to the definition)."""
        folder = REPO.joinpath(*self.module.split(".")[1:])
        if (folder / f"{self.name}.py").is_file():
            return folder / f"{self.name}.py"
        for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
            if candidate.is_file():
                return candidate if self.name in _defined(candidate) else None
        return None

    def is_code(self) -> bool:
        """Whether the text is an import statement (not one quoted in a string), at the name's very position."""
        position = (self.name, self.line, self.column)
        return any(
            isinstance(node, ast.ImportFrom)
            and (node.module, node.level) == (self.module, 0)
            and any((alias.name, alias.lineno, alias.col_offset) == position for alias in node.names)
            for node in ast.walk(_tree(REPO / self.source))
        )

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: from {self.module} import {self.name}"


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _defined(module: Path) -> frozenset[str]:
    names = set()
    for node in _tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def packages() -> set[str]:
    """The distribution's code packages, as pyproject.toml lists them."""
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return set(listed) - DATA_PACKAGES - {PACKAGE}


def imports() -> Iterator[Imported]:
    """Every ``from kai_conformance.… import NAME`` of the sources, in file order. (Found by text: parsing 2 MB of
    Python takes seconds; the sampled ones are confirmed.)"""
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text()
            for statement in IMPORT_FROM.finditer(text):
                names = statement.group(2)
                for line_offset, line in enumerate(names.split("\n")):
                    code = line.split("#", 1)[0]
                    for name in IMPORTED_NAME.finditer(code):
                        offset = statement.start(2) + sum(len(s) + 1 for s in names.split("\n")[:line_offset])
                        offset += name.start(1)
                        line_start = text.rfind("\n", 0, offset) + 1
                        yield Imported(
                            path.relative_to(REPO).as_posix(),
                            statement.group(1),
                            name.group(1),
                            text.count("\n", 0, offset) + 1,
                            offset - line_start,
                        )


@functools.cache
def sample() -> dict[str, list[Imported]]:
    """Per package, the required imports and PER_PACKAGE more from different files spread over the code (each
    file's first import of that package, the first, middle and last file in order), all confirmed as code."""
    found: dict[str, list[Imported]] = {}
    for imported in imports():
        found.setdefault(imported.package, []).append(imported)
    chosen: dict[str, list[Imported]] = {}
    for package, candidates in found.items():
        usable = [i for i in candidates if i.target is not None]
        picked = [i for i in usable if (i.source, i.module, i.name) in REQUIRED and i.is_code()]
        by_file = list({i.source: i for i in reversed(usable)}.values())[::-1]
        spread = sorted({round(k * (len(by_file) - 1) / max(PER_PACKAGE - 1, 1)) for k in range(PER_PACKAGE)})
        order = [by_file[k] for k in spread] + [i for k, i in enumerate(by_file) if k not in spread]
        extra = [i for i in order if i not in picked]
        chosen[package] = [*picked, *itertools.islice((i for i in extra if i.is_code()), PER_PACKAGE)]
    return chosen


@pytest.fixture(scope="module", autouse=True)
def _parsed_sources_dropped_after_the_module() -> Iterator[None]:
    """The syntax trees parsed here (:func:`_tree`, and Jedi's parser cache: a few hundred thousand objects) go with
    the module; kept for the rest of the process, every later garbage collection of its xdist worker walked them."""
    yield
    _tree.cache_clear()
    import parso.cache

    parso.cache.parser_cache.clear()


@pytest.fixture(scope="module")
def project() -> jedi.Project:
    """The clone as an editor opens it, with this interpreter's (the README's virtualenv's) environment."""
    import jedi

    return jedi.Project(REPO, environment_path=sys.executable)


def test_the_editable_install_puts_a_real_directory_on_sys_path(project: jedi.Project) -> None:
    """What Jedi, Pyright and mypy read: the environment's sys.path holds src/ (not the repository's root, whose
    folders have generic names), and kai_conformance is a directory in it."""
    sys_path = [Path(p) for p in project.get_environment().get_sys_path()]
    assert REPO / "src" in sys_path
    assert REPO not in sys_path
    assert (REPO / "src" / PACKAGE / "__init__.py").is_file()


def test_the_sample_covers_every_package() -> None:
    assert set(sample()) == packages()
    assert all(sample().values())
    sampled = {(i.source, i.module, i.name) for imports in sample().values() for i in imports}
    assert sampled >= REQUIRED


@pytest.mark.parametrize("package", sorted(packages()))
def test_jedi_resolves_the_imports_of_each_package_to_its_files(project: jedi.Project, package: str) -> None:
    import jedi

    assert sample().get(package), f"no import into {package} found in {', '.join(SOURCES)}"
    unresolved = []
    for imported in sample()[package]:
        path = REPO / imported.source
        script = jedi.Script(path.read_text(), path=path, project=project)
        found = script.goto(imported.line, imported.column, follow_imports=True)
        reached = [(d.module_path, d.name) for d in found if d.module_path is not None]
        # through the installed tree (src/kai_conformance/...), the repository's file of that name
        if not any(
            where.resolve() == imported.target and REPO / "src" / PACKAGE in where.parents and name == imported.name
            for where, name in reached
        ):
            unresolved.append(f"{imported}: Jedi went to {reached or 'nothing'}, not {imported.target}")
    assert not unresolved, "\n".join(unresolved)
