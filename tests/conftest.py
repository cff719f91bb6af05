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


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A local GitHub (tests/fakegithub.py) on 127.0.0.1; REPROBOT_GITHUB_API points at it and
    GITHUB_TOKEN is its known test token, so reprobot's own client construction reaches it."""
    with FakeGitHub() as server:
        monkeypatch.setenv("REPROBOT_GITHUB_API", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", "test-token")
        yield server
