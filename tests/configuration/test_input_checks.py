"""Every value and input file an option names is checked before anything is created (fixtures/configuration/input_checks.py,
fixtures/configuration/chaos_options.py): each class of mistake is a problem with its fix, and sound values pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kai_conformance.fixtures.configuration import chaos_options, input_checks
from kai_conformance.fixtures.configuration.resolution import kubernetes_minor_guess


@pytest.mark.parametrize(
    "image",
    ["busybox", "busybox:1.37", "docker.io/library/busybox:1.37", "localhost:5000/kai/scheduler:v0.17.0-pr42",
     "ghcr.io/nvidia/kai-scheduler/scheduler@sha256:" + "a" * 64, "kindest/node:v1.35.0@sha256:" + "0" * 64,
     "[::1]:5000/image:tag", "registry.example.com/a__b/c-d.e:x_Y-1.2"],
)  # fmt: skip
def test_image_references_docker_accepts_pass(image: str) -> None:
    assert input_checks.image_reference("--load-image", image) == []


@pytest.mark.parametrize(
    ("image", "why"),
    [("", "is empty"), ("  ", "is empty"), ("bad image ref!!", "is not an image reference"),
     ("Busybox:1.37", "repository names are lowercase"), ("busybox:", "is not an image reference"),
     ("busybox:tag with space", "is not an image reference"), ("-leading/dash", "is not an image reference"),
     ("repo@sha256:short", "is not an image reference"), ("a/" * 130 + "b", "is not an image reference"),
     ("https://registry/image:1", "is not an image reference")],
)  # fmt: skip
def test_image_references_docker_refuses_are_problems_with_the_grammar_as_fix(image: str, why: str) -> None:
    (problem,) = input_checks.image_reference("--node-image", image)
    assert problem.what == f"--node-image {image!r} {why}" or why in problem.what
    assert "[REGISTRY/]REPOSITORY[:TAG][@DIGEST]" in problem.fix


def test_every_load_image_is_checked() -> None:
    problems = input_checks.image_references("--load-image", ["ok:1", "", "NO"])
    assert [p.what for p in problems] == ["--load-image '' is empty",
                                          "--load-image 'NO' is not an image reference (repository names are lowercase)"]  # fmt: skip


@pytest.mark.parametrize(
    "values",
    [["a=1"], ["global.gpuSharing=true"], ["a=1,b.c=2"], ["list={a,b,c}"], ["a[0].b=x"], ["escaped\\.dot=1"],
     ["a=x\\,y"], ["empty="]],
)  # fmt: skip
def test_helm_set_syntax_helm_accepts_passes(values: list[str]) -> None:
    assert input_checks.helm_set("--kai-set", values) == []


@pytest.mark.parametrize(
    ("value", "why"),
    [("garbage", "'garbage' has no '=VALUE'"), ("a=1,b", "'b' has no '=VALUE'"), ("=1", "has no key before '='"),
     ("a..b=1", "malformed key"), ("a[x]=1", "malformed key"), ("a=1,", "'' has no '=VALUE'")],
)  # fmt: skip
def test_helm_set_mistakes_are_problems(value: str, why: str) -> None:
    (problem,) = input_checks.helm_set("--trainer-set", [value])
    assert problem.what.startswith(f"--trainer-set {value!r}: ") and why in problem.what
    assert "KEY=VALUE" in problem.fix


def test_charts_are_directories_with_chart_yaml_packages_or_references(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kai-scheduler\nversion: 0.0.0\n")
    package = tmp_path / "kai-scheduler-0.0.0.tgz"
    package.write_bytes(b"\x1f\x8b")
    for ref in (str(chart), str(package), "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler", "https://x/c.tgz"):
        assert input_checks.chart("--kai-chart", ref, "deployments/kai-scheduler") == [], ref
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Chart.yaml").write_text("name: [")
    values = tmp_path / "values.yaml"
    values.write_text("a: 1\n")
    cases = {
        "/nonexistent": "no such directory, and not an oci:// or http(s) reference",
        str(empty): "the directory has no Chart.yaml",
        str(broken): "is not valid YAML",
        str(values): "is a file, not a chart directory",
        "oci://Bad Ref": "is not an OCI reference",
    }
    for ref, why in cases.items():
        (problem,) = input_checks.chart("--kai-chart", ref, "deployments/kai-scheduler")
        assert why in problem.what, problem
        assert "Chart.yaml" in problem.fix and "deployments/kai-scheduler" in problem.fix


def test_values_and_manifests_files_must_exist_and_parse(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("a: 1\n")
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n")
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just words\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    whats = [p.what for p in input_checks.yaml_files("--kai-values", [str(good), str(empty), str(scalar),
                                                                      str(broken), "/nonexistent", str(tmp_path)], "f")]  # fmt: skip
    assert whats == [
        f"--kai-values {empty} is empty",
        f"--kai-values {scalar} is YAML but not a mapping of keys to values",
        f"--kai-values {broken} is not valid YAML (line 2)",
        "--kai-values /nonexistent: no such file",
        f"--kai-values {tmp_path}: a directory, not a file",
    ]
    assert input_checks.manifests("--trainer-manifests", str(good), urls=False) == []
    assert input_checks.manifests("--jobset-manifests", "https://x/manifests.yaml", urls=True) == []
    (url,) = input_checks.manifests("--trainer-manifests", "https://x/m.yaml", urls=False)
    assert "no such file or directory" in url.what
    (no_kustomization,) = input_checks.manifests("--trainer-manifests", str(tmp_path), urls=False)
    assert "has no kustomization.yaml" in no_kustomization.what
    (kustomize := tmp_path / "k").mkdir()
    (kustomize / "kustomization.yaml").write_text("resources: []\n")
    assert input_checks.manifests("--trainer-manifests", str(kustomize), urls=False) == []


@pytest.mark.parametrize("name", ["Kai", "kai_conformance", "-kai", "kai-", "a" * 51, ""])
def test_kind_cluster_names_kind_refuses(name: str) -> None:
    (problem,) = input_checks.kind_cluster_name("--cluster-name", name)
    assert "is not a kind cluster name" in problem.what


def test_registry_and_tag_values() -> None:
    assert input_checks.registry("--kai-image-registry", "localhost:5000/kai") == []
    assert "is not a registry" in input_checks.registry("--kai-image-registry", "https://ghcr.io")[0].what
    assert input_checks.tag("--kai-image-tag", "v0.10.0-pr42") == []
    assert "is not an image tag" in input_checks.tag("--kai-image-tag", "v1:2")[0].what


def test_an_output_directory_must_be_writable_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    assert input_checks.writable_directory("--report-dir", tmp_path / "new" / "deeper", "x") == []
    assert sorted(tmp_path.iterdir()) == []  # the probe created and removed its directory
    (proc,) = input_checks.writable_directory("--report-dir", Path("/proc/forbidden"), "reports/output/latest")
    assert proc.what.startswith("--report-dir /proc/forbidden cannot be written: nothing can be created in /proc")
    assert proc.fix == "pass a directory you can write to (created if missing), e.g. --report-dir=reports/output/latest"
    blocker = tmp_path / "file"
    blocker.write_text("")
    (through_file,) = input_checks.writable_directory("--report-dir", blocker / "sub", "x")
    assert (
        through_file.what == f"--report-dir {blocker / 'sub'} cannot be created: {blocker} is a file, not a directory"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a directory without write permission")
def test_a_directory_without_write_permission_is_a_problem(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        (problem,) = input_checks.writable_directory("--report-dir", locked / "out", "x")
        assert "cannot be written" in problem.what
    finally:
        locked.chmod(0o700)


def options(**given: object):
    values = {"--chaos-budget": "10m", **given}
    return values.get


def test_chaos_options_are_checked_whether_or_not_the_area_runs(tmp_path: Path) -> None:
    assert chaos_options.chaos_problems(options()) == []
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n")
    other = tmp_path / "other.yaml"
    other.write_text("format: something-else\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x7fELF\xe0\x80\x00")
    whats = [
        p.what
        for given in (
            {"--chaos-budget": "xyz"},
            {"--chaos-budget": "0s"},
            {"--chaos-replay": "/nonexistent"},
            {"--chaos-replay": str(empty)},
            {"--chaos-replay": str(other)},
            {"--chaos-replay": str(tmp_path)},
            {"--chaos-replay": str(binary)},
            {"--chaos-components": "scheduler,nosuch"},
            {"--chaos-components": ",,"},
            {"--chaos-restart-command": "'unclosed"},
            {"--chaos-restart-command": "no-such-program-x {component}"},
            {"--chaos-restart-command": "  "},
        )
        for p in chaos_options.chaos_problems(options(**given))
    ]
    assert whats == [
        "--chaos-budget 'xyz': give a positive duration such as 90s, 10m or 1h",
        "--chaos-budget '0s': give a positive duration such as 90s, 10m or 1h",
        "--chaos-replay /nonexistent: no such file",
        f"--chaos-replay {empty}: the file is empty",
        f"--chaos-replay {other}: not a chaos reproducer (format 'something-else', expected kai-conformance/chaos-reproducer/v1)",
        f"--chaos-replay {tmp_path}: a directory, not a file",
        f"--chaos-replay {binary}: not a text file (a reproducer is YAML)",
        "--chaos-components: unknown component(s) nosuch; known: scheduler, binder, podgrouper, queuecontroller, "
        "podgroupcontroller, jobset, trainer",
        "--chaos-components ',,' names no component",
        '--chaos-restart-command "\'unclosed" cannot be split into words (No closing quotation)',
        "--chaos-restart-command 'no-such-program-x {component}' runs no-such-program-x, which is not on PATH and no "
        "executable file",
        "--chaos-restart-command '  ' is empty",
    ]
    several = chaos_options.chaos_problems(options(**{"--chaos-budget": "xyz", "--chaos-replay": "/nonexistent"}))
    assert len(several) == 2 and all(p.fix for p in several)


def test_the_kubernetes_minor_is_known_even_when_other_options_are_bad() -> None:
    """The cgroup v1 check needs the minor; it must not wait for every other option to resolve."""
    assert kubernetes_minor_guess(options(**{"--k8s-version": "v1.35.2"})) == "1.35"
    assert kubernetes_minor_guess(options(**{"--node-image": "kindest/node:v1.34.1"})) == "1.34"
    assert kubernetes_minor_guess(options()) is not None
    assert kubernetes_minor_guess(options(**{"--k8s-version": "latest"})) is None


def test_numbers_that_do_not_parse_are_named_together_with_their_fix(tmp_path: Path) -> None:
    from kai_conformance.fixtures.configuration.resolution import resolve_settings
    from tests.kwok.test_fake_nodes import Options

    parse_int = input_checks.lenient(int)
    assert parse_int("12") == 12 and isinstance(parse_int("abc"), input_checks.NotANumber)
    given = {"--fake-nodes": parse_int("abc"), "--slices": parse_int("1.5"),
             "--timeout-scale": input_checks.lenient(float)("x"), "--topology": "nope"}  # fmt: skip
    settings, problems = resolve_settings(Options(tmp_path, **given))  # type: ignore[arg-type]
    assert settings is None
    assert [p.what for p in problems][:4] == ["--fake-nodes 'abc' is not a number", "--slices '1.5' is not a number",
                                              "--timeout-scale 'x' is not a number", "unknown topology 'nope'; known: "
                                              "pr-gate, release, scale-100, scale-500 (or a path to a topology YAML file)"]  # fmt: skip
    assert "--fake-nodes with a whole number" in problems[0].fix


class DeclaringParser:
    """Stands in for pytest's parser: every suite option's declaration (fixtures/plugin/options.py, chaos_options.py)."""

    def __init__(self) -> None:
        self.declared: dict[str, dict[str, object]] = {}

    def getgroup(self, name: str) -> DeclaringParser:
        return self

    def addoption(self, *names: str, **attributes: object) -> None:
        self.declared[names[0]] = attributes


def declared_options() -> dict[str, dict[str, object]]:
    from types import SimpleNamespace

    from kai_conformance.fixtures.plugin import options

    parser = DeclaringParser()
    options.pytest_addoption(parser, SimpleNamespace(has_plugin=lambda name: False))  # type: ignore[arg-type]
    return parser.declared


def test_no_option_stops_argparse_at_its_first_wrong_value() -> None:
    """argparse's ``choices=`` and a ``type=`` that raises stop the run at the first wrong value, alone and without
    a fix: every option parses leniently, so preflight names each wrong value with the others."""
    declared = declared_options()
    assert not [name for name, attributes in declared.items() if "choices" in attributes]
    for attributes in declared.values():
        convert = attributes.get("type")
        if callable(convert):
            for text in ("", "garbage", "-1", "1e999", "nan", "\x00"):
                convert(text)  # never raises: a wrong value is kept for preflight
    assert declared["--cluster"]["metavar"] == "{kind,existing}"  # --help still lists the choices
    assert declared["--install"]["metavar"] == "{auto,always,never}"


def test_a_value_that_is_none_of_the_choices_is_named_with_the_choices_as_fix() -> None:
    parse = input_checks.one_of("kind", "existing")
    assert parse("kind") == "kind" and not isinstance(parse("kind"), input_checks.NotAChoice)
    wrong = parse("Kind")
    assert isinstance(wrong, input_checks.NotAChoice)
    given = {"--cluster": wrong, "--install": input_checks.one_of("auto", "never")("auto")}
    (problem,) = input_checks.choices(given.get, ["--cluster", "--install"])
    assert problem.what == "--cluster 'Kind' is not one of its choices (kind, existing)"
    assert problem.fix == "pass --cluster with one of: kind, existing, e.g. --cluster kind"


def test_an_empty_value_is_a_problem_not_the_default() -> None:
    given = {"--kai-version": "", "--kai-set": ["a=1", ""], "--topology": "pr-gate", "--load-image": []}
    problems = input_checks.empty_values(given.get, list(given))
    assert [p.what for p in problems] == ["--kai-version '' is empty (given an empty value)",
                                          "--kai-set '' is empty (given an empty value)"]  # fmt: skip
    assert "drop it to take its default" in problems[0].fix


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999"])
def test_a_number_that_is_not_finite_is_not_a_number(text: str) -> None:
    assert isinstance(input_checks.lenient(float)(text), input_checks.NotANumber)
    assert input_checks.lenient(float)("2.5") == 2.5


KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: lab
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: lab, context: {cluster: lab, user: u}}, {name: admin@lab, context: {cluster: lab, user: u}}]
"""


