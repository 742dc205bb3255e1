"""The metrics of the CLI engines, through a real daemon: the real ``claude`` and ``codex`` CLIs
reach the fake model server through the daemon's gateway, which times each model request and
counts the errors the provider answers them with; their calls are counted from the log the
gateway writes. Read back from ``GET /metrics`` with the Prometheus client's parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.events import Engine
from condensate.testing.fake_model import Call, Fail, FakeModelServer, Text, ToolCalls
from tests.e2e.conftest import CLAUDE, CODEX
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for
from tests.integration.test_metrics import Scrape, scrape, value

CASES = [
    ("claude", "anthropic:claude-opus-5-5", "messages", "anthropic"),
    ("codex", "openai:gpt-5.5", "responses", "openai"),
]
TIMED = "condensate_model_call_duration_seconds_count"


def shell(engine: str, command: str) -> ToolCalls:
    if engine == "claude":
        return ToolCalls([Call("Bash", {"command": command})])
    return ToolCalls([Call("shell", {"command": ["bash", "-lc", command]})])


async def one_turn(
    session: aiohttp.ClientSession, daemon: DaemonProcess, engine: str, model: str, cwd: Path
) -> dict[str, Any]:
    """A thread of the CLI engine after its first turn, as ``GET /threads/:id`` shows it
    once idle."""
    body = {"engine": engine, "model": model, "cwd": str(cwd), "brief": "count"}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    thread = created["id"]
    await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended", 90)
    with anyio.fail_after(30):
        while True:
            status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
            assert status == 200, shown
            if shown["status"] == "idle":
                return dict(shown)
            await anyio.sleep(0.05)


def calls_of(scrape: Scrape, engine: str) -> float:
    """The model calls counted for ``engine``, over every model."""
    return sum(
        count
        for (name, labels), count in scrape.items()
        if name == "condensate_model_calls_total" and ("engine", engine) in labels
    )


@pytest.mark.parametrize(("engine", "model", "endpoint", "api"), CASES)
async def test_a_cli_threads_requests_are_timed_at_the_gateway_and_counted_from_its_log(
    tmp_path: Path,
    fake: FakeModelServer,
    workdir: Path,
    engine: Engine,
    model: str,
    endpoint: str,
    api: str,
) -> None:
    """Every model request the CLI sent through the gateway is in the gateway's latency
    histogram, and the calls counted for the engine are the thread's costs (side calls
    included)."""
    fake.queue(shell(engine, "seq 1 20"), Text("done"), model=model.split(":", 1)[1])
    (tmp_path / "home").mkdir()
    with running_daemon(
        tmp_path / "home",
        fake.url,
        CONDENSATE_CLAUDE_BINARY=str(CLAUDE),
        CONDENSATE_CODEX_BINARY=str(CODEX),
    ) as daemon:
        async with aiohttp.ClientSession() as session:
            shown = await one_turn(session, daemon, engine, model, workdir)
            counted = await scrape(session, daemon)
    requests = [r for r in fake.requests if r.endpoint == endpoint]
    assert len(requests) >= 2
    assert value(counted, TIMED, {"via": "gateway", "provider": api}) == len(requests)
    assert shown["costs"]["calls"] >= 2
    assert calls_of(counted, engine) == shown["costs"]["calls"]


async def test_an_error_the_provider_answers_a_cli_with_is_counted_by_its_class(
    tmp_path: Path, fake: FakeModelServer, workdir: Path
) -> None:
    """The provider refuses Claude Code's key (401): each such answer the gateway relayed is
    counted as an authentication failure on the Anthropic side."""
    fake.queue(*[Fail(401)] * 5, model="claude-opus-5-5")
    (tmp_path / "home").mkdir()
    with running_daemon(
        tmp_path / "home", fake.url, CONDENSATE_CLAUDE_BINARY=str(CLAUDE)
    ) as daemon:
        async with aiohttp.ClientSession() as session:
            await one_turn(session, daemon, "claude", "anthropic:claude-opus-5-5", workdir)
            counted = await scrape(session, daemon)
    refused = [r for r in fake.requests if r.endpoint == "messages" and r.status == 401]
    assert refused
    labels = {"via": "gateway", "provider": "anthropic", "error": "authentication-failed"}
    assert value(counted, "condensate_provider_errors_total", labels) == len(refused)
