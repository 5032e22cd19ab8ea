"""docs/ARCHITECTURE.md's layer table holds: each layer of the product (fixtures/, clusters/, suites/, reports/) imports
only from its own layer and the layers above it in the table.

The table is encoded here as data (:data:`LAYERS`, its rows' paths in order) and checked against the doc's first
column. A module is in the row of the most specific path that names it: the file itself, else the deepest folder that
holds it. Every ``kai_conformance.*`` import statement of the product is read with :mod:`ast`, at module level and
inside functions alike, and resolved to the repository's file (``kai_conformance.X.Y`` → ``X/Y.py`` or
``X/Y/__init__.py``; ``from P import N`` → ``P/N`` when ``N`` is a module, else ``P``'s own file).

Imports under ``if TYPE_CHECKING:`` count like any other: they do not run, but they still make a module's interface
speak of a lower layer's types, which is what the table rules out (a ``TYPE_CHECKING`` import is often how a cycle
between layers is kept from failing at run time). They are named as type-checking imports when they break the rule.
Importing ``P.N`` also runs ``P/__init__.py``; that is not counted: the layer is the named module's. Imports by
string (the plugin's ``pytest_plugins``, ``importlib``) are not read. tests/ and scripts/ may import everything.

The rule is shown to fire on made-up source texts, each importing a lower layer.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "kai_conformance"
#: The product's folders, whose imports follow the table.
PRODUCT = ("fixtures", "clusters", "suites", "reports")
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"

#: The table's rows, top to bottom: (short name, the paths of the row's first column). A folder ends in "/".
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "data and leaves",
        (
            "fixtures/kube/kinds.py",
            "fixtures/errors.py",
            "fixtures/ownership.py",
            "fixtures/matching.py",
            "fixtures/kube/api_views.py",
            "fixtures/progress.py",
            "fixtures/run.py",
            "fixtures/removal/cancellation.py",
            "reports/records.py",
        ),
    ),
    ("kube", ("fixtures/kube/",)),
    ("informers", ("fixtures/kube/informer.py",)),
    ("waits", ("fixtures/waits.py",)),
    ("removal of objects", ("fixtures/removal/cleanup.py", "fixtures/removal/teardown.py")),
    ("clusters", ("clusters/", "fixtures/configuration/settings.py")),
    ("fixtures", ("fixtures/",)),
    ("suites", ("suites/",)),
    ("reports", ("reports/",)),
    ("plugin", ("fixtures/plugin/", "fixtures/allure_labels.py", "fixtures/case_objects.py")),
    ("entry points", ("fixtures/cli.py", "fixtures/github_action.py")),
)

#: Imports into a lower layer kept on purpose: (importing file, imported path or folder) → why. Each must still occur.
ALLOWED: dict[tuple[str, str], str] = {
    # The preflight checks --chaos-components and --chaos-replay before the run starts, with the names and the
    # reproducer format the chaos area owns (suites/support/chaos/faults.py, search.py). Inverting it (the area
    # handing its checks to the configuration) is a larger change than this check; the imports are inside the
    # function, so the configuration loads without the suites.
    ("fixtures/configuration/chaos_options.py", "suites/support/chaos/"): "option checks of the chaos area",
}


@dataclass(frozen=True)
class Import:
    """An import statement at LINE of SOURCE (a repository path) of MODULE, which is the repository file TARGET."""

    source: str
    line: int
    module: str
    target: str
    typing_only: bool


def layer_of(path: str) -> int | None:
    """The index in :data:`LAYERS` of the row whose most specific path names ``path`` (None: no row does)."""
    naming = [
        (len(prefix), index)
        for index, (_, paths) in enumerate(LAYERS)
        for prefix in paths
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix))
    ]
    return max(naming)[1] if naming else None


def module_path(module: str, root: Path = REPO) -> str | None:
    """``kai_conformance.X.Y`` → ``X/Y.py`` or ``X/Y/__init__.py`` if it is in the tree (``X/Y`` for a folder
    without ``__init__.py``: a namespace package)."""
    if module != PACKAGE and not module.startswith(f"{PACKAGE}."):
        return None
    relative = "/".join(module.split(".")[1:])
    if not relative:
        return None
    if (root / f"{relative}.py").is_file():
        return f"{relative}.py"
    if (root / relative / "__init__.py").is_file():
        return f"{relative}/__init__.py"
    if (root / relative).is_dir():
        return f"{relative}/"
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(nodes: Iterable[ast.AST], typing_only: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in ``nodes`` (in functions too), each with whether it is under ``if TYPE_CHECKING``."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, typing_only))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            found += _statements(node.body, True) + _statements(node.orelse, typing_only)
        else:
            found += _statements(ast.iter_child_nodes(node), typing_only)
    return found


def imports_of(source: str, name: str, root: Path = REPO) -> list[Import]:
    """The ``kai_conformance.*`` imports of the text ``source`` of the repository file ``name``; one that names no
    file of the tree raises :class:`LookupError` (an unread import would escape the rule)."""
    found: list[Import] = []
    for statement, typing_only in _statements([ast.parse(source, name)]):
        if isinstance(statement, ast.ImportFrom):
            if statement.level:
                raise LookupError(f"{name}:{statement.lineno}: a relative import; the code imports kai_conformance.*")
            parent = statement.module or ""
            modules = [
                f"{parent}.{alias.name}" if module_path(f"{parent}.{alias.name}", root) else parent
                for alias in statement.names
            ]
        else:
            modules = [alias.name for alias in statement.names]
        for module in dict.fromkeys(modules):
            if module != PACKAGE and not module.startswith(f"{PACKAGE}."):
                continue
            target = module_path(module, root)
            if target is None:
                raise LookupError(f"{name}:{statement.lineno}: {module} is no file of the repository")
            found.append(Import(name, statement.lineno, module, target, typing_only))
    return found


def allowed(imported: Import, entries: Iterable[tuple[str, str]] = ALLOWED) -> bool:
    """Whether ``imported`` is one of the ``entries`` of :data:`ALLOWED`."""
    return any(
        imported.source == source and (imported.target == path or imported.target.startswith(path))
        for source, path in entries
    )


def violations(imports: list[Import], *, allow: bool = True) -> list[str]:
    """``file:line: module (its file): layer → lower layer`` for each import into a layer below the importer's."""
    found = []
    for imported in imports:
        here, there = layer_of(imported.source), layer_of(imported.target)
        if here is None or there is None or there <= here or (allow and allowed(imported)):
            continue
        kind = " (type-checking only)" if imported.typing_only else ""
        found.append(
            f"{imported.source}:{imported.line}: {imported.module}{kind} ({imported.target}): "
            f"layer {here + 1} {LAYERS[here][0]} → layer {there + 1} {LAYERS[there][0]}"
        )
    return found