def test_a_kubeconfig_must_parse_and_hold_the_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "kubeconfig"
    good.write_text(KUBECONFIG)
    (tmp_path / "text").write_text("hello\n")
    (tmp_path / "broken").write_text("clusters: [\n")
    fix = "FIX"
    whats = [p.what for path, context in ((str(tmp_path / "text"), None), (str(tmp_path / "broken"), None),
                                          (str(tmp_path), None), ("/nonexistent", None), (str(good), "nope"))
             for p in input_checks.kubeconfig(path, context, fix)]  # fmt: skip
    assert whats == [
        f"--kubeconfig {tmp_path / 'text'} is YAML but not a mapping of keys to values",
        f"--kubeconfig {tmp_path / 'broken'} is not valid YAML (line 2)",
        f"--kubeconfig {tmp_path}: a directory, not a file",
        "--kubeconfig /nonexistent: no such file",
        f"--context 'nope' is not a context of {good}",
    ]
    (problem,) = input_checks.kubeconfig(str(good), "nope", fix)
    assert problem.fix.startswith("pass --context with one of: lab, admin@lab, or drop --context")
    assert input_checks.kubeconfig(str(good), "admin@lab", fix) == []
    assert input_checks.kubeconfig(str(good), None, fix) == []
    # without --kubeconfig, --context is looked up in $KUBECONFIG's files (those that exist)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(good)]))
    assert [p.what for p in input_checks.kubeconfig(None, "other", fix)] == [
        f"--context 'other' is not a context of {good}"
    ]
    assert input_checks.kubeconfig(None, "lab", fix) == []
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    assert input_checks.kubeconfig(None, "other", fix) == []  # nothing to read: the run's connection probe says it


