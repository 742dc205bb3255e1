"""Every request Condensate changes stays valid on today's models, with each CLI on its default
model (Claude Code: claude-opus-5-5, whose signed thinking is bound to what came before it;
Codex: gpt-6.2-sol, which drops a reasoning item whose history changed): windows taken in
flight by the gateway, a daemon restarted mid-session, a subagent's own requests. The fake
applies the vendors' rules (``condensate.testing.fake_model``); the ``fake`` fixture fails any
test in which a request was refused for its thinking. What the CLIs do alone against the same
fake is in ``test_fake_fidelity.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    RecordedRequest,
    Text,
    ToolCalls,
)
from tests.e2e.conftest import CLAUDE, CODEX
from tests.e2e.log import Events, check_pairs, turn_ended
from tests.integration.daemon import DaemonProcess, call
from tests.integration.test_metrics import scrape, value

MODELS = {"claude": "claude-opus-5-5", "codex": "gpt-6.2-sol"}


def thread_model(engine: str) -> str:
    """The engine's model as a thread names it."""
    return f"{'anthropic' if engine == 'claude' else 'openai'}:{MODELS[engine]}"


"""Each pinned CLI's default model (claude 2.1.332; codex 0.171.0's catalog)."""
SHELL = {"claude": "Bash", "codex": "exec_command"}
CEILING = 40_000
REASONING = "I check what the last output said before I run the next command. " * 12
"""Scripted reasoning for Codex's replies (the fake signs Claude's thinking by itself)."""


def start_daemon(tmp_path: Path, fake: FakeModelServer) -> DaemonProcess:
    """A daemon at its defaults but for a 40,000-token ceiling, both CLIs on their default
    models (the windows the fake serves)."""
    windows = {"anthropic:claude-opus-5-5": 200_000, "openai:gpt-6.2-sol": 200_000}
    process = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_MODEL_WINDOWS": json.dumps(windows),
            "CONDENSATE_WINDOW_CEILING": str(CEILING),
            "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
            "CONDENSATE_WINDOW_DEADLINE_MS": "10000",
            "CONDENSATE_CLAUDE_BINARY": str(CLAUDE),
            "CONDENSATE_CODEX_BINARY": str(CODEX),
        },
    )
    process.home.mkdir()
    process.start()
    return process


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = start_daemon(tmp_path, fake)
    yield process
    process.close()


def step(engine: str, command: str) -> ToolCalls:
    """One shell call; a Codex reply carries a reasoning item, as its default model's do."""
    name = SHELL[engine]
    arguments = {"command": command} if engine == "claude" else {"cmd": command}
    thinking = None if engine == "claude" else REASONING
    return ToolCalls([Call(name, arguments)], text="Counting.", thinking=thinking)


async def start(
    session: aiohttp.ClientSession, daemon: DaemonProcess, workdir: Path, engine: str
) -> str:
    body = {
        "engine": engine,
        "model": thread_model(engine),
        "cwd": str(workdir),
        "brief": "Count with the shell, one command at a time.",
    }
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    return str(created["id"])


def generations(fake: FakeModelServer, engine: str) -> list[RecordedRequest]:
    endpoint = "messages" if engine == "claude" else "responses"
    return [r for r in fake.requests if r.endpoint == endpoint and r.model == MODELS[engine]]


def signed(engine: str, request: RecordedRequest) -> int:
    """The thinking blocks (reasoning items) the request carried to the provider."""
    if engine == "claude":
        return sum(
            1
            for m in request.body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "thinking"
        )
    return sum(1 for i in request.body["input"] if i.get("type") == "reasoning")


def produced(engine: str, request: RecordedRequest) -> int:
    """The thinking the CLI itself holds at this request: one block for each of the model's
    turns it sends back (every reply on these models carried one)."""
    if engine == "claude":
        return sum(1 for m in request.body["messages"] if m["role"] == "assistant")
    return sum(1 for i in request.body["input"] if i.get("type") == "function_call")


def dropped(events: Events) -> tuple[int, int]:
    usages = [e for e in events if e["kind"] == "model.usage"]
    return sum(u["thinking_dropped"] for u in usages), sum(
        u["thinking_dropped_tokens"] for u in usages
    )


