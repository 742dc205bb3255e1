"""Clamps on the real ``claude`` and ``codex`` CLIs: a tool result, a human message and a tool
call's argument longer than the thread's clamp reach the provider as their head and tail
(the gateway rewrites each request as the view shows it), the log keeps them whole, and
``read_tool_output`` reads the middle back. Real daemon, fake model server; the clamp is set
low (500 tokens: 2,000 characters) so that ordinary outputs pass it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer, Text, ToolCalls
from tests.e2e.log import check_pairs, turn_ended
from tests.e2e.test_cli_agent_context import (
    ENGINES,
    context_call,
    conversation,
    generations,
    model_of,
    result_text,
    shell,
    start,
    start_daemon,
    steer,
)
from tests.integration.daemon import DaemonProcess

CLAMP_CHARS = 2_000


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = start_daemon(tmp_path, fake, CONDENSATE_CLAMP_TOKENS="500")
    yield process
    process.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_long_result_reaches_the_provider_clamped_and_is_read_back(
    daemon, fake, workdir, engine
):
    """A shell output of about 19,000 characters shows its first and last 1,000 and a note
    naming its seq and offset; read_tool_output from there returns the middle."""
    fake.queue(shell(engine, "seq 1 4000", text="Counting."), Text("Long."), model=model_of(engine))
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine)
        events = await turn_ended(session, daemon, thread)
        counted = next(e for e in events if e["kind"] == "tool.result" and "3999" in e["output"])
        output = counted["output"]
        seen = result_text(engine, generations(fake, engine)[-1], counted["call_id"])
        half = CLAMP_CHARS // 2
        assert seen.startswith(output[:half])
        assert seen.endswith(output[-half:])
        assert "\n2000\n" not in seen
        assert f'read_tool_output(ref="{counted["seq"]}", offset={half}' in seen
        page = {"ref": str(counted["seq"]), "offset": half, "length": 1_500}
        fake.queue(
            ToolCalls([context_call(engine, "read_tool_output", page, "call_clamp1")]),
            Text("Read the middle."),
            model=model_of(engine),
        )
        events = await steer(session, daemon, thread, "Read the middle.", events[-1]["seq"])
    read = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "call_clamp1")
    assert read["output"].startswith(output[half : half + 1_500])
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_long_message_and_a_long_argument_reach_the_provider_clamped(
    daemon, fake, workdir, engine
):
    """A human message of 5,000 characters and a shell call whose command is 3,000 are
    shown as their head and tail in every later request; the log keeps both whole."""
    middle = "MIDDLE-OF-THE-STEER"
    steer_text = "A" * 2_400 + middle + "Z" * 2_400
    long_echo = "echo " + "x" * 1_500 + "ARGUMENT-MIDDLE" + "y" * 1_500
    fake.queue(Text("Ready."), model=model_of(engine))
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine)
        events = await turn_ended(session, daemon, thread)
        fake.queue(
            shell(engine, long_echo, text="Echoing."),
            Text("Echoed."),
            model=model_of(engine),
        )
        events = await steer(session, daemon, thread, steer_text, events[-1]["seq"])
    logged = next(e for e in events if e["kind"] == "message.user" and middle in e["text"])
    assert logged["text"] == steer_text
    called = next(e for e in events if e["kind"] == "message.assistant" and e["tool_calls"])
    assert "ARGUMENT-MIDDLE" in json.dumps(called["tool_calls"])
    last = json.dumps(conversation(engine, generations(fake, engine)[-1]))
    assert "A" * 1_000 in last
    assert "Z" * 1_000 in last
    assert middle not in last
    assert "ARGUMENT-MIDDLE" not in last
    assert f'read_tool_output(ref=\\"{logged["seq"]}\\"' in last
    # Codex carries arguments as a JSON string: its quotes come escaped once more.
    note = rf'read_tool_output\(ref=\\+"{called["seq"]}\\+"\) reads the whole message'
    assert re.search(note, last), last[-3_000:]
    check_pairs(daemon, thread)
