"""An engine plugs in without a core edit: the test engine in ``tests/engines/echo.py``,
registered by an entry point of a distribution that exists only in this test's directory,
passes the engine contract (``condensate.testing.engines``) in a real daemon, with the
ceiling and the settings it declares, and is listed by the API and by ``doctor``. A daemon
without it refuses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import aiohttp
import pytest

from condensate.testing.engines import EngineContract
from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import call, running_daemon

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


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return plugin_site(tmp_path)


class TestEchoEngine(EngineContract):
    """The engine contract (``condensate.testing.engines``), passed by the echo engine: its
    ceiling is 30 % of the window capped at 50,000 (not the native loop's 80,000), its
    baseline 321, and its answers carry the prefix its own setting gives."""

    engine = "echo"
    model = MODEL
    ceiling = 50_000
    baseline = 321
    settings: ClassVar[dict[str, str]] = {"CONDENSATE_ECHO_PREFIX": "heard"}

    def daemon_env(self, tmp_path: Path) -> dict[str, str]:
        return {"PYTHONPATH": plugin_env(plugin_site(tmp_path))["PYTHONPATH"]}

    def daemon_cwd(self) -> Path:
        return REPO

    def answer(self, fake: FakeModelServer, text: str, asked: str) -> str:
        return f"heard: {asked}"


async def test_the_api_lists_a_plugged_in_engine(
    fake: FakeModelServer, tmp_path: Path, site: Path
) -> None:
    """The API's schema offers the plugged-in engine among those a thread may be created on."""
    async with aiohttp.ClientSession() as session:
        with running_daemon(a_home(tmp_path), fake.url, **plugin_env(site)) as daemon:
            status, document = await call(session, daemon, "GET", "/openapi.json")
    assert status == 200
    engine_schema = document["components"]["schemas"]["CreateThread"]["properties"]
    assert "echo" in engine_schema["engine"]["anyOf"][0]["enum"]


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
