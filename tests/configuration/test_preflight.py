"""Prerequisites: every missing piece named with its fix, in one message, within seconds, creating nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.topology import available_topologies
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration import preflight
from tests.fakes.kube import FakeKube

REPO = Path(__file__).resolve().parents[2]
CATALOG = Catalog.load()


def completed(code: int, out: str = "", err: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], code, out, err)


def test_missing_docker_names_the_install_fix() -> None:
    (problem,) = preflight.check_docker(find=lambda tool: None)
    assert problem.what.startswith("docker is not installed")
    assert "https://docs.docker.com/engine/install/" in problem.fix


def test_docker_without_engine_names_the_daemon() -> None:
    answer = completed(1, err="Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")
    (problem,) = preflight.check_docker(run=lambda argv, timeout: answer, find=lambda tool: "/usr/bin/docker")
    assert problem.what == (
        "the Docker engine is not reachable: Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
    )
    assert "start the Docker daemon" in problem.fix


def test_hanging_docker_is_reported_not_waited_for() -> None:
    def hang(argv, timeout):
        raise subprocess.TimeoutExpired(argv, timeout)

    (problem,) = preflight.check_docker(run=hang, find=lambda tool: "/usr/bin/docker")
    assert "did not answer" in problem.what


def test_working_docker_is_no_problem() -> None:
    assert preflight.check_docker(run=lambda a, t: completed(0, "28.2.2\n"), find=lambda tool: "/d") == []


def test_each_missing_tool_gets_a_fetch_and_an_install_hint() -> None:
    problems = preflight.check_tools(("kind", "kubectl", "helm"), find=lambda tool: None if tool != "kubectl" else "/k")
    assert [p.what for p in problems] == ["kind is not on PATH", "helm is not on PATH"]
    assert "python -m kai_conformance.clusters.fetch_tools kind" in problems[0].fix
    assert "https://helm.sh/docs/intro/install/" in problems[1].fix


def test_existing_cluster_bad_kubeconfig_and_unreachable_server() -> None:
    def bad(kubeconfig, context):
        raise errors.UsageError("cannot load kubeconfig /x: [Errno 2] No such file")

    (problem,) = preflight.check_existing_cluster("/x", None, connect=bad)
    assert "the kubeconfig cannot be used: cannot load kubeconfig /x" in problem.what
    assert "--kubeconfig=PATH" in problem.fix

    down = FakeKube()
    down.fail("version", 0, message="connection refused")
    (problem,) = preflight.check_existing_cluster("/k", None, connect=lambda k, c: down)
    assert problem.what.startswith("the cluster in /k is unreachable") and "connection refused" in problem.what
    assert preflight.check_existing_cluster("/k", None, connect=lambda k, c: FakeKube()) == []


def test_problems_are_numbered_with_their_fixes() -> None:
    text = preflight.format_problems([preflight.Problem("a broke", "do x"), preflight.Problem("b broke", "do y")])
    assert text.splitlines()[:5] == [
        "kai-conformance cannot start (2 problems):",
        "  1. a broke",
        "     fix: do x",
        "  2. b broke",
        "     fix: do y",
    ]
    # read by kai-conformance users too, who have no `pytest suites`: the footer names the option, not a program
    assert "pytest suites" not in text.splitlines()[-1] and "--render-manifests=DIR" in text.splitlines()[-1]


def test_marker_names_skip_the_operators_of_the_expression() -> None:
    assert preflight.marker_names("not slow") == ["slow"]
    assert preflight.marker_names("gang and not serial") == ["gang", "serial"]
    assert preflight.marker_names("(gang or queue) and not (slow or gang)") == ["gang", "queue", "slow"]
    assert preflight.marker_names("notslow or android") == ["notslow", "android"]  # operators are whole words
    assert preflight.marker_names("device(kind='a b', n=1) and not slow") == ["device", "slow"]
    assert preflight.marker_names("") == []


def test_an_unknown_marker_is_a_problem_with_the_declared_ones_as_fix() -> None:
    known, declared = ["gang", "slow", "skip"], ["gang", "slow"]
    assert preflight.check_marker_expression("gang and not slow", known, declared) == []
    assert preflight.check_marker_expression("", known, declared) == []
    (problem,) = preflight.check_marker_expression("gang and not nosuch", known, declared)
    assert problem.what == "-m 'gang and not nosuch' names an unknown marker: nosuch (no case carries it)"
    assert "gang, slow" in problem.fix and "skip" not in problem.fix


def run_suite(args: list[str], tmp_path: Path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, "KAI_CONFORMANCE_TOOLS_BIN": str(tmp_path / "no-tools")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "--report-dir", str(tmp_path / "r"), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def numbered(output: str) -> list[tuple[str, str]]:
    """(problem, fix) pairs of the preflight message."""
    lines = output.splitlines()
    return [
        (line.strip().split(". ", 1)[1], lines[i + 1].strip().removeprefix("fix: "))
        for i, line in enumerate(lines)
        if line.startswith("  ") and line.strip()[:1].isdigit() and ". " in line
    ]


def test_pytest_suites_without_any_tool_stops_with_one_message(tmp_path: Path) -> None:
    """End to end: no docker/kind/kubectl/helm, an unknown version, a bad timeout scale and an unknown marker →
    one message naming each with its own fix, exit 4, in seconds; nothing created, the last run's state kept."""
    last_run = tmp_path / "r" / ".state"
    last_run.mkdir(parents=True)
    (last_run / "cluster.json").write_text("{}")
    started = time.monotonic()
    result = run_suite(
        ["--kai-version", "v0.1.0", "--timeout-scale", "-1", "-m", "gang and not nosuch"], tmp_path, path=str(tmp_path)
    )
    assert time.monotonic() - started < 20
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "kai-conformance cannot start (7 problems):" in output
    problems = numbered(output)
    starts = ["docker is not installed", "kind is not on PATH", "kubectl is not on PATH", "helm is not on PATH",
              "kai v0.1.0 is older than the oldest version", "--timeout-scale must be positive",
              "-m 'gang and not nosuch' names an unknown marker: nosuch"]  # fmt: skip  # docker first: we cannot fetch it
    assert len(problems) == len(starts)
    assert all(what.startswith(start) for (what, _), start in zip(problems, starts, strict=True)), problems
    version_fix, scale_fix, marker_fix = (fix for _, fix in problems[-3:])
    assert "--kai-version" in version_fix
    assert "factor above 0" in scale_fix and "versions.yaml" not in scale_fix
    assert (
        "gang, queue, labels, preemption, podgrouper, elastic, placement, topology, sharing, fairness, consolidation, "
        "lifecycle, runtimes, scale, chaos, ai_conformance, control, serial, shared_workers, disruptive, slow, kubelet"
        in marker_fix
    )
    assert "Nothing was created." in output
    assert sorted(p.relative_to(tmp_path / "r") for p in (tmp_path / "r").rglob("*")) == [
        Path(".state"), Path(".state/cluster.json"),
    ]  # fmt: skip


