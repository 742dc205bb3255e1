"""The agent's own hand on its context on the real ``claude`` and ``codex`` CLIs, through
Condensate's MCP server: an agent-reset thread's ``condense``, with the reset's exact message
order on the fake's request log (the gateway cuts each request where the reset cut the view);
a large output paged and read back with ``read_tool_output``; what a reset let go brought back
with ``recall``. Real daemon, fake model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from condensate.core import context_tools, reset
from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    Overflow,
    RecordedRequest,
    Text,
    ToolCalls,
)
from tests.e2e import test_claude_code as claude
from tests.e2e import test_codex as codex
from tests.e2e.conftest import CLAUDE
from tests.e2e.log import Events, check_pairs, kind, turn_ended, until
from tests.integration.daemon import DaemonProcess, call

NOTE = "NOTE-TO-SELF: my notes are in NOTES.md; next, count to 20."
BRIEF = "Count things with the shell. BRIEF-MARKER-reset"
SAVED = "NOTES-SAVED-42"
ENGINES = ("claude", "codex")


def start_daemon(tmp_path: Path, fake: FakeModelServer, **env: str) -> DaemonProcess:
    """Codex's end-to-end daemon, running Claude Code too."""
    windows = {f"anthropic:{claude.MODEL}": 200_000, f"openai:{codex.MODEL}": codex.WINDOW}
    return codex.start_daemon(
        tmp_path,
        fake,
        CONDENSATE_MODEL_WINDOWS=json.dumps(windows),
        CONDENSATE_CLAUDE_BINARY=str(CLAUDE),
        **env,
    )


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = start_daemon(tmp_path, fake)
    yield process
    process.close()


def model_of(engine: str) -> str:
    return claude.MODEL if engine == "claude" else codex.MODEL


def shell(engine: str, command: str, text: str = "") -> ToolCalls:
    return claude.bash(command, text) if engine == "claude" else codex.shell(command, text)


def context_call(engine: str, tool: str, arguments: dict[str, Any], ident: str) -> Call:
    """A call of one of Condensate's tools, as each CLI offers it: Claude Code by its MCP
    name, Codex in the MCP server's namespace."""
    if engine == "claude":
        return Call(f"mcp__condensate__{tool}", arguments, id=ident)
    return Call(tool, arguments, id=ident, namespace="mcp__condensate")


def generations(fake: FakeModelServer, engine: str) -> list[RecordedRequest]:
    return claude.generations(fake) if engine == "claude" else codex.generations(fake)


def conversation(engine: str, request: RecordedRequest) -> list[dict[str, Any]]:
    """The request's messages (Claude Code) or input items (Codex)."""
    key = "messages" if engine == "claude" else "input"
    return list(request.body[key])


def last_user(engine: str, request: RecordedRequest) -> dict[str, Any]:
    """The request's last user message or item (a system-role message of Claude Code's own may
    follow it: its environment, on a session's first request)."""
    return [m for m in conversation(engine, request) if m.get("role") == "user"][-1]


def texts(item: dict[str, Any]) -> list[str]:
    """The text blocks of a message or input item."""
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [str(b.get("text")) for b in content or [] if isinstance(b, dict) and "text" in b]


def result_text(engine: str, request: RecordedRequest, call_id: str) -> str:
    """What the request shows the model as the result of ``call_id``."""
    for item in conversation(engine, request):
        if engine == "codex":
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                output = item["output"]
                return output if isinstance(output, str) else "\n".join(texts({"content": output}))
            continue
        for block in item.get("content") or []:
            if isinstance(block, dict) and block.get("tool_use_id") == call_id:
                content = block["content"]
                return content if isinstance(content, str) else "".join(texts(block))
    msg = f"no result of {call_id} in the request"
    raise AssertionError(msg)


async def start(
    session: aiohttp.ClientSession, daemon: DaemonProcess, workdir: Path, engine: str, **more: Any
) -> str:
    model = f"anthropic:{claude.MODEL}" if engine == "claude" else f"openai:{codex.MODEL}"
    status, created = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {"engine": engine, "model": model, "cwd": str(workdir), "brief": BRIEF, **more},
    )
    assert status == 201, created
    return str(created["id"])


