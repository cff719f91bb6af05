"""Shared pytest fixtures."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakegithub import FakeGitHub


@pytest.fixture(autouse=True)
def _isolated_from_the_user(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's issue index or sends their token anywhere."""
    monkeypatch.setenv("REPROBOT_INDEX_DB", str(tmp_path_factory.mktemp("index") / "issues.db"))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    # Nothing reaches the real GitHub, not even an unauthenticated search: a closed local port
    # (tests that talk to GitHub use the fake_github fixture, which points here instead).
    monkeypatch.setenv("REPROBOT_GITHUB_API", "http://127.0.0.1:9")


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A local GitHub (tests/fakegithub.py) on 127.0.0.1; REPROBOT_GITHUB_API points at it and
    GITHUB_TOKEN is its known test token, so reprobot's own client construction reaches it."""
    with FakeGitHub() as server:
        monkeypatch.setenv("REPROBOT_GITHUB_API", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", "test-token")
        yield server