def test_render_mode_names_every_bad_option_in_one_message(tmp_path: Path) -> None:
    """A file where the render directory should go, and several bad options: one message, each with its fix."""
    target = tmp_path / "taken"
    target.write_text("not a directory")
    result = run_suite(
        [f"--render-manifests={target}", "--timeout-scale", "-1", "--topology", "nope", "--versions", "nope",
         "-m", "nosuch"], tmp_path, path=os.environ["PATH"],
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    problems = dict(numbered(output))
    assert list(problems) == [
        "unknown version combination 'nope'. Known combinations: "
        + ", ".join(c.name for c in CATALOG.combinations)
        + " (clusters/versions.yaml)",
        f"unknown topology 'nope'; known: {', '.join(available_topologies())} (or a path to a topology YAML file)",
        "--timeout-scale must be positive, got -1.0",
        f"--render-manifests {target} is a file, not a directory",
        "-m 'nosuch' names an unknown marker: nosuch (no case carries it)",
    ]
    fixes = list(problems.values())
    assert "--versions kai-v" in fixes[0] and "--topology" in fixes[1] and "factor above 0" in fixes[2]
    assert (
        fixes[3]
        == "pass a directory you can write to (created if missing), e.g. --render-manifests=reports/output/rendered"
    )
    assert output.rstrip().endswith("Nothing was created.")  # rendering needs no tools: no hint about them
    assert target.read_text() == "not a directory"


def test_pytest_suites_on_an_unreachable_existing_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    report_file = tmp_path / "report"
    report_file.write_text("")
    result = run_suite(
        ["--cluster", "existing", f"--kubeconfig={kubeconfig}", f"--report-dir={report_file}"],
        tmp_path, path=os.environ["PATH"],
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "INTERNALERROR" not in output
    (unreachable, report_dir) = numbered(output)
    assert unreachable[0].startswith(f"the cluster in {kubeconfig} is unreachable")
    assert report_dir == (
        f"--report-dir {report_file} is a file, not a directory",
        "pass a directory you can write to (created if missing), e.g. --report-dir=reports/output/latest",
    )


@pytest.mark.parametrize(
    ("expression", "refused"),
    [
        ("scale", False),
        ("scale and not control", False),
        ("scale and (gang or not gang)", False),
        ("chaos", False),
        ("scale or chaos", False),
        (None, True),
        ("chaos or gang", True),
        ("not slow", True),
        ("gang", True),
        ("scale or gang", True),
        ("not scale", True),
    ],
)
def test_fake_nodes_are_for_the_scale_and_chaos_areas_alone(expression: str | None, refused: bool) -> None:
    problems = preflight.check_fake_nodes_selection(200, expression)
    assert bool(problems) is refused
    if refused:
        (problem,) = problems
        assert "200 fake node(s)" in problem.what and "areas other than scale and chaos" in problem.what
        assert "-m scale" in problem.fix and "--fake-nodes 0" in problem.fix
    assert preflight.check_fake_nodes_selection(0, expression) == []


def cgroup_v1_docker(directory: Path) -> Path:
    """A docker on PATH whose engine answers and runs cgroup v1 (the host the cgroup problem is for)."""
    directory.mkdir()
    docker = directory / "docker"
    docker.write_text(
        '#!/bin/sh\ncase "$*" in *CgroupVersion*) echo 1 ;; *ServerVersion*) echo 28.2.2 ;; *) exit 1 ;; esac\n'
    )
    docker.chmod(0o755)
    return directory


def test_every_mistake_at_once_and_the_cgroup_v1_problem_stays_among_them(tmp_path: Path) -> None:
    """Bad options, input files and an output directory that cannot be written, on a cgroup v1 engine: one
    message names them all (the cgroup problem does not wait for the options to resolve), and no traceback."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    bin_dir = cgroup_v1_docker(tmp_path / "bin")
    result = run_suite(
        ["--chaos-budget", "xyz", "-m", "chaos", f"--chaos-replay={empty}", "--kai-chart=/nonexistent", "--kai-set",
         "garbage", "--load-image=", "--node-image", "bad image ref!!", "--report-dir=/proc/forbidden",
         "--versions", "nope"], tmp_path, path=str(bin_dir),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    whats = [what for what, fix in numbered(output) if fix]
    starts = ["kind is not on PATH", "kubectl is not on PATH", "helm is not on PATH", "the Docker engine runs cgroup v1",
              "--load-image '' is empty", "unknown version combination 'nope'",
              "--node-image 'bad image ref!!' is not an image reference", "--kai-chart /nonexistent: no such directory", "--kai-set 'garbage'",
              "--chaos-budget 'xyz'", f"--chaos-replay {empty}: the file is empty",
              "--report-dir /proc/forbidden cannot be written"]  # fmt: skip
    assert len(whats) == len(starts), whats
    assert all(what.startswith(start) for what, start in zip(whats, starts, strict=True)), whats


def test_render_mode_refuses_what_the_run_refuses_and_says_what_it_assumed(tmp_path: Path) -> None:
    bad = run_suite(
        [f"--render-manifests={tmp_path / 'out'}", "--kai-set", "garbage", "--chaos-replay=/nonexistent",
         "--node-image", "NOPE!"], tmp_path, path=os.environ["PATH"],
    )  # fmt: skip
    output = bad.stdout + bad.stderr
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert [what.split(" ", 1)[0] for what, _ in numbered(output)] == ["--node-image", "--kai-set", "--chaos-replay"]
    assert not (tmp_path / "out").exists()
    good = run_suite(
        [f"--render-manifests={tmp_path / 'out'}", "--kai-version", "v0.18.1", "suites/test_gang.py", "-q"],
        tmp_path, path=os.environ["PATH"],
    )  # fmt: skip
    output = good.stdout + good.stderr
    assert good.returncode == 0, output
    assert "KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0" in output


def test_a_wrong_choice_is_listed_with_the_other_mistakes_in_both_modes(tmp_path: Path) -> None:
    """``--cluster foo`` used to stop in argparse alone; now it is one problem among the others, run or render."""
    args = ["--cluster", "foo", "--install", "x", "--kai-set", "garbage", "--chaos-budget", "xyz"]
    for mode in ([], [f"--render-manifests={tmp_path / 'out'}"]):
        result = run_suite([*args, *mode], tmp_path, path=str(tmp_path))
        output = result.stdout + result.stderr
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
        assert [what.split(" ", 2)[:2] for what, _ in numbered(output)] == [
            ["--cluster", "'foo'"], ["--install", "'x'"], ["--kai-set", "'garbage':"], ["--chaos-budget", "'xyz':"],
        ], output  # fmt: skip  # no docker/kind problem: which cluster's prerequisites apply is not known yet
        assert "invalid choice" not in output
    assert not (tmp_path / "out").exists()


def test_an_empty_value_is_refused_even_where_it_would_switch_render_mode_off(tmp_path: Path) -> None:
    """``--render-manifests "$UNSET"`` must not start a real run, nor ``--kai-version ""`` test the default."""
    result = run_suite(
        ["--render-manifests=", "--kai-version=", "--kai-set=", "--timeout-scale", "nan"], tmp_path, path=str(tmp_path)
    )
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    whats = [what for what, _ in numbered(output)]
    assert [w for w in whats if " is not on PATH" not in w and "docker" not in w] == [
        "--kai-version '' is empty (given an empty value)", "--kai-set '' is empty (given an empty value)",
        "--render-manifests '' is empty (given an empty value)", "--timeout-scale 'nan' is not a number",
    ], output  # fmt: skip
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("option", "expression"), [("-m", "gang and"), ("-m", "(gang"), ("-k", "a or or b")])
def test_an_expression_pytest_cannot_parse_is_a_problem(option: str, expression: str) -> None:
    (problem,) = preflight.check_expression_syntax(option, expression)
    assert problem.what.startswith(f"{option} {expression!r} is not a selection expression (at column ")
    assert f'{option} "gang and not slow"' in problem.fix
    assert preflight.check_expression_syntax(option, "gang and not (slow or serial)") == []
    assert preflight.check_expression_syntax(option, None) == []


def test_render_mode_names_a_broken_expression_with_the_other_mistakes(tmp_path: Path) -> None:
    """pytest would stop on it only after collection, alone, after preflight let the run start."""
    result = run_suite(
        [f"--render-manifests={tmp_path / 'out'}", "-m", "gang and", "-k", "(x", "--install", "sometimes"],
        tmp_path, path=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert [what.split(" ", 1)[0] for what, _ in numbered(output)] == ["--install", "-m", "-k"], output
    assert "Wrong expression" not in output and not (tmp_path / "out").exists()


def test_render_mode_refuses_a_kubeconfig_the_run_could_not_use(tmp_path: Path) -> None:
    """Not YAML, or without the --context: the run's connection probe would refuse it, so render mode does too."""
    (tmp_path / "kubeconfig").write_text("just text\n")
    result = run_suite(
        [f"--render-manifests={tmp_path / 'out'}", "--cluster", "existing", f"--kubeconfig={tmp_path / 'kubeconfig'}"],
        tmp_path, path=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert numbered(output) == [(
        f"--kubeconfig {tmp_path / 'kubeconfig'} is YAML but not a mapping of keys to values",
        "pass --kubeconfig=PATH of an existing kubeconfig file, or drop it to use $KUBECONFIG or ~/.kube/config",
    )]  # fmt: skip


def test_an_image_to_load_must_be_in_the_local_docker() -> None:
    problems = preflight.check_load_images(["here:1", "gone:2", "gone:2"], present=lambda image: image == "here:1")
    assert [p.what for p in problems] == [
        "--load-image gone:2 is not in the local Docker (kind loads it from there into the nodes)"
    ]
    assert "docker pull gone:2" in problems[0].fix


def test_pytest_suites_names_an_image_to_load_that_docker_does_not_have(tmp_path: Path) -> None:
    """A docker that answers but has no such image: named before kind would make the cluster and fail to load it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text('#!/bin/sh\ncase "$*" in *CgroupVersion*) echo 2 ;; *ServerVersion*) echo 28.2.2 ;; '
                      '*"image inspect"*here:1) echo sha256:1 ;; *) exit 1 ;; esac\n')  # fmt: skip
    docker.chmod(0o755)
    result = run_suite(["--load-image=here:1", "--load-image=gone:2"], tmp_path, path=str(bin_dir))
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    whats = [what for what, _ in numbered(output)]
    assert "--load-image gone:2 is not in the local Docker (kind loads it from there into the nodes)" in whats, output
    assert not any("here:1" in what for what in whats)


def test_a_suite_file_that_does_not_exist_is_named_with_the_other_mistakes(tmp_path: Path) -> None:
    (problem,) = preflight.check_paths(["suites", "suites/nope.py::case", "suites/test_gang.py::x"], REPO)
    assert problem.what == "suites/nope.py::case: no such file or directory"
    assert "suites/test_gang.py" in problem.fix
    result = run_suite([f"--render-manifests={tmp_path / 'out'}", "suites/nope.py", "--install", "x"], tmp_path,
                       path=str(tmp_path))  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert [what for what, _ in numbered(output)] == [
        "--install 'x' is not one of its choices (auto, always, never)", "suites/nope.py: no such file or directory",
    ], output  # fmt: skip