def queue_reset(fake: FakeModelServer, engine: str) -> None:
    """The agent saves its notes, condenses alone with a message, and carries on."""
    fake.queue(
        shell(engine, f"echo {SAVED} | tee NOTES.md", text="Saving my notes."),
        ToolCalls(
            [context_call(engine, "condense", {context_tools.MESSAGE: NOTE}, "call_cond1")],
            text="Condensing now.",
        ),
        Text("Read my notes; carrying on."),
        model=model_of(engine),
    )


async def steer(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, text: str, last: int
) -> Events:
    status, _ = await call(session, daemon, "POST", f"/threads/{thread}/messages", {"text": text})
    assert status == 202
    return await turn_ended(session, daemon, thread, last)


@pytest.mark.parametrize("engine", ENGINES)
async def test_condense_starts_the_providers_context_again(daemon, fake, workdir, engine):
    """Warned or not, the agent writes its note, calls condense alone, and the next request
    starts exactly: the fixed context (the system prompt, the CLI's own environment), the
    environment's notice, the agent's real call with its id and arguments, its result with the
    recovery text and the message; the brief and the work before are gone. The log holds the
    request, the result and the commit in one batch; a message sent afterwards follows in
    order, the agent's reply between."""
    queue_reset(fake, engine)
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset={})
        events = await turn_ended(session, daemon, thread)
        fake.queue(Text("Counting to 20 as my notes say."), model=model_of(engine))
        events = await steer(session, daemon, thread, "NEXT-STEP please", events[-1]["seq"])
        status, shown = await call(session, daemon, "GET", f"/threads/{thread}")

    kinds = [e["kind"] for e in events]
    at = kinds.index("reset.requested")
    assert kinds[at : at + 3] == ["reset.requested", "tool.result", "reset.committed"]
    assert events[at]["message"] == NOTE
    assert status == 200
    assert shown["reset"]["resets"] == 1

    sent = generations(fake, engine)
    assert BRIEF in json.dumps(conversation(engine, sent[1]))
    after = conversation(engine, sent[2])
    assert BRIEF not in json.dumps(after)
    assert SAVED not in json.dumps(after)  # the notes' output went with the reset
    if engine == "claude":
        # On its default model Claude Code keeps a system-role message of its own (its
        # environment) after the first user message: fixed context, kept.
        notice, *own, called, result = after
        assert [m["role"] for m in own] == ["system"] * len(own)
        assert notice["role"] == "user"
        assert texts(notice)[-1] == reset.NOTICE
        assert all(t.startswith("<system-reminder>") for t in texts(notice)[:-1])
        use = next(b for b in called["content"] if b["type"] == "tool_use")
        assert (use["id"], use["input"]) == ("call_cond1", {context_tools.MESSAGE: NOTE})
        assert result["content"][0]["tool_use_id"] == "call_cond1"
    else:
        roles = [(i.get("type"), i.get("role")) for i in after]
        notice_at = next(i for i, item in enumerate(after) if texts(item) == [reset.NOTICE])
        assert texts(after[notice_at - 1])[0].startswith("<environment_context>")
        assert all(role == "developer" for _, role in roles[: notice_at - 1])
        assert roles[notice_at + 1 :] == [
            ("message", "assistant"),
            ("function_call", None),
            ("function_call_output", None),
        ]
        assert after[notice_at + 2]["call_id"] == "call_cond1"
        assert json.loads(after[notice_at + 2]["arguments"]) == {context_tools.MESSAGE: NOTE}
    assert result_text(engine, sent[2], "call_cond1") == reset.recovery(NOTE)

    later = json.dumps(conversation(engine, sent[3]))
    assert BRIEF not in later
    order = [later.index(s) for s in (reset.NOTICE, "Read my notes", "NEXT-STEP please")]
    assert order == sorted(order)
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_condense_beside_another_call_resets_nothing(daemon, fake, workdir, engine):
    """condense in the same response as another call is an error result, and nothing is
    reset: the provider sees that error as the call's result, and the whole history."""
    fake.queue(
        ToolCalls(
            [
                *shell(engine, "echo side-by-side").calls,
                context_call(engine, "condense", {}, "call_cond2"),
            ]
        ),
        Text("I will condense alone next time."),
        model=model_of(engine),
    )
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset={})
        events = await turn_ended(session, daemon, thread)

    assert not [e for e in events if e["kind"].startswith("reset.")]
    refused = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "call_cond2")
    assert refused["is_error"] is True
    assert "must be the only tool call" in refused["output"]
    last = generations(fake, engine)[-1]
    assert "must be the only tool call" in result_text(engine, last, "call_cond2")
    assert BRIEF in json.dumps(conversation(engine, last))
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_recall_brings_back_what_the_reset_let_go(daemon, fake, workdir, engine):
    """After a reset the agent recalls, by its seq, the output the reset let go; the
    original comes back through the MCP server as the call's result."""
    queue_reset(fake, engine)
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset={})
        events = await turn_ended(session, daemon, thread)
        saved = next(e for e in events if e["kind"] == "tool.result" and SAVED in e["output"])
        fake.queue(
            ToolCalls([context_call(engine, "recall", {"seq": saved["seq"]}, "call_recall1")]),
            Text("Recalled."),
            model=model_of(engine),
        )
        events = await steer(session, daemon, thread, "What did you save?", events[-1]["seq"])

    recalled = next(
        e for e in events if e["kind"] == "tool.result" and e["call_id"] == "call_recall1"
    )
    assert recalled["is_error"] is False
    assert recalled["output"] == saved["output"]
    assert SAVED in result_text(engine, generations(fake, engine)[-1], "call_recall1")
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_large_output_is_paged_and_read_on(daemon, fake, workdir, engine):
    """A result over the thread's output cap reaches the provider as its beginning and a
    reference (the log keeps it whole); read_tool_output with that reference returns the
    page from the offset it names."""
    fake.queue(shell(engine, "seq 1 4000", text="Counting."), Text("Long."), model=model_of(engine))
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, outputCap=300)
        events = await turn_ended(session, daemon, thread)
        counted = next(e for e in events if e["kind"] == "tool.result" and "3999" in e["output"])
        seen = result_text(engine, generations(fake, engine)[-1], counted["call_id"])
        assert seen.startswith(counted["output"][:200])
        assert "3999" not in seen
        assert f'read_tool_output(ref="{counted["seq"]}", offset=' in seen
        offset = int(seen.rsplit("offset=", 1)[1].split(",", 1)[0])
        page = {"ref": str(counted["seq"]), "offset": offset, "length": 500}
        fake.queue(
            ToolCalls([context_call(engine, "read_tool_output", page, "call_page1")]),
            Text("Read on."),
            model=model_of(engine),
        )
        events = await steer(session, daemon, thread, "Read on, please.", events[-1]["seq"])

    read = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "call_page1")
    assert read["output"].startswith(counted["output"][offset : offset + 500])
    shown = result_text(engine, generations(fake, engine)[-1], "call_page1")
    assert counted["output"][offset : offset + 500] in shown
    check_pairs(daemon, thread)


