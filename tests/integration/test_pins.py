"""Pins, through a real daemon and the fake model: an operator pins a message over HTTP or
from the command line, the agent with its ``pin`` tool; what cannot be pinned is refused
saying why, and what is pinned survives a summary (as the brief and the current task do)."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import REPO, DaemonProcess, call, running_daemon, wait_for

_models = itertools.count(1)


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("pins"), fake.url) as process:
        yield process


async def thread_with(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    work: Path,
    replies: list[Any],
) -> tuple[str, list[dict[str, Any]], str]:
    """A thread whose model answers ``replies``: its id, its log once its turn ended, and
    its model's name."""
    model = f"claude-pins-{next(_models)}"
    fake.queue(*replies, model=model)
    body = {"model": f"anthropic:{model}", "cwd": str(work), "brief": "Count the files."}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    events = await wait_for(session, daemon, created["id"], lambda e: e["kind"] == "turn.ended")
    return created["id"], events, model


async def test_an_operator_pins_a_message_and_what_cannot_be_pinned_is_refused(
    daemon, fake, tmp_path
):
    """POST /threads/:id/pins pins the model's answer (logged as message.pinned by the
    operator); a tool result is 422, a seq the view lacks 404, each naming why; pinning the
    brief again says it is kept already."""
    async with aiohttp.ClientSession() as session:
        thread, events, _ = await thread_with(
            session,
            daemon,
            fake,
            tmp_path,
            [ToolCalls([Call("search", {"glob": "*"})]), Text("DECISION: keep the CSV header.")],
        )
        answer = next(e for e in events if e["kind"] == "message.assistant" and e["text"])
        result = next(e for e in events if e["kind"] == "tool.result")
        brief = next(e for e in events if e["kind"] == "message.user")
        path = f"/threads/{thread}/pins"
        status, pinned = await call(session, daemon, "POST", path, {"seq": answer["seq"]})
        assert status == 200, pinned
        assert pinned["pinned"] == answer["seq"]
        assert answer["seq"] in pinned["pins"]
        status, refused = await call(session, daemon, "POST", path, {"seq": result["seq"]})
        assert (status, refused["error"]) == (422, "not-pinnable")
        assert "tool result" in refused["detail"]
        status, missing = await call(session, daemon, "POST", path, {"seq": 99_999})
        assert (status, missing["error"]) == (404, "not-pinnable")
        status, again = await call(session, daemon, "POST", path, {"seq": brief["seq"]})
        assert status == 200
        assert again["seq"] is None  # nothing new logged
        tail = await wait_for(session, daemon, thread, lambda e: e["kind"] == "message.pinned")
    logged = [e for e in tail if e["kind"] == "message.pinned"]
    assert [(e["pinned"], e["by"]) for e in logged] == [(answer["seq"], "operator")]


async def test_the_agent_pins_with_its_tool_and_the_command_line_pins_too(daemon, fake, tmp_path):
    """The native agent's pin(seq) pins its own earlier answer (logged by the thread), and
    refuses a message that made calls; `condensate pin THREAD SEQ` pins from the command
    line and prints what is kept."""
    async with aiohttp.ClientSession() as session:
        thread, events, model = await thread_with(
            session,
            daemon,
            fake,
            tmp_path,
            [
                ToolCalls([Call("search", {"glob": "*"})], text="Looking."),
                Text("PLAN: one by one."),
            ],
        )
        plan = next(e for e in events if e["kind"] == "message.assistant" and "PLAN" in e["text"])
        looked = next(e for e in events if e["kind"] == "message.assistant" and e["tool_calls"])
        fake.queue(
            ToolCalls(
                [
                    Call("pin", {"seq": plan["seq"]}, id="p1"),
                    Call("pin", {"seq": looked["seq"]}, id="p2"),
                ]
            ),
            Text("Done."),
            model=model,
        )
        path = f"/threads/{thread}/messages"
        status, _ = await call(session, daemon, "POST", path, {"text": "Pin your plan."})
        assert status == 202
        last = events[-1]["seq"]
        events = await wait_for(
            session, daemon, thread, lambda e: e["kind"] == "turn.ended" and e["seq"] > last
        )
        done = next(e for e in events if e["kind"] == "message.assistant" and e["text"] == "Done.")
        cli = await anyio.run_process(
            [sys.executable, "-m", "condensate", "pin", thread, str(done["seq"]), "--json"],
            cwd=REPO,
            check=False,
            env={**os.environ, "CONDENSATE_HOME": str(daemon.home)},
        )
    results = {e["call_id"]: e for e in events if e["kind"] == "tool.result"}
    assert results["p1"]["is_error"] is False
    assert results["p2"]["is_error"] is True
    assert "tool calls" in results["p2"]["output"]
    pinned = [(e["pinned"], e["by"]) for e in events if e["kind"] == "message.pinned"]
    assert pinned == [(plan["seq"], "thread")]
    assert cli.returncode == 0, cli.stderr.decode()
    steer = next(e for e in events if e["kind"] == "message.user" and "Pin your" in e["text"])
    # What is kept: the brief, the current task (the latest steer) and the two pins.
    assert json.loads(cli.stdout)["pins"] == sorted({2, steer["seq"], plan["seq"], done["seq"]})