def test_kwok_assets_must_be_a_directory_of_yaml_files(tmp_path: Path) -> None:
    """clusters/kwok/fake_nodes.py reads them after the kind cluster is made: a mistake in them is found now instead."""
    from kai_conformance.fixtures.configuration.resolution import kwok_manifests_problems

    (tmp_path / "kwok.yaml").write_text("kind: [\n")
    (tmp_path / "stage-fast.yaml").write_text("kind: Stage\n")
    assert [p.what for p in kwok_manifests_problems(str(tmp_path))] == [
        f"--kwok-manifests {tmp_path / 'kwok.yaml'} is not valid YAML (line 2)"
    ]
    assert [p.what for p in kwok_manifests_problems(str(tmp_path / "kwok.yaml"))] == [
        f"--kwok-manifests {tmp_path / 'kwok.yaml'} is a file, not a directory"
    ]
    assert [p.what for p in kwok_manifests_problems(str(tmp_path / "absent"))] == [
        f"--kwok-manifests {tmp_path / 'absent'}: no such directory"
    ]
    (tmp_path / "kwok.yaml").write_text("kind: Deployment\n")
    assert kwok_manifests_problems(str(tmp_path)) == [] and kwok_manifests_problems(None) == []


@pytest.mark.parametrize(
    ("given", "ignored"),
    [
        ({"--cluster": "existing", "--kai-chart": "c", "--kai-set": ["a=1"]}, "--kai-chart, --kai-set choose what to "
         "install, but this run installs nothing (--cluster existing, --install auto)"),
        ({"--install": "never", "--jobset-manifests": "j.yaml"}, "--jobset-manifests choose what to install, but this "
         "run installs nothing (--cluster kind, --install never)"),
        ({"--trainer-set": ["a=1"], "--trainer-manifests": "m"}, "--trainer-set sets values of Trainer's Helm chart, "
         "but --trainer-manifests installs manifests, no chart"),
        ({"--reuse-cluster": "mine", "--cluster-name": "other"}, "--reuse-cluster mine and --cluster-name other name "
         "two kind clusters (the run would use mine)"),
        ({"--reuse-cluster": "mine", "--cluster-name": "kai-conformance"}, None),  # the default name: not given
        ({"--cluster": "existing", "--install": "always", "--kai-chart": "c"}, None),
        ({"--kai-chart": "c", "--trainer-set": ["a=1"]}, None),
    ],
)  # fmt: skip
def test_an_option_the_run_would_ignore_is_a_problem(given: dict, ignored: str | None) -> None:
    from kai_conformance.fixtures.configuration.resolution import ignored_options

    values = {"--cluster": "kind", "--install": "auto", **given}
    problems = ignored_options(values.get, values["--cluster"])
    assert [p.what.split(":", 1)[0] for p in problems] == ([ignored] if ignored else [])
    assert all(p.fix for p in problems)


