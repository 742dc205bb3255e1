"""Fixtures the integration tests share."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer
from tests.integration import postgres
from tests.integration.daemon import DaemonProcess, running_daemon


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session for one test."""
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeModelServer]:
    """A fake model server on its own thread, shared by a module (modules that need a fresh
    one per test define their own ``fake``)."""
    with FakeModelServer.in_thread(window=200_000) as server:
        yield server


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """A real daemon on the module's fake, stopped with SIGTERM after the module."""
    with running_daemon(tmp_path_factory.mktemp("daemon"), fake.url) as process:
        yield process


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A private PostgreSQL server for the whole run (``tests.integration.postgres``)."""
    with postgres.server() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the run's server, for one test."""
    name = "t_" + uuid.uuid4().hex[:12]
    return postgres.fresh_database(postgres_server, name)
