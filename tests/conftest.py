"""Shared pytest fixtures."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakegithub import FakeGitHub


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A local GitHub (tests/fakegithub.py) on 127.0.0.1; REPROBOT_GITHUB_API points at it and
    GITHUB_TOKEN is its known test token, so reprobot's own client construction reaches it."""
    with FakeGitHub() as server:
        monkeypatch.setenv("REPROBOT_GITHUB_API", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", "test-token")
        yield server
