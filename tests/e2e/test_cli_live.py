"""A CLI thread's reply streams to whoever follows it live: the gateway reads the text
deltas of the provider's stream it relays (only while somebody listens) and publishes them as
``message.delta`` items on the thread's live stream. Real ``claude`` and ``codex`` CLIs, real
daemon, fake model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import anyio
import pytest

from condensate.providers.sse import SSEParser
from condensate.testing.fake_model import FakeModelServer, Slow, Text
from tests.e2e.test_cli_agent_context import ENGINES, model_of, start, start_daemon
from tests.integration.daemon import DaemonProcess


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = start_daemon(tmp_path, fake)
    yield process
    process.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_cli_reply_streams_to_a_live_follower(daemon, fake, workdir, engine):
    """The deltas arrive before the message is logged and add up to its text."""
    reply = "Streaming through the gateway, one piece at a time, to the follower."
    fake.queue(Slow(Text(reply), chunk_delay=0.3, chunks=6), model=model_of(engine))
    deltas: list[str] = []
    logged: list[str] = []
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine)
        url = f"{daemon.url}/threads/{thread}/live?after=0"
        headers = {"Authorization": f"Bearer {daemon.token}"}
        with anyio.fail_after(60):
            async with session.get(url, headers=headers) as response:
                assert response.status == 200
                parser = SSEParser()
                async for chunk in response.content.iter_any():
                    for event in parser.feed(chunk):
                        data = json.loads(event.data) if event.data else {}
                        if event.event == "message.delta":
                            deltas.append(data["text"])
                        if event.event == "message.assistant" and reply in data.get("text", ""):
                            logged.append(data["text"])
                        if event.event == "turn.ended":
                            break
                    else:
                        continue
                    break
    assert len(deltas) >= 2
    assert "".join(deltas) == reply
    assert logged == [reply]
