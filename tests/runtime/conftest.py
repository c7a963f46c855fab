"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def tcp(monkeypatch):
    """Tasks on this host use the TCP peer path (the same-host one off)."""
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    monkeypatch.setenv("NBDIST_PEER_TCP", "always")
