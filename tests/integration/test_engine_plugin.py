"""An engine plugs in without a core edit: the test engine in ``tests/engines/echo.py``,
registered by an entry point of a distribution that exists only in this test's directory,
runs threads in a real daemon, with the ceiling and the settings it declares, is listed by the
API and by ``doctor``, and is recovered after a restart. A daemon without it refuses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for

REPO = Path(__file__).resolve().parents[2]
MODEL = "anthropic:claude-sonnet-4-5"


def plugin_site(root: Path) -> Path:
    """A directory holding an installed distribution's metadata, and nothing else: its one
    entry point names the echo engine."""
    site = root / "site"
    meta = site / "echo_engine-0.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-engine\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(
        "[condensate.engines]\necho = tests.engines.echo:ENGINE\n"
    )
    return site


def plugin_env(site: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "CONDENSATE_ECHO_PREFIX": "heard"}


def a_home(root: Path) -> Path:
    home = root / "home"
    home.mkdir(mode=0o700)
    return home


def answers(events: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in events if e["kind"] == "message.assistant"]


def ended(events: list[dict[str, Any]]) -> bool:
    return any(e["kind"] == "turn.ended" for e in events)


async def send_and_wait(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, text: str
) -> list[dict[str, Any]]:
    path = f"/threads/{thread}/messages"
    status, body = await call(session, daemon, "POST", path, {"text": text})
    assert status in (200, 202), body
    return await wait_for(
        session, daemon, thread, lambda e: e["kind"] == "message.assistant" and text in e["text"]
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return plugin_site(tmp_path)


async def test_a_plugged_in_engine_runs_threads_with_what_it_declares(
    fake: FakeModelServer, tmp_path: Path, site: Path
) -> None:
    """A thread on the echo engine gets the echo engine's ceiling (30 % capped at 50,000, not
    the native loop's 80,000 on a 200k window) and its baseline, and its answers carry the
    prefix its own setting (CONDENSATE_ECHO_PREFIX) read from the daemon's environment."""
    home = a_home(tmp_path)
    async with aiohttp.ClientSession() as session:
        with running_daemon(home, fake.url, **plugin_env(site)) as daemon:
            status, document = await call(session, daemon, "GET", "/openapi.json")
            assert status == 200
            engine_schema = document["components"]["schemas"]["CreateThread"]["properties"]
            assert "echo" in engine_schema["engine"]["anyOf"][0]["enum"]
            body = {"engine": "echo", "model": MODEL, "cwd": str(tmp_path), "brief": "ping"}
            status, thread = await call(session, daemon, "POST", "/threads", body)
            assert status == 201, thread
            assert thread["engine"] == "echo"
            assert thread["ceiling"] == 50_000
            events = await wait_for(session, daemon, thread["id"], lambda e: ended([e]))
            created = next(e for e in events if e["kind"] == "thread.created")
            assert created["baseline_tokens"] == 321
            assert answers(events) == ["heard: ping"]


async def test_a_plugged_in_engines_thread_is_recovered_after_a_restart(
    fake: FakeModelServer, tmp_path: Path, site: Path
) -> None:
    """After a restart the daemon rebuilds the echo thread from the log and runs its next
    turn on the echo engine again: it answers the new message only."""
    home = a_home(tmp_path)
    async with aiohttp.ClientSession() as session:
        with running_daemon(home, fake.url, **plugin_env(site)) as daemon:
            body = {"engine": "echo", "model": MODEL, "cwd": str(tmp_path), "brief": "one"}
            status, thread = await call(session, daemon, "POST", "/threads", body)
            assert status == 201, thread
            await wait_for(session, daemon, thread["id"], lambda e: ended([e]))
        with running_daemon(home, fake.url, **plugin_env(site)) as daemon:
            events = await send_and_wait(session, daemon, thread["id"], "two")
            assert answers(events) == ["heard: one", "heard: two"]
            status, listed = await call(session, daemon, "GET", f"/threads/{thread['id']}")
            assert (status, listed["engine"]) == (200, "echo")


def test_doctor_reports_a_plugged_in_engines_check(tmp_path: Path, site: Path) -> None:
    """`condensate doctor` runs each installed engine's own check, the echo engine's too, and
    says what each declares."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env |= {"CONDENSATE_HOME": str(tmp_path / "home"), **plugin_env(site)}
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "doctor", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["echo"] == "echo ready (prefix 'heard')"
    declared = report["engines"]["echo"]
    assert declared.startswith("Echo: ceiling 30% of the window, at most 50,000 tokens")
    assert "window check before-each-call" in declared


async def test_a_daemon_without_the_engine_refuses_it_naming_those_it_runs(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Without the plugin, a thread on "echo" is refused with 422 invalid-body naming the
    field and the engines the daemon does run; nothing is created."""
    async with aiohttp.ClientSession() as session:
        with running_daemon(a_home(tmp_path), fake.url) as daemon:
            body = {"engine": "echo", "model": MODEL, "cwd": str(tmp_path), "brief": "ping"}
            status, refused = await call(session, daemon, "POST", "/threads", body)
            assert status == 422, refused
            assert refused["error"] == "invalid-body"
            assert "'engine'" in refused["detail"]
            assert "'echo'" in refused["detail"]
            for name in ("'api'", "'claude'", "'codex'"):
                assert name in refused["detail"]
            status, listed = await call(session, daemon, "GET", "/threads")
            assert listed["threads"] == []
