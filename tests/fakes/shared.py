"""Hands a FakeKube from a self-test to the inner pytest session it runs with ``pytester`` (same process)."""

from __future__ import annotations

from tests.fakes.kube import FakeKube

current: FakeKube | None = None
