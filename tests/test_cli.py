"""``kai-conformance``, the installed package's way to run the suites: from any directory, with the settings a
clone gets from pyproject.toml, the markers declared once, and no generic module name on ``sys.path``.

(.ci/run also builds the wheel, installs it and checks the same from outside the repository.)
"""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kai_conformance.fixtures import cli
from kai_conformance.fixtures.plugin.markers import MARKERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency on Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent

#: Run by the subprocesses below: the console script's command line, plus a probe plugin that reports what it saw.
#: ``suites`` is not probed: in a development (editable) install pytest names the suite modules ``suites.*`` in
#: sys.modules (never on sys.path); the wheel that .ci/run installs names them ``kai_conformance.suites.*``.
PROBE = """
import importlib.util, json, sys
import pytest
from pathlib import Path
from kai_conformance.fixtures import cli

class Probe:
    def pytest_collection_finish(self, session):
        Path("probe.json").write_text(json.dumps({
            "nodeids": [item.nodeid for item in session.items],
            "sys_path": sys.path,
            "importable": [n for n in ("fixtures", "clusters", "reports")
                           if n in sys.modules or importlib.util.find_spec(n)],
            "conftests": sorted({m for m in sys.modules if m.endswith("conftest")}),
        }))

sys.exit(pytest.main(cli.pytest_args(sys.argv[1:], Path.cwd()), plugins=[Probe()]))
"""


def clone_ini() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def installed_ini() -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(cli.INI)
    return parser["pytest"]


def test_an_installed_run_has_the_settings_of_a_clone_run() -> None:
    clone, installed = clone_ini(), installed_ini()
    assert set(installed) == set(clone) - {"testpaths", "pythonpath"}  # what only a clone needs
    assert installed["minversion"] == clone["minversion"]
    assert installed["addopts"].split() == clone["addopts"]
    assert installed["xfail_strict"] == str(clone["xfail_strict"]).lower()
    assert installed["filterwarnings"].split() == clone["filterwarnings"]


def test_markers_are_declared_once_by_the_plugin(pytestconfig: pytest.Config) -> None:
    assert "markers" not in clone_ini() and "markers" not in installed_ini()
    registered = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert set(MARKERS) <= registered


