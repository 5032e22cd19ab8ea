"""The version catalog (``clusters/versions.yaml``): supported combinations, node images per Kubernetes minor, tools.

Loading validates the file; resolving an operator's choice (combination, single component versions, Kubernetes
minor) returns a consistent selection, assumes the expectations of the nearest known version for one the tables do
not know (clusters/assumptions.py), or raises :class:`UsageError` naming the known values. Topologies live in
clusters/topology.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.clusters.assumptions import assume_component, kubernetes_minor_of, nearest_minor, normalized
from kai_conformance.fixtures.errors import UsageError

CLUSTERS_DIR = Path(__file__).resolve().parent
VERSIONS_FILE = CLUSTERS_DIR / "versions.yaml"
COMPONENT_LABELS = {"kai": "KAI", "trainer": "Trainer", "jobset": "JobSet"}


@dataclass(frozen=True)
class Component:
    name: str  # kai | trainer | jobset
    version: str
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: For a version the tables do not know: the known version whose expectations it takes (clusters/assumptions.py).
    assumed_from: str | None = None

    @property
    def expectations_version(self) -> str:
        """The version whose expectation rows apply: the component's own, or the one it assumes."""
        return self.assumed_from or self.version

    @property
    def assumption(self) -> str | None:
        """``KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0``; None when known."""
        if self.assumed_from is None:
            return None
        return f"{COMPONENT_LABELS[self.name]} {self.version} is not in the expectation tables: expectations assumed from {self.assumed_from}"

    @property
    def minor(self) -> str:
        """``v0.16.8`` → ``v0.16``."""
        return ".".join(self.version.split(".")[:2])

    @property
    def crds(self) -> str:
        return self.fields["crds"]


@dataclass(frozen=True)
class Combination:
    name: str
    kai: Component
    trainer: Component
    jobset: Component
    kubernetes: tuple[str, ...]

    def describe(self) -> str:
        return f"KAI {self.kai.version} · Trainer {self.trainer.version} · JobSet {self.jobset.version}"

    @property
    def assumptions(self) -> list[str]:
        """One sentence per component whose version the tables do not know."""
        return [a for a in (c.assumption for c in (self.kai, self.trainer, self.jobset)) if a]