@functools.cache
def product_files() -> tuple[str, ...]:
    return tuple(sorted(p.relative_to(REPO).as_posix() for folder in PRODUCT for p in (REPO / folder).rglob("*.py")))


@functools.cache
def product_imports() -> tuple[Import, ...]:
    return tuple(i for name in product_files() for i in imports_of((REPO / name).read_text(), name))


def doc_rows() -> list[tuple[str, ...]]:
    """The product paths (in backticks) of the first column of each row of the doc's layer table that names any."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("\n| layer |") :].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[3:]:
        first_column = line.split("|")[1]
        paths = tuple(p for p in re.findall(r"`([^`]+)`", first_column) if p.startswith(PRODUCT))
        if paths:
            rows.append(paths)
    return rows


def test_every_product_module_is_in_a_layer() -> None:
    assert len(product_files()) > 150  # the product is where this test thinks it is
    assert [name for name in product_files() if layer_of(name) is None] == []
    paths = [path for _, row in LAYERS for path in row]
    assert len(paths) == len(set(paths)), "a path in two rows"
    assert [path for path in paths if not (REPO / path).exists()] == []


def test_the_layers_here_are_the_doc_table() -> None:
    assert doc_rows() == [paths for _, paths in LAYERS], (
        "docs/ARCHITECTURE.md's layer table and LAYERS here name different paths or rows"
    )


def test_no_product_module_imports_a_lower_layer() -> None:
    found = violations(list(product_imports()))
    assert not found, (
        "an import into a layer below the importer's (docs/ARCHITECTURE.md: each layer only imports from the layers "
        "above it); move the module to its true row, or the code to where the layers allow it:\n  " + "\n  ".join(found)
    )


def test_every_allowed_import_still_occurs() -> None:
    unused = [
        entry
        for entry in ALLOWED
        if not any(allowed(i, [entry]) and violations([i], allow=False) for i in product_imports())
    ]
    assert unused == [], f"no longer imported into a lower layer, drop from ALLOWED: {unused}"


def test_the_rule_names_an_import_of_a_lower_layer() -> None:
    made_up = (
        "from kai_conformance.fixtures.kube import kinds\n"
        "from kai_conformance.suites.support.detectors.gang import something\n"
        "import kai_conformance.reports.model\n"
    )
    assert violations(imports_of(made_up, "fixtures/kube/made_up.py")) == [
        "fixtures/kube/made_up.py:2: kai_conformance.suites.support.detectors.gang "
        "(suites/support/detectors/gang.py): layer 2 kube → layer 8 suites",
        "fixtures/kube/made_up.py:3: kai_conformance.reports.model (reports/model.py): layer 2 kube → layer 9 reports",
    ]


def test_the_rule_reads_imports_in_functions_and_for_the_type_checker() -> None:
    made_up = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kai_conformance.fixtures.plugin.case import attach\n"
        "def f():\n"
        "    from kai_conformance.clusters import provision\n"
        "    return provision\n"
    )
    assert violations(imports_of(made_up, "fixtures/waits.py")) == [
        "fixtures/waits.py:3: kai_conformance.fixtures.plugin.case (type-checking only) (fixtures/plugin/case.py): "
        "layer 4 waits → layer 10 plugin",
        "fixtures/waits.py:5: kai_conformance.clusters.provision (clusters/provision.py): layer 4 waits → layer 6 "
        "clusters",
    ]


def test_the_most_specific_path_decides_the_layer() -> None:
    def name(path: str) -> str:
        index = layer_of(path)
        return "none" if index is None else LAYERS[index][0]

    assert name("fixtures/kube/informer.py") == "informers"
    assert name("fixtures/kube/http.py") == "kube"
    assert name("fixtures/kube/kinds.py") == "data and leaves"
    assert name("fixtures/plugin/case.py") == "plugin"
    assert name("fixtures/workspace.py") == "fixtures"
    assert name("tests/conftest.py") == "none"
    # informers import the kube layer, above them; the kube layer importing informers breaks the rule
    upward = "from kai_conformance.fixtures.kube import KubeApi\n"
    downward = "from kai_conformance.fixtures.kube import informer\n"
    assert violations(imports_of(upward, "fixtures/kube/informer.py")) == []
    assert len(violations(imports_of(downward, "fixtures/kube/http.py"))) == 1


def test_an_import_of_no_file_is_an_error_not_a_pass() -> None:
    with pytest.raises(LookupError, match="no file of the repository"):
        imports_of("import kai_conformance.fixtures.nowhere\n", "fixtures/made_up.py")
    with pytest.raises(LookupError, match="relative import"):
        imports_of("from . import waits\n", "fixtures/made_up.py")
