"""A fake command runner (records command lines, answers from rules) and fake executables on PATH.

The runner has the signature of :func:`clusters.commands.run`; a command no rule matches fails the test, so
every command the suite runs is one a test expected. Executables are tiny Python scripts; the fake ``kind``
keeps its clusters and every call in a JSON file, so tests can check what pytest-kind-ng's ``KindCluster`` ran.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kai_conformance.clusters.commands import Completed, checked

Action = Callable[[tuple[str, ...]], Completed | str | None]


@dataclass
class Call:
    argv: tuple[str, ...]  # tool by name, not path
    timeout: float
    env: Mapping[str, str] | None


@dataclass
class FakeRunner:
    rules: list[tuple[tuple[str, ...], Action]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def on(self, *prefix: str, stdout: str = "", stderr: str = "", returncode: int = 0,
           action: Action | None = None) -> None:  # fmt: skip
        """Answer commands starting with ``prefix`` (later rules win); ``action`` may compute the answer."""

        def reply(argv: tuple[str, ...]) -> Completed:
            produced = action(argv) if action else None
            if isinstance(produced, Completed):
                return produced
            return Completed(argv, returncode, produced if isinstance(produced, str) else stdout, stderr)

        self.rules.append((prefix, reply))

    def __call__(self, argv: Sequence[str], *, timeout: float, input: str | None = None,
                 env: Mapping[str, str] | None = None, check: bool = True) -> Completed:  # fmt: skip
        shown = (Path(argv[0]).name, *argv[1:])
        self.calls.append(Call(shown, timeout, env))
        for prefix, reply in reversed(self.rules):
            if shown[: len(prefix)] == prefix:
                result = reply(shown)
                return checked(result) if check else result
        raise AssertionError(f"unexpected command: {' '.join(shown)}")

    def commands(self, *prefix: str) -> list[tuple[str, ...]]:
        return [c.argv for c in self.calls if c.argv[: len(prefix)] == prefix]


def executable(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(f"#!{sys.executable} -S\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: kind-{name}
  cluster: {{server: "{server}"}}
users:
- name: kind-{name}
  user: {{token: fake}}
contexts:
- name: kind-{name}
  context: {{cluster: kind-{name}, user: kind-{name}}}
current-context: kind-{name}
"""

FAKE_KIND = """
import json, os, sys
path = os.environ["FAKE_KIND_STATE"]
with open(path) as f:
    state = json.load(f)
args = sys.argv[1:]
state["calls"].append(args)
def flag(name):
    for i, a in enumerate(args):
        if a.startswith("--" + name + "="):
            return a.split("=", 1)[1]
        if a == "--" + name:
            return args[i + 1]
def finish(code=0, err=""):
    with open(path, "w") as f:
        json.dump(state, f)
    if err:
        sys.stderr.write(err + "\\n")
    sys.exit(code)
verb = " ".join(args[:2])
if verb in state["fail"]:
    finish(1, state["fail"][verb])
if verb == "get clusters":
    print("\\n".join(state["clusters"])) if state["clusters"] else sys.stderr.write("No kind clusters found.\\n")
elif verb == "create cluster":
    name = flag("name")
    with open(flag("config")) as f:
        state["configs"].append(f.read())
    with open(flag("kubeconfig"), "w") as f:
        f.write(KUBECONFIG.format(name=name, server=state["server"]))
    state["clusters"].append(name)
elif verb == "delete cluster":
    state["clusters"] = [c for c in state["clusters"] if c != flag("name")]
elif verb == "load docker-image":
    images = [a for i, a in enumerate(args[2:], 2) if not a.startswith("--") and args[i - 1] != "--name"]
    for image in images:
        if image in state["missing_images"]:
            finish(1, "ERROR: image: \\"%s\\" not present locally" % image)
        if image in state.get("one_platform_images", []):
            finish(1, "ERROR: failed to load image: command \\"docker exec --privileged -i kc-control-plane ctr "
                      "--namespace=k8s.io images import --all-platforms --digests --snapshotter=overlayfs -\\" "
                      "failed with error: exit status 1\\nCommand Output: ctr: content digest sha256:b1ad: not found")
    state["loaded"].extend(images)
elif verb == "load image-archive":
    with open(args[2]) as f:
        state["loaded"].append(f.read())
elif verb == "get nodes":
    print("\\n".join(state.get("nodes", [])))
elif verb == "get kubeconfig":
    print(KUBECONFIG.format(name=flag("name"), server=state["server"]), end="")
finish()
"""


@dataclass
class FakeKind:
    """The fake ``kind`` on PATH and its state: clusters, calls, configs, loaded images, injected failures."""

    bin_dir: Path
    state_file: Path

    @classmethod
    def install(cls, bin_dir: Path, monkeypatch: Any) -> FakeKind:
        state_file = bin_dir.parent / "fake-kind.json"
        fake = cls(bin_dir, state_file)
        fake._write({"clusters": [], "calls": [], "configs": [], "loaded": [], "missing_images": [], "fail": {},
                     "server": "https://127.0.0.1:6443"})  # fmt: skip
        executable(bin_dir, "kind", f"KUBECONFIG = {KUBECONFIG!r}\n{FAKE_KIND}")
        monkeypatch.setenv("FAKE_KIND_STATE", str(state_file))
        return fake

    def _write(self, state: dict) -> None:
        self.state_file.write_text(json.dumps(state))

    @property
    def state(self) -> dict:
        return json.loads(self.state_file.read_text())

    def update(self, **changes: Any) -> None:
        self._write({**self.state, **changes})

    def calls(self, *prefix: str) -> list[list[str]]:
        return [c for c in self.state["calls"] if tuple(c[: len(prefix)]) == prefix]


def tools_on_path(bin_dir: Path, monkeypatch: Any, names: Sequence[str] = ("helm", "kubectl")) -> None:
    """Placeholder executables (the fake runner answers for them) first on PATH; nothing else from PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        executable(bin_dir, name, "raise SystemExit('placeholder: the fake runner answers for this tool')\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