@pytest.mark.parametrize("engine", ["claude", "codex"])
async def test_windows_in_flight_keep_every_request_valid_and_log_the_thinking_they_cost(
    daemon: DaemonProcess, fake: FakeModelServer, workdir: Path, engine: str
) -> None:
    """A long turn past the line: the gateway takes cheap windows in flight (receipts in
    place of the results they clear), and takes out the thinking produced before each change
    that came after it, which the provider would refuse (Claude) or drop (Codex). No request
    is refused, the turn completes, every block the CLI holds and the provider did not get is
    logged as dropped (and shown by GET /threads/:id and /metrics), the thinking produced after
    the last change still reaches the model, and the fake charged the re-thinking."""
    fake.queue(
        *[step(engine, f"seq {i} {i + 700}") for i in range(14)],
        Text("all counted"),
        model=MODELS[engine],
    )
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine)
        events = await turn_ended(session, daemon, thread)
        _, shown = await call(session, daemon, "GET", f"/threads/{thread}")
        metrics = await scrape(session, daemon)

    assert [e["window_kind"] for e in events if e["kind"] == "window"], "no window was taken"
    sent = generations(fake, engine)
    assert all(r.status == 200 for r in sent)
    blocks, tokens = dropped(events)
    assert shown["costs"]["thinkingDropped"] == {"blocks": blocks, "tokens": tokens}
    # The metrics name a model as the thread does (provider:name).
    labels = {"engine": engine, "model": thread_model(engine)}
    assert value(metrics, "condensate_thinking_dropped_blocks_total", labels) == blocks
    assert value(metrics, "condensate_thinking_dropped_tokens_total", labels) == tokens
    last = sent[-1]
    assert blocks == produced(engine, last) - signed(engine, last) > 0
    assert tokens > 0
    assert signed(engine, last) > 0
    assert sum(r.rethink_tokens for r in sent) > 0
    check_pairs(daemon, thread)


async def test_a_restart_in_the_middle_keeps_every_request_valid(
    tmp_path: Path, fake: FakeModelServer, workdir: Path
) -> None:
    """The daemon restarts after a turn with windows taken in flight: its gateway no longer
    knows which thinking it saw produced, so it keeps only what comes before its first change
    of each request; the next turn's requests are all valid and the turn completes."""
    engine = "claude"
    fake.queue(*[step(engine, f"seq {i} {i + 700}") for i in range(14)], Text("counted"))
    daemon = start_daemon(tmp_path, fake)
    try:
        async with aiohttp.ClientSession() as session:
            thread = await start(session, daemon, workdir, engine)
            events = await turn_ended(session, daemon, thread)
            assert [e for e in events if e["kind"] == "window"]
    finally:
        daemon.close()
    fake.queue(*[step(engine, f"seq {i} {i + 700}") for i in range(3)], Text("counted again"))
    daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            status, _ = await call(
                session, daemon, "POST", f"/threads/{thread}/messages", {"text": "Three more."}
            )
            assert status == 202
            events = await turn_ended(session, daemon, thread, events[-1]["seq"])
    finally:
        daemon.close()
    sent = generations(fake, engine)
    assert all(r.status == 200 for r in sent)
    assert signed(engine, sent[-1]) > 0


def subagent_call() -> ToolCalls:
    """Claude Code's Agent tool: a subagent with a context of its own."""
    task = {
        "description": "Count in a subagent",
        "prompt": "Run `seq 1 3` and report the last number.",
        "subagent_type": "general-purpose",
    }
    return ToolCalls([Call("Agent", task)], text="Asking a subagent.")


def opens_with_brief(request: RecordedRequest) -> bool:
    first = request.body["messages"][0]
    return "Count with the shell" in json.dumps(first)


async def test_a_subagents_requests_stay_valid_beside_the_sessions(
    daemon: DaemonProcess, fake: FakeModelServer, workdir: Path
) -> None:
    """After windows in flight, the session starts a subagent (Claude Code's Agent tool: a
    conversation of its own, on the same pass): the subagent's requests reach the provider
    without anything of the thread's (no receipt), every request is valid, the turn completes,
    and the session's thinking after the last change still reaches the model."""
    engine = "claude"
    fake.queue(
        *[step(engine, f"seq {i} {i + 700}") for i in range(14)],
        subagent_call(),
        *[Text("The subagent is counting; done.") for _ in range(4)],
        model=MODELS[engine],
    )
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine)
        events = await turn_ended(session, daemon, thread)

    sent = generations(fake, engine)
    assert all(r.status == 200 for r in sent)
    assert [e for e in events if e["kind"] == "window"]
    theirs = [r for r in sent if not opens_with_brief(r)]
    assert theirs, "no request of the subagent's reached the provider"
    assert not [r.number for r in theirs if "[receipt seq" in json.dumps(r.body)]
    ours = [r for r in sent if opens_with_brief(r)]
    assert signed(engine, ours[-1]) > 0