def test_a_url_without_a_host_is_no_source() -> None:
    """helm and the downloader would fail on it once the cluster is made; a URL with a host is left to them."""
    assert [p.what for p in input_checks.chart("--kai-chart", "https://", "deployments/kai-scheduler")] == [
        "--kai-chart https:// is a URL without a host"
    ]
    assert [p.what for p in input_checks.manifests("--jobset-manifests", "http:///x.yaml", urls=True)] == [
        "--jobset-manifests http:///x.yaml is a URL without a host"
    ]
    assert input_checks.chart("--kai-chart", "https://example.org/kai.tgz", "d") == []
    assert input_checks.manifests("--jobset-manifests", "https://example.org/j.yaml", urls=True) == []


@pytest.mark.parametrize(
    ("name", "value", "tag"),
    [("kai", "0.17.0", "v0.17.0"), ("kai", "V0.16.8", "v0.16.8"), ("trainer", "2.3", "v2.3.0"),
     ("jobset", "v0.12", "v0.12.0"), ("kai", "9", "v0.17.0")],
)  # fmt: skip
def test_a_version_not_spelled_as_a_release_tag_names_the_tag(name: str, value: str, tag: str) -> None:
    """Taken for a build, it used to be "not a supported combination" or "a build, not a release"."""
    from kai_conformance.fixtures.configuration.resolution import misspelled_versions

    given: dict[str, str | None] = {"kai": None, "trainer": None, "jobset": None, name: value}
    (problem,) = misspelled_versions(given)
    assert problem.what == f"--{name}-version {value} is not spelled as a release tag (vMAJOR.MINOR.PATCH)"
    assert problem.fix.startswith(f"pass --{name}-version {tag} (known: ")
    assert given[name] is None  # the rest resolves without it
    for sound in ("v0.17.0", "v0.18.1", "main", "v2.4.0-rc.1", None):
        assert misspelled_versions({"kai": sound}) == []
