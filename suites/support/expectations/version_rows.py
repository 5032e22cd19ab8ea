"""How a per-version expectation table is read: rows keyed by minor version, and an unknown version is an error that
names the rows there are and the file to add one to (never a silent default). Shared by the main table
(the package's ``__init__``) and the per-area tables (``expectations/<area>.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from kai_conformance.fixtures.errors import UsageError

Row = TypeVar("Row")


class UnknownVersion(UsageError):
    """No expectation row for a version: the suite cannot know what to expect of it."""


def minor(version: str) -> str:
    """``v0.16.8`` → ``v0.16``; ``0.16`` → ``v0.16``."""
    parts = version.strip().removeprefix("v").split(".")
    return "v" + ".".join(parts[:2])


def row_for(table: Mapping[str, Row], what: str, version: str, source: str) -> Row:
    """The row of ``version``'s minor in ``table``; ``what`` names the table in the error, ``source`` its file."""
    row = table.get(minor(version))
    if row is None:
        raise UnknownVersion(
            f"no {what} expectation row for {version} (known: {', '.join(table)}); add a row for {minor(version)} "
            f"to {source} before running the suites against it"
        )
    return row
