"""kai-conformance, installed as one package: the repository's ``fixtures/``, ``clusters/``, ``reports/`` and
``suites/`` are its subpackages.

In a clone this directory holds only relative links to those four folders (``fixtures -> ../../fixtures``, ...):
``pip install -e .`` puts ``src/`` on ``sys.path`` (a plain path in a ``.pth`` file, no import hook), so Python,
editors and type checkers all find ``kai_conformance.*`` in a real directory tree. The wheel copies the files
behind the links. Why: docs/ARCHITECTURE.md, "One package, two views of the same files".
"""
