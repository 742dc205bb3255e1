"""The HTTP edge against a hostile local user: a flood of half-open connections on a real
daemon whose file limit it cannot raise (1,024, soft and hard), and a bare edge whose
``accept`` runs out of file descriptors.

The flood is opened once for the module: 1,100 connections, each with part of a request head
and never the rest. The tests then look at what the daemon made of it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import anyio
import pytest

from condensate.http.edge import HEAD_TIMEOUT, OPEN_CONNECTIONS
from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import REPO, DaemonProcess

FLOOD = 1_100
FILE_LIMIT = 1_024
PARTIAL_HEAD = b"GET /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
SMALL_LOG = 64 * 1024


def _address(url: str) -> tuple[str, int]:
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    return host, int(port)


def _open_flood(url: str, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(_address(url), timeout=10)
        sock.sendall(PARTIAL_HEAD)
        sockets.append(sock)
    return sockets


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed ``sock`` (without waiting for it to)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """A daemon held to 1,024 file descriptors."""
    process = DaemonProcess(tmp_path_factory.mktemp("edge"), fake.url, file_limit=FILE_LIMIT)
    process.start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def flood(daemon: DaemonProcess) -> Iterator[tuple[float, list[socket.socket]]]:
    """1,100 half-open connections to the daemon, and when the last of them was opened."""
    sockets = _open_flood(daemon.url, FLOOD)
    opened = time.monotonic()
    time.sleep(1.0)  # the daemon accepts the backlog
    try:
        yield opened, sockets
    finally:
        for sock in sockets:
            sock.close()


async def test_a_token_holder_is_answered_within_a_second_during_a_flood(
    daemon: DaemonProcess, flood: tuple[float, list[socket.socket]]
) -> None:
    """With 1,100 half-open connections open, GET /threads with the token answers 200 in
    under a second."""
    began = time.monotonic()
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            daemon.url + "/threads", headers=daemon.headers, timeout=aiohttp.ClientTimeout(5)
        ) as response,
    ):
        assert response.status == 200
        assert "threads" in await response.json()
    assert time.monotonic() - began < 1.0


def test_at_most_the_cap_of_connections_stays_open(
    flood: tuple[float, list[socket.socket]],
) -> None:
    """The daemon keeps at most 512 of the flood's connections and closes the rest."""
    _, sockets = flood
    still_open = [s for s in sockets if not _closed_by_peer(s)]
    assert len(still_open) <= OPEN_CONNECTIONS
    assert len(still_open) > 0


def test_a_flood_does_not_spin_a_core(
    daemon: DaemonProcess, flood: tuple[float, list[socket.socket]]
) -> None:
    """Holding the flood's connections, the daemon uses under a fifth of a core."""
    assert daemon.process is not None
    before = _cpu_seconds(daemon.process.pid)
    time.sleep(2.0)
    assert _cpu_seconds(daemon.process.pid) - before < 0.4


def test_the_log_stays_small_during_a_flood(
    daemon: DaemonProcess, flood: tuple[float, list[socket.socket]]
) -> None:
    """The flood leaves the daemon's log under 64 KiB, with no traceback in it."""
    log = daemon.home / "daemon.log"
    assert log.stat().st_size < SMALL_LOG
    assert "Traceback" not in log.read_text()


def test_half_open_heads_are_closed_after_the_head_timeout(
    flood: tuple[float, list[socket.socket]],
) -> None:
    """A connection that never finishes its request head is closed by the daemon once the
    head timeout has passed."""
    opened, sockets = flood
    wait = opened + HEAD_TIMEOUT + 3.0 - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    assert [s for s in sockets if not _closed_by_peer(s)] == []


def _soft_file_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    msg = "No 'Max open files' in /proc/PID/limits."
    raise AssertionError(msg)


def test_the_daemon_raises_its_soft_file_limit_to_the_hard_one(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Started with a soft file limit of 256 under a hard one of 4,096, the daemon serves
    with 4,096."""
    process = DaemonProcess(tmp_path, fake.url, file_limit=4096, soft_file_limit=256)
    process.start()
    try:
        assert process.process is not None
        assert _soft_file_limit(process.process.pid) == 4096
    finally:
        process.close()


# -- a bare edge out of file descriptors --------------------------------------------------------


@contextmanager
def bare_edge(limit: int, cap: int) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._edge_server", str(limit), str(cap)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.kill()
        process.wait(timeout=10)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def starved_edge() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The bare edge at 64 file descriptors with a cap of 1,000: ``accept`` hits EMFILE."""
    with bare_edge(64, 1000) as edge:
        yield edge


async def test_a_connection_past_a_cap_of_busy_ones_is_closed_unanswered() -> None:
    """With the cap's connections all running a request, one more connection is closed
    without an answer; once they finish, the next one is served."""
    with bare_edge(1024, 2) as (url, _):
        async with aiohttp.ClientSession() as session:

            async def slow() -> int:
                async with session.get(url + "/slow") as response:
                    return response.status

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(slow)
                tasks.start_soon(slow)
                await anyio.sleep(0.5)
                with pytest.raises(aiohttp.ClientError):
                    async with aiohttp.ClientSession() as other, other.get(url + "/ping"):
                        pass
            async with aiohttp.ClientSession() as other, other.get(url + "/ping") as response:
                assert response.status == 200


async def test_emfile_is_logged_once_and_a_request_still_gets_through(
    starved_edge: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """When accept fails with EMFILE, the edge logs it once (no traceback), frees an idle
    connection and answers a real request within a second."""
    url, process = starved_edge
    sockets = _open_flood(url, 200)
    try:
        await anyio.sleep(1.0)
        began = time.monotonic()
        async with (
            aiohttp.ClientSession() as session,
            session.get(url + "/ping", timeout=aiohttp.ClientTimeout(5)) as response,
        ):
            assert response.status == 200
        assert time.monotonic() - began < 1.0
    finally:
        for sock in sockets:
            sock.close()
    process.kill()
    _, stderr = process.communicate(timeout=10)
    text = stderr.decode()
    assert "Traceback" not in text
    warnings = [json.loads(line) for line in text.splitlines() if '"accept_failed"' in line]
    assert len(warnings) == 1, text[-2000:]
    assert warnings[0]["errno"] == 24
