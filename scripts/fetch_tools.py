#!/usr/bin/env python3
"""Fetch kind, kubectl and helm at their pinned versions into .tools/bin: ``clusters/fetch_tools.py`` does it (it
ships with the package, so an installed suite's hint can name it); this keeps the clone's short command."""

import sys

from kai_conformance.clusters.fetch_tools import main

if __name__ == "__main__":
    sys.exit(main())
