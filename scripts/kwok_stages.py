#!/usr/bin/env python3
"""Print the kwok Stages the suite installs on kind, as YAML, for a kwok the suite does not install:
``clusters/kwok/stages.py`` does it (it ships with the package: ``python -m kai_conformance.clusters.kwok.stages``);
this keeps the clone's short command. ``python scripts/kwok_stages.py | kubectl apply -f -`` (docs/clusters.md)."""

import sys

from kai_conformance.clusters.kwok.stages import main

if __name__ == "__main__":
    sys.exit(main())