def carried(engine: str, request: RecordedRequest, text: str) -> bool:
    return text in json.dumps(conversation(engine, request))


@pytest.mark.parametrize("engine", ENGINES)
async def test_staged_warnings_ride_in_requests_and_rearm_after_a_reset(
    daemon, fake, workdir, engine
):
    """An agent-reset thread over a level of its budget is warned in the next request (the
    gateway adds the warning at its end), once a cycle: the warning is logged before that
    request's count, the next request carries it where it was added (not again at its end: a
    notice that came and went would break the model's signed thinking), and after the reset,
    which cuts it away, the level is told again."""
    queue_reset(fake, engine)
    # Claude Code's first request on its default model is estimated at 20k (its fixed part),
    # counted at ~11.5k, and the one after the reset estimated at ~9.7k (its measured baseline,
    # ~9.2k, and the view); Codex's at 10k, ~8.4k, and ~2.8k: each crosses a level first, no
    # new one next, and one again after the reset.
    budget = 12_000 if engine == "claude" else 3_300
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset={"budget": budget})
        events = await turn_ended(session, daemon, thread)

    warned = [e for e in events if e["kind"] == "reset.warned"]
    assert len(warned) == 2, warned
    first, again = warned
    assert first["budget"] == again["budget"] == budget
    assert events[events.index(first) + 1]["kind"] == "model.usage"
    assert (
        events.index(first)
        < next(i for i, e in enumerate(events) if e["kind"] == "reset.committed")
        < events.index(again)
    )
    sent = generations(fake, engine)
    assert [carried(engine, r, first["text"]) for r in sent] == [True, True, False]
    assert carried(engine, sent[2], again["text"])
    assert first["text"] in texts(last_user(engine, sent[0]))
    assert first["text"] not in json.dumps(conversation(engine, sent[1])[-1])
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_near_the_line_the_conversation_carries_a_notice(tmp_path, fake, workdir, engine):
    """A windowed thread that asks for them gets an URGENT notice after the last message of a
    request near its line, the system prompt (Anthropic's system, the Responses
    instructions) unchanged."""
    process = start_daemon(
        tmp_path,
        fake,
        CONDENSATE_WINDOW_CEILING_CLAUDE="35000",
        CONDENSATE_WINDOW_CEILING_PI="21000",
    )
    fake.queue(Text("Nothing to count."), model=model_of(engine))
    try:
        async with aiohttp.ClientSession() as session:
            thread = await start(session, process, workdir, engine, nearLimitWarnings=True)
            await turn_ended(session, process, thread)
    finally:
        process.close()

    (request,) = generations(fake, engine)
    system = json.dumps(request.body.get("system" if engine == "claude" else "instructions"))
    assert "[Condensate]" not in system
    assert texts(last_user(engine, request))[-1].startswith("[Condensate] URGENT: your context is")


