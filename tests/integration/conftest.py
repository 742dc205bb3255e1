"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer
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