@dataclass(frozen=True)
class Catalog:
    defaults: dict[str, Any]
    components: dict[str, dict[str, Component]]
    combinations: tuple[Combination, ...]
    kubernetes: dict[str, dict[str, Any]]
    tools: dict[str, Any]
    #: kwok release pinned for fake nodes: version, controller (kwok.yaml URL), stages (stage-fast.yaml URL)
    kwok: dict[str, str] = field(default_factory=dict)

    # ---------------------------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: Path = VERSIONS_FILE) -> Catalog:
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"cannot read the version catalog {path}: {exc}") from exc
        try:
            components = {
                kind: {version: Component(kind, version, dict(spec or {})) for version, spec in versions.items()}
                for kind, versions in raw["components"].items()
            }
            combinations = tuple(
                Combination(
                    name=c["name"],
                    kai=components["kai"][c["kai"]],
                    trainer=components["trainer"][c["trainer"]],
                    jobset=components["jobset"][c["jobset"]],
                    kubernetes=tuple(str(v) for v in c["kubernetes"]),
                )
                for c in raw["combinations"]
            )
            catalog = cls(
                defaults=dict(raw["defaults"]),
                components=components,
                combinations=combinations,
                kubernetes={str(k): dict(v) for k, v in raw["kubernetes"].items()},
                tools=dict(raw.get("tools") or {}),
                kwok={str(k): str(v) for k, v in (raw.get("kwok") or {}).items()},
            )
        except (KeyError, TypeError) as exc:
            raise UsageError(f"{path} is malformed: missing or wrong entry {exc}") from exc
        catalog._check(path)
        return catalog

    def _check(self, path: Path) -> None:
        for combo in self.combinations:
            paired = combo.trainer.fields.get("jobset")
            if paired and paired != combo.jobset.version:
                raise UsageError(
                    f"{path}: combination {combo.name} pairs Trainer {combo.trainer.version} with JobSet "
                    f"{combo.jobset.version}, but that Trainer ships JobSet {paired}"
                )
            missing = [k for k in combo.kubernetes if k not in self.kubernetes]
            if missing:
                raise UsageError(f"{path}: combination {combo.name} names Kubernetes {missing} without node image")
        if self.defaults["combination"] not in {c.name for c in self.combinations}:
            raise UsageError(f"{path}: default combination {self.defaults['combination']} is not listed")

    # -------------------------------------------------------------------------------------------- resolving
    def combination(self, name: str) -> Combination:
        for combo in self.combinations:
            if combo.name == name:
                return combo
        raise UsageError(
            f"unknown version combination {name!r}. Known combinations: "
            + ", ".join(c.name for c in self.combinations)
            + " (clusters/versions.yaml)"
        )

    def resolve(
        self,
        combination: str | None = None,
        *,
        kai: str | None = None,
        trainer: str | None = None,
        jobset: str | None = None,
    ) -> Combination:
        """The combination named, or the supported one matching the given component versions.

        Unspecified components default to the default combination's, so ``--kai-version v0.16.8`` alone
        selects KAI v0.16.8 with the default Trainer and JobSet.
        """
        if combination:
            chosen = self.combination(combination)
            for comp, wanted in (("kai", kai), ("trainer", trainer), ("jobset", jobset)):
                if wanted and getattr(chosen, comp).version != wanted:
                    raise UsageError(
                        f"--versions {combination} has {comp} {getattr(chosen, comp).version}, "
                        f"but --{comp}-version {wanted} was also given; pass one or the other"
                    )
            return chosen
        chosen = {comp: self.component(comp, wanted) for comp, wanted in
                  (("kai", kai), ("trainer", trainer), ("jobset", jobset)) if wanted}  # fmt: skip
        if any(c.assumed_from for c in chosen.values()):
            return self._assumed_combination(chosen)
        default = self.combination(self.defaults["combination"])
        want_kai = kai or default.kai.version
        want_trainer = trainer or (
            next((t for t, c in self.components["trainer"].items() if c.fields.get("jobset") == jobset), None)
            if jobset
            else default.trainer.version
        )
        for combo in self.combinations:
            if (
                combo.kai.version == want_kai
                and combo.trainer.version == want_trainer
                and (jobset is None or combo.jobset.version == jobset)
            ):
                return combo
        raise UsageError(
            f"KAI {want_kai} + Trainer {want_trainer}"
            + (f" + JobSet {jobset}" if jobset else "")
            + " is not a supported combination. Supported: "
            + "; ".join(c.describe() for c in self.combinations)
        )

    def component(self, kind: str, version: str) -> Component:
        """The known component of ``version``, or one that assumes the nearest lower known version's expectations
        (clusters/assumptions.py); refuses a version older than every known one."""
        known = self.components[kind]
        return known.get(normalized(version)) or assume_component(Component, kind, version, known)  # type: ignore[return-value]

    def _assumed_combination(self, chosen: dict[str, Component]) -> Combination:
        default = self.combination(self.defaults["combination"])
        kai = chosen.get("kai") or default.kai
        trainer = chosen.get("trainer") or next(
            (t for t in self.components["trainer"].values()
             if "jobset" in chosen and t.fields.get("jobset") == chosen["jobset"].expectations_version),
            default.trainer,
        )  # fmt: skip
        jobset = chosen.get("jobset") or self.components["jobset"].get(trainer.fields.get("jobset", ""), default.jobset)
        base = next((c for c in self.combinations if (c.kai.version, c.trainer.version) ==
                     (kai.expectations_version, trainer.expectations_version)), default)  # fmt: skip
        return Combination(f"kai-{kai.version}+trainer-{trainer.version}", kai, trainer, jobset, base.kubernetes)

    def kubernetes_minor(self, requested: str | None, combo: Combination) -> str:
        """The requested minor (``v1.36.4`` → ``1.36``): a supported one, or a newer one that assumes the newest
        supported minor's expectations (:meth:`kubernetes_assumed_from`)."""
        minor = kubernetes_minor_of(requested or str(self.defaults["kubernetes"]))
        if not re.fullmatch(r"\d+\.\d+", minor):
            raise UsageError(f"Kubernetes {minor!r} is not a version (1.36, v1.36.4); supported: "
                             f"{', '.join(combo.kubernetes)}")  # fmt: skip
        if minor not in combo.kubernetes:
            nearest_minor(minor, combo.kubernetes, combo.name)  # refuses one older than every supported minor
        return minor

    def kubernetes_assumed_from(self, minor: str, combo: Combination) -> str | None:
        """The supported minor whose expectations ``minor`` assumes; None when it is supported itself."""
        return None if minor in combo.kubernetes else nearest_minor(minor, combo.kubernetes, combo.name)

    def node_image(self, minor: str) -> str | None:
        """The kind node image pinned for ``minor``; None for a minor the catalog pins none for."""
        return (self.kubernetes.get(minor) or {}).get("node_image")
