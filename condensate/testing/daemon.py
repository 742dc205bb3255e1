"""A real daemon for tests: ``python -m condensate serve`` in a subprocess on a free loopback
port, its state in a directory the test gives, its providers on the fake model server
(``condensate.testing.fake_model``); and the two calls tests make of it (``call``, and
``wait_for`` an event of a thread)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp


@dataclass
class DaemonProcess:
    home: Path
    fake_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    file_limit: int | None = None
    """Start the daemon with RLIMIT_NOFILE (soft and hard) at this, so it cannot raise it."""
    soft_file_limit: int | None = None
    """With ``file_limit``: start with this soft limit instead (below the hard one)."""
    cwd: Path | None = None
    """Where the daemon runs (None: here); ``python -m`` puts it first on the import path,
    so a plugin that lives in a checkout is found by running the daemon there."""
    without: tuple[str, ...] = ()
    """Variables the daemon starts without (a key the test puts elsewhere, or nowhere)."""
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    token: str = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
        env.update(
            {
                "CONDENSATE_HOME": str(self.home),
                "CONDENSATE_PORT": "0",
                "CONDENSATE_LOG_FORMAT": "json",
                "CONDENSATE_ANTHROPIC_BASE_URL": self.fake_url,
                "CONDENSATE_ANTHROPIC_API_KEY": "sk-test",
                "CONDENSATE_OPENAI_BASE_URL": self.fake_url + "/v1",
                "CONDENSATE_OPENAI_API_KEY": "sk-test",
                "CONDENSATE_PROVIDER_RETRIES": "0",
            }
        )
        env.update(self.extra_env)
        for name in self.without:
            env.pop(name, None)
        return env

    def start(self, timeout: float = 30.0) -> None:
        marker = self.home / "daemon.json"
        if marker.exists():
            marker.unlink()
        with (self.home / "daemon.log").open("ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter, our argv
                self.command(),
                cwd=self.cwd,
                env=self.env(),
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                msg = f"The daemon exited with {self.process.returncode}:\n{self.log_tail()}"
                raise AssertionError(msg)
            if marker.exists():
                try:
                    self.url = json.loads(marker.read_text())["url"]
                except ValueError:
                    time.sleep(0.05)
                    continue
                self.token = (self.home / "token").read_text().strip()
                return
            time.sleep(0.05)
        self.kill()
        msg = f"The daemon did not start within {timeout} s:\n{self.log_tail()}"
        raise AssertionError(msg)

    def command(self) -> list[str]:
        if self.file_limit is None:
            return [sys.executable, "-m", "condensate", "serve"]
        # A shim lowers the limit and execs the daemon: no preexec_fn in a threaded test.
        shim = (
            "import os, resource, sys; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, "
            f"({self.soft_file_limit or self.file_limit}, {self.file_limit})); "
            "os.execv(sys.executable, [sys.executable, '-m', 'condensate', 'serve'])"
        )
        return [sys.executable, "-c", shim]

    def log_tail(self) -> str:
        path = self.home / "daemon.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def stop(self) -> int:
        """SIGTERM, as systemd does; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def close(self) -> None:
        """Stop with SIGTERM if it still runs; kill it if that fails."""
        try:
            if self.process is not None and self.process.poll() is None:
                self.stop()
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def call(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    method: str,
    path: str,
    body: Any = None,
    **kwargs: Any,
) -> tuple[int, Any]:
    headers = {**daemon.headers, **kwargs.pop("headers", {})}
    async with session.request(
        method, daemon.url + path, json=body, headers=headers, **kwargs
    ) as response:
        return response.status, await response.json(content_type=None)


async def wait_for(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    thread: str,
    predicate: Callable[[dict[str, Any]], bool],
    seconds: float = 60.0,
) -> list[dict[str, Any]]:
    """Every event of ``thread`` once one of them satisfies ``predicate``."""
    events: list[dict[str, Any]] = []
    after = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after={after}&limit=1000&wait=5"
        )
        assert status == 200, page
        events += page["events"]
        after = page["nextAfter"]
        if any(predicate(e) for e in page["events"]):
            return events
    msg = f"Timed out waiting on thread {thread}; last events: {events[-5:]}"
    raise AssertionError(msg)


@contextmanager
def running_daemon(
    home: Path, fake_url: str, *, cwd: Path | None = None, **env: str
) -> Iterator[DaemonProcess]:
    """A started daemon, stopped with SIGTERM (and killed if that fails) afterwards."""
    process = DaemonProcess(home, fake_url, extra_env=dict(env), cwd=cwd)
    process.start()
    try:
        yield process
    finally:
        process.close()