def test_a_node_id_as_reported_selects_that_case_of_the_packaged_suites(tmp_path: Path) -> None:
    every_case = cli.pytest_args(["-m", "gang"], tmp_path)
    assert every_case[-3:] == ["-m", "gang", str(cli.SUITES_DIR)]
    one = "suites/test_gang.py::test_a_gang_that_cannot_fit_binds_no_pod"
    assert cli.pytest_args([one], tmp_path)[-1] == str(cli.PACKAGE_DIR / one)
    # not a packaged file: left as given, and the suites still run
    assert cli.pytest_args(["--report-dir", "suites/out"], tmp_path)[-3:] == ["--report-dir", "suites/out",
                                                                              str(cli.SUITES_DIR)]  # fmt: skip
    assert f"--override-ini=cache_dir={tmp_path / '.pytest_cache'}" in every_case
    # without the cache plugin its setting would be unknown (--strict-config)
    assert not [a for a in cli.pytest_args(["-p", "no:cacheprovider"], tmp_path) if "cache_dir" in a]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def clone_node_ids() -> list[str]:
    """``pytest suites --collect-only`` in the clone."""
    result = subprocess.run([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider"],
                            cwd=REPO, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_from_outside_the_repository_it_collects_the_cases_of_a_clone_run(
    tmp_path: Path, clone_node_ids: list[str]
) -> None:
    result = run_cli(["--collect-only", "-q"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert probe["nodeids"] == clone_node_ids  # the same ids: runs of both kinds merge into one report
    assert any(name.endswith("suites.conftest") for name in probe["conftests"])  # the suites' fixtures
    assert probe["importable"] == []  # nothing of the repository's layout became a top-level name
    assert str(REPO) not in probe["sys_path"] and str(cli.PACKAGE_DIR) not in probe["sys_path"]


def test_from_outside_the_repository_it_renders_every_case_where_it_runs(
    tmp_path: Path, clone_node_ids: list[str]
) -> None:
    result = run_cli(["--render-manifests=rendered", "-q"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rendered = sorted(p.name for p in (tmp_path / "rendered").glob("*.yaml"))
    assert len(rendered) == len(clone_node_ids) + 1 and "_stack.yaml" in rendered
    assert f"{len(clone_node_ids)} case(s) rendered" in result.stdout


def test_an_unknown_marker_is_refused_against_the_plugin_s_markers(tmp_path: Path) -> None:
    result = run_cli(["-m", "gang and not nosuch", "--collect-only"], tmp_path)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "names an unknown marker: nosuch" in result.stderr
    assert ", ".join(MARKERS) in result.stderr


def test_every_folder_of_the_package_is_in_the_distribution() -> None:
    """A folder missing from pyproject.toml's packages would be missing from the wheel, silently. (Folders of
    tracked files only: reports/output/ is a run's, ignored by git.) The package's folders are src/kai_conformance/'s
    links, each to the repository's folder of its name."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"": "src"}
    package = REPO / "src" / "kai_conformance"
    links = sorted(p.name for p in package.iterdir() if p.is_symlink())
    assert links == ["clusters", "fixtures", "reports", "suites"]
    assert all((package / link).readlink() == Path("..", "..", link) for link in links)  # relative: any clone
    tracked = subprocess.run(["git", "ls-files", *links], cwd=REPO, capture_output=True, text=True, check=True)
    folders = {"kai_conformance." + ".".join(Path(file).parent.parts) for file in tracked.stdout.splitlines()}
    assert folders | {"kai_conformance"} == set(setuptools["packages"])


def test_version_names_the_suite_and_what_a_default_run_tests(capsys: pytest.CaptureFixture[str]) -> None:
    from kai_conformance.fixtures.configuration.resolution import CATALOG

    assert cli.main(["--version"]) == 0
    printed = capsys.readouterr().out
    default = CATALOG.combination(CATALOG.defaults["combination"])
    first, tested, *_ = printed.splitlines()
    assert first.startswith("kai-conformance 0.") and f"(pytest {pytest.__version__})" in first
    for version in (default.kai.version, default.trainer.version, default.jobset.version):
        assert version in tested
    assert f"Kubernetes {CATALOG.defaults['kubernetes']}" in printed


def help_text(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    result = subprocess.run([sys.executable, *command, "--help", "-p", "no:cacheprovider"], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("command", [["-c", "import sys; from kai_conformance.fixtures import cli; "
                                      "sys.exit(cli.main(sys.argv[1:]))"], ["-m", "pytest", "suites"]])  # fmt: skip
def test_help_speaks_as_kai_conformance_with_the_suite_s_options_first_grouped_by_task(
    command: list[str], tmp_path: Path
) -> None:
    text = help_text(command, REPO if "suites" in command else tmp_path)
    assert text.startswith("usage: kai-conformance ") and "pytest.main()" not in text
    headings = [
        line.rstrip(":") for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")
    ]
    ours = [h for h in headings if h.startswith("kai-conformance")]
    assert headings[1 : 1 + len(ours)] == ours, headings  # right after the positional arguments
    assert ours == [
        "kai-conformance: choose the cluster",
        "kai-conformance: choose versions",
        "kai-conformance: install from sources (a PR's charts, manifests and images)",
        "kai-conformance: offline runs (air-gapped: nothing fetched)",
        "kai-conformance: outputs",
        "kai-conformance: run",
        "kai-conformance: chaos (opt-in area: -m chaos)",
    ]
    sections, current = {}, ""
    for line in text.splitlines():
        if line.rstrip(":") in headings:
            current = line.rstrip(":")
        sections[current] = sections.get(current, "") + line + "\n"
    offline, outputs = sections[ours[3]], sections[ours[4]]
    assert all(o in offline for o in ("--offline", "--load-image", "--kwok-manifests"))
    assert all(o in outputs for o in ("--report-dir", "--render-manifests"))
    versions = " ".join(sections[ours[1]].split())
    assert "--kai-version=VERSION KAI Scheduler version (default: v" in versions
    assert "takes the expectations of the nearest lower known version" in versions
