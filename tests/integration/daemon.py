"""A real daemon for tests (``condensate.testing.daemon``), run from this checkout so that a
plugin living in ``tests/`` is found; and the fake model server in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from condensate.testing import daemon as shipped
from condensate.testing.daemon import call, wait_for

REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "DaemonProcess", "call", "fake_process", "running_daemon", "wait_for"]


@asynccontextmanager
async def fake_process(window: int = 0) -> AsyncIterator[str]:
    """The fake model server in a process of its own, as a provider is (its heap and garbage
    collections are not the daemon's), run from this checkout: its URL."""
    command = [sys.executable, "-m", "condensate.testing.fake_model", "--window", str(window)]
    async with await anyio.open_process(command, cwd=REPO, stderr=subprocess.DEVNULL) as process:
        assert process.stdout is not None
        url = ""
        async for chunk in process.stdout:
            url += chunk.decode()
            if "\n" in url:
                break
        try:
            yield url.strip()
        finally:
            process.terminate()
            await process.wait()


@dataclass
class DaemonProcess(shipped.DaemonProcess):
    """A daemon run from this checkout."""

    cwd: Path | None = REPO


@contextmanager
def running_daemon(home: Path, fake_url: str, **env: str) -> Iterator[DaemonProcess]:
    """A started daemon, stopped with SIGTERM (and killed if that fails) afterwards."""
    process = DaemonProcess(home, fake_url, extra_env=dict(env))
    process.start()
    try:
        yield process
    finally:
        process.close()
