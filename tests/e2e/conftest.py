"""Fixtures the end-to-end tests share: the pinned CLIs, a fresh fake model server per test,
and a working directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from condensate.testing.fake_model import FakeModelServer, RecordedRequest
from tests.integration.daemon import REPO

CLAUDE = REPO / "node_modules" / ".bin" / "claude"
CODEX = REPO / "node_modules" / ".bin" / "codex"


@pytest.fixture(autouse=True)
def clis_installed() -> None:
    """The pinned CLIs are part of the project's setup: their absence is a failure, not a
    skip."""
    assert CLAUDE.exists(), "the pinned claude CLI is not installed: run scripts/setup"
    assert CODEX.exists(), "the pinned codex CLI is not installed: run scripts/setup"


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    """A fake model server of its own for each test. Whatever the test asserts, no request
    Condensate sent may be refused for a thinking block's binding: the fake applies Anthropic's
    prefix check to today's models, as the API does."""
    async with FakeModelServer(window=200_000) as server:
        yield server
    refused = [refusal(r) for r in server.requests if r.thinking is not None and r.thinking.refused]
    assert refused == [], f"requests refused for their signed thinking: {refused}"


def refusal(request: RecordedRequest) -> str:
    """A refused request, as an assertion names it."""
    return f"#{request.number} {request.model} {request.path}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory for the thread."""
    work = tmp_path / "work"
    work.mkdir()
    return work