EMERGENCY_MODEL = "claude-haiku-5-5"
SUMMARY = "EMERGENCY-SUMMARY: the notes are saved in NOTES.md; next, count to 20."


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_provider_overflow_is_condensed_by_the_emergency_model(
    daemon, fake, workdir, engine
):
    """The provider refuses an agent-reset thread's prompt as too long: the emergency model
    summarizes the view, and the next session starts with the exact emergency notice and the
    summary; the turn goes on there. Nothing is windowed."""
    fake.queue(
        shell(engine, f"echo {SAVED}", text="Working."),
        Overflow(),
        Text("Carrying on from the summary."),
        model=model_of(engine),
    )
    fake.queue(Text(SUMMARY), model=EMERGENCY_MODEL)
    policy = {"emergencyModel": f"anthropic:{EMERGENCY_MODEL}"}
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset=policy)
        events = await turn_ended(session, daemon, thread)

    kinds = [e["kind"] for e in events]
    assert "window" not in kinds
    assert kinds.index("model.refused") < kinds.index("reset.emergency")
    condensed = next(e for e in events if e["kind"] == "reset.emergency")
    assert condensed["summary"] == SUMMARY
    sent = generations(fake, engine)
    refused = next(i for i, r in enumerate(sent) if r.reply == "overflow")
    opening = json.dumps(conversation(engine, sent[refused + 1]))
    assert json.dumps(reset.EMERGENCY_NOTICE)[1:-1] in opening
    assert SUMMARY in opening
    final = [e for e in events if e["kind"] == "message.assistant"][-1]
    assert final["text"] == "Carrying on from the summary."
    check_pairs(daemon, thread)


@pytest.mark.parametrize("engine", ENGINES)
async def test_an_overflow_without_an_emergency_model_stops_the_turn(daemon, fake, workdir, engine):
    """With no emergency model the refused turn fails with the sentence that says so; the
    history is kept (no window, no reset) and no other session is started."""
    fake.queue(shell(engine, f"echo {SAVED}", text="Working."), Overflow(), model=model_of(engine))
    async with aiohttp.ClientSession() as session:
        thread = await start(session, daemon, workdir, engine, reset={})
        events = await until(session, daemon, thread, kind("turn.ended"))

    done = next(e for e in events if e["kind"] == "turn.ended")
    assert done["outcome"] == "failed"
    assert done["reason"] == reset.NO_EMERGENCY
    kinds = [e["kind"] for e in events]
    assert "window" not in kinds
    assert not [k for k in kinds if k.startswith("reset.")]
    line = next(e for e in events if e["kind"] == "system.line")
    assert line["code"] == "emergency-unavailable"
    check_pairs(daemon, thread)
