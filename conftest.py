"""Root conftest: loads the suite's pytest plugin for every invocation under this directory."""

pytest_plugins = ["kai_conformance.fixtures.plugin"]
