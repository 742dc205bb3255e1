"""The agent-chosen reset on the native engine, through a real daemon and the fake model: the
agent writes its notes, calls ``condense`` with a message to its future self, and its next
request holds exactly the notice, that call and its result (and any user input that arrived
after the request that produced it); it reads its notes and carries on. Invalid calls reset
nothing; an operator's compaction is refused; a restart rebuilds the reset view from the log
without running the tool again."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.core import context_tools, reset
from condensate.events import (
    AssistantMessage,
    Event,
    ResetCommitted,
    ResetPolicy,
    ResetRequested,
    ThreadCreated,
    ToolCall,
    ToolResult,
    TurnStarted,
    UserMessage,
    now_utc,
)
from condensate.eventlog.sqlite import SqliteStore
from condensate.testing.fake_model import (
    Call,
    Fail,
    FakeModelServer,
    Overflow,
    Slow,
    Text,
    ToolCalls,
)
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for
from tests.integration.harness import runtime_on

NOTE = "Read notes.md. Tests passed; next, review the diff."
_models = itertools.count(1)


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("reset"), fake.url) as process:
        yield process


@pytest.fixture
async def session() -> Any:
    async with aiohttp.ClientSession() as http:
        yield http


def fresh_model() -> str:
    """A model of this test's own, so that its scripted replies reach its thread only."""
    return f"claude-reset-{next(_models)}"


async def start(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    work: Path,
    model: str,
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    await anyio.Path(work).mkdir(exist_ok=True)
    body = {
        "model": f"anthropic:{model}",
        "cwd": str(work),
        "brief": "Release version 2: run the tests, then review the diff.",
        "reset": policy or {},
    }
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    return dict(created)


async def ended(session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str) -> Any:
    return await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended")


def sent(fake: FakeModelServer, model: str) -> list[list[dict[str, Any]]]:
    """The messages of each request the fake had for ``model``, in order, without the prompt
    cache's breakpoints (where they go is tested in tests/integration/test_native_caching.py)."""
    return [unmarked(r.body["messages"]) for r in fake.requests if r.model == model and r.body]


def unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` keys."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


def condense(message: str | None = NOTE, call_id: str = "c9") -> Call:
    return Call(reset.TOOL, {} if message is None else {context_tools.MESSAGE: message}, id=call_id)


async def test_the_agent_saves_notes_condenses_reads_them_and_carries_on(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The whole path: a note written, condense called with a message, then a request that
    starts exactly with the notice, the agent's own call (id and arguments) and its result
    with the message, nothing of the history before; the agent reads its note there and the
    turn completes. The log holds the request and the committed record."""
    model = fresh_model()
    fake.queue(
        ToolCalls([Call("write", {"path": "notes.md", "content": "next: review the diff"})]),
        ToolCalls([condense()], text="Notes saved."),
        ToolCalls([Call("read", {"path": "notes.md"}, id="r1")]),
        Text("Reviewed the diff; released."),
        model=model,
    )
    thread = await start(session, daemon, tmp_path / "w", model)
    assert thread["reset"]["warnings"] == [0.75, 0.80, 0.85, 0.90]
    events = await ended(session, daemon, thread["id"])

    requests = sent(fake, model)
    assert len(requests) == 4
    after = requests[2]
    assert [m["role"] for m in after] == ["user", "assistant", "user"]
    assert after[0]["content"] == [{"type": "text", "text": reset.NOTICE}]
    (said, used) = after[1]["content"]
    assert said == {"type": "text", "text": "Notes saved."}
    assert (used["type"], used["id"], used["name"]) == ("tool_use", "c9", reset.TOOL)
    assert used["input"] == {context_tools.MESSAGE: NOTE}
    (result,) = after[2]["content"]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", "c9")
    assert result["content"] == reset.recovery(NOTE)
    assert "Release version 2" not in str(after)  # the brief went with the history
    assert "next: review the diff" in str(requests[3])  # the note, read after the reset
    assert kinds(events).count("reset.requested") == 1
    assert kinds(events).count("reset.committed") == 1
    assert events[-1]["outcome"] == "completed"
    _, shown = await call(session, daemon, "GET", f"/threads/{thread['id']}")
    assert shown["reset"]["resets"] == 1


async def test_condense_beside_another_call_is_an_error_and_resets_nothing(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A response that calls condense and another tool: the other runs, condense gets an
    error result saying why, and the next request still holds the whole history."""
    model = fresh_model()
    fake.queue(
        ToolCalls([Call("write", {"path": "a.txt", "content": "x"}, id="w1"), condense()]),
        Text("I will condense alone next time."),
        model=model,
    )
    thread = await start(session, daemon, tmp_path / "w", model)
    events = await ended(session, daemon, thread["id"])
    results = {e["call_id"]: e for e in events if e["kind"] == "tool.result"}
    assert not results["w1"]["is_error"]
    assert results["c9"]["is_error"]
    assert "only tool call" in results["c9"]["output"]
    assert "reset.committed" not in kinds(events)
    assert "Release version 2" in str(sent(fake, model)[-1])
    assert (tmp_path / "w" / "a.txt").read_text() == "x"


async def test_a_message_over_the_limit_is_an_error_and_resets_nothing(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A message to the future self over 16,384 UTF-16 code units: an error result naming
    the limit, nothing reset."""
    model = fresh_model()
    fake.queue(ToolCalls([condense("y" * 16_385)]), Text("shortened"), model=model)
    thread = await start(session, daemon, tmp_path / "w", model)
    events = await ended(session, daemon, thread["id"])
    (result,) = [e for e in events if e["kind"] == "tool.result"]
    assert result["is_error"]
    assert "16,384" in result["output"]
    assert "reset.committed" not in kinds(events)


async def test_a_reset_without_a_message_has_no_message_block(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Without a message the result is the recovery instructions alone."""
    model = fresh_model()
    fake.queue(ToolCalls([condense(None)]), Text("fresh"), model=model)
    thread = await start(session, daemon, tmp_path / "w", model)
    await ended(session, daemon, thread["id"])
    (result,) = sent(fake, model)[-1][-1]["content"]
    assert result["content"] == reset.RECOVERY


async def test_input_that_arrives_while_the_condense_call_is_written_is_kept_in_order(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Two messages sent while the reply that calls condense streams: the request after the
    reset holds them after the call's result, in the order they came."""
    model = fresh_model()
    fake.queue(
        Slow(ToolCalls([condense()]), chunk_delay=0.3, chunks=8),
        Text("on both"),
        model=model,
    )
    thread = await start(session, daemon, tmp_path / "w", model)
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "turn.started")
    with anyio.fail_after(10):
        while len(sent(fake, model)) < 1:  # noqa: ASYNC110 - the fake has no event to wait on
            await anyio.sleep(0.05)
    for text in ("first steer", "second steer"):
        status, _ = await call(
            session, daemon, "POST", f"/threads/{thread['id']}/messages", {"text": text}
        )
        assert status == 202
    await wait_for(session, daemon, thread["id"], lambda e: e.get("text") == "on both")
    after = sent(fake, model)[1]
    assert [m["role"] for m in after] == ["user", "assistant", "user"]
    blocks = after[2]["content"]
    assert blocks[0]["type"] == "tool_result"
    assert [b["text"] for b in blocks[1:]] == ["first steer", "second steer"]


async def test_an_operators_compaction_of_a_reset_thread_is_refused(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """POST /threads/:id/compact for an agent-reset thread is 409 agent-controlled-
    condensation, and nothing is logged for it."""
    model = fresh_model()
    fake.queue(Text("idle"), model=model)
    thread = await start(session, daemon, tmp_path / "w", model)
    before = await ended(session, daemon, thread["id"])
    status, refused = await call(
        session, daemon, "POST", f"/threads/{thread['id']}/compact", {"mode": "summary"}
    )
    assert status == 409, refused
    assert refused["error"] == "agent-controlled-condensation"
    _, page = await call(session, daemon, "GET", f"/threads/{thread['id']}/tail")
    assert len(page["events"]) == len(before)


async def test_a_restart_rebuilds_the_reset_view_without_running_the_tool_again(
    fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """After a restart the thread's next request starts with the same notice, call and
    result, then the new message; no second reset is written."""
    model = fresh_model()
    fake.queue(ToolCalls([condense()]), Text("reset done"), Text("after restart"), model=model)
    home = tmp_path / "home"
    home.mkdir()
    with running_daemon(home, fake.url) as first:
        thread = await start(session, first, tmp_path / "w", model)
        await ended(session, first, thread["id"])
    before = sent(fake, model)[-1]
    with running_daemon(home, fake.url) as second:
        status, _ = await call(
            session, second, "POST", f"/threads/{thread['id']}/messages", {"text": "next?"}
        )
        assert status == 202
        events = await wait_for(
            session, second, thread["id"], lambda e: e.get("text") == "after restart"
        )
    again = sent(fake, model)[-1]
    assert again[:3] == before[:3]
    assert kinds(events).count("reset.committed") == 1
    assert "next?" in str(again[3:])


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"warnings": [0.9, 0.8]}, "ascend"),
        ({"warnings": [0.5, 1.5]}, "at most 1"),
        ({"budget": 0}, "budget"),
        ({"emergencyModel": "nowhere:model"}, "nowhere"),
    ],
)
async def test_a_bad_reset_policy_is_refused_naming_the_problem(
    daemon: DaemonProcess,
    session: aiohttp.ClientSession,
    tmp_path: Path,
    policy: dict[str, Any],
    named: str,
) -> None:
    """Warning levels out of order or outside (0, 1], a budget below 1 or an emergency model
    of no known provider: 422, naming it, and no thread."""
    body = {"model": "anthropic:m", "cwd": str(tmp_path), "brief": "b", "reset": policy}
    status, refused = await call(session, daemon, "POST", "/threads", body)
    assert status == 422, refused
    assert named in refused["detail"]


def last_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text blocks of a request's last message."""
    return [b["text"] for b in messages[-1]["content"] if b.get("type") == "text"]


async def test_a_warning_comes_before_the_agent_saves_notes_and_condenses(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The whole path with its warning: a big read takes the context past a level; the next
    request carries one warning, the highest level the provider's last count crossed, at
    the end of its last message; the agent saves a note, condenses, reads the note back in
    the fresh context and finishes. The warning is logged once, where the model read it, and
    the reset rearms the levels (no warning after it)."""
    model = fresh_model()
    work = tmp_path / "w"
    await anyio.Path(work).mkdir()
    await anyio.Path(work / "big.txt").write_text(
        "the quick brown fox jumps over a lazy dog\n" * 2_000
    )
    fake.queue(
        ToolCalls([Call("read", {"path": "big.txt"}, id="r0")]),
        ToolCalls([Call("write", {"path": "notes.md", "content": "next: review the diff"})]),
        ToolCalls([condense()]),
        ToolCalls([Call("read", {"path": "notes.md"}, id="r1")]),
        Text("Reviewed the diff; released."),
        model=model,
    )
    # The read comes back capped at 30,000 characters, about 6,500 tokens: with the fixed
    # context, past 75 % of 10,000 once the provider has counted it, and not before.
    thread = await start(session, daemon, work, model, {"budget": 10_000})
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "completed"

    warned = [e for e in events if e["kind"] == "reset.warned"]
    assert len(warned) == 1
    (warning,) = warned
    counts = [e for e in events if e["kind"] == "model.usage"]
    measured = counts[1]["input"] + counts[1]["cache_read"] + counts[1]["cache_write"]
    assert warning["used"] == measured
    assert warning["level"] == max(x for x in (0.75, 0.80, 0.85, 0.90) if measured / 10_000 >= x)
    requests = sent(fake, model)
    assert warning["text"] not in str(requests[:2])
    assert last_texts(requests[2])[-1] == warning["text"]
    assert requests[3][0]["content"] == [{"type": "text", "text": reset.NOTICE}]
    assert warning["text"] not in str(requests[3:])
    assert "next: review the diff" in str(requests[4])
    assert kinds(events).index("reset.warned") < kinds(events).index("reset.committed")


async def test_a_failed_request_leaves_its_warning_for_the_next_one(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A budget the fixed context alone passes: the first request carries the 90 % warning
    and fails (a 500); the thread's next request carries it again, succeeds, and logs it;
    the request after that carries none."""
    model = fresh_model()
    fake.queue(Fail(500), Text("first answer"), Text("second answer"), model=model)
    thread = await start(session, daemon, tmp_path / "w", model, {"budget": 100})
    await ended(session, daemon, thread["id"])
    path = f"/threads/{thread['id']}/messages"
    status, _ = await call(session, daemon, "POST", path, {"text": "try again"})
    assert status == 202
    await wait_for(session, daemon, thread["id"], lambda e: e.get("text") == "first answer")
    status, _ = await call(session, daemon, "POST", path, {"text": "and once more"})
    assert status == 202
    events = await wait_for(
        session, daemon, thread["id"], lambda e: e.get("text") == "second answer"
    )
    requests = sent(fake, model)
    assert len(requests) == 3
    warned = [e for e in events if e["kind"] == "reset.warned"]
    assert [w["level"] for w in warned] == [0.90]
    text = warned[0]["text"]
    carried = last_texts(requests[0])[-1]  # the failed one carried the 90 % warning,
    assert carried.startswith("[Condensate] Your context is at ")
    assert "of its 100-token budget" in carried
    assert last_texts(requests[1])[-1] == text  # and so did the next, which logged it
    assert not last_texts(requests[2])[-1].startswith("[Condensate]")
    assert str(requests[2]).count(text) == 1  # in the history, once, where it was read


async def test_a_kill_between_the_call_and_its_reset_resets_nothing(tmp_path: Path) -> None:
    """A daemon killed after the agent's condense call was logged and before the reset's
    batch: the restarted one closes the call as interrupted, writes no reset, and resumes
    the turn over the whole history (the agent may call condense again)."""
    home = tmp_path / "home"
    await anyio.Path(home).mkdir()
    store = SqliteStore.open(home / "condensate.db")
    at = now_utc()
    model = "claude-sonnet-4-5"
    condensing = ToolCall(id="c9", name=reset.TOOL, arguments={})
    log: list[Event] = [
        ThreadCreated(
            at=at, engine="api", model=f"anthropic:{model}", cwd=str(tmp_path), reset=ResetPolicy()
        ),
        UserMessage(at=at, text="Release version 2."),
        TurnStarted(at=at),
        AssistantMessage(at=at, text="Notes saved.", tool_calls=(condensing,)),
    ]
    await store.append("t-killed", log, [0, 10, 0, 20])
    await store.close()
    async with FakeModelServer() as fake:
        fake.queue(Text("resumed"))
        async with runtime_on(home, fake, recovered=True) as runtime:
            thread = runtime.get("t-killed")
            with anyio.fail_after(30):
                while not any(
                    isinstance(e.event, AssistantMessage) and e.event.text == "resumed"
                    for e in thread.projection.entries
                ):
                    await thread.changed.wait()
            events = [s.event for s in await runtime.log.events("t-killed")]
        (request,) = [r.body["messages"] for r in fake.requests if r.body]
    assert not [e for e in events if isinstance(e, ResetRequested | ResetCommitted)]
    (closed,) = [e for e in events if isinstance(e, ToolResult) and e.call_id == "c9"]
    assert closed.output.startswith("Interrupted")
    assert "Release version 2." in str(request)
    assert thread.projection.resets == 0


def emergency_model() -> str:
    return f"claude-emergency-{next(_models)}"


def condensing_on(model: str) -> dict[str, Any]:
    """A reset policy whose emergency condenser runs on ``model``."""
    return {"emergencyModel": f"anthropic:{model}"}


async def turn_after(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, text: str, after: int
) -> list[dict[str, Any]]:
    """Send ``text``; the log once the turn it starts (after seq ``after``) has ended."""
    status, _ = await call(session, daemon, "POST", f"/threads/{thread}/messages", {"text": text})
    assert status == 202
    return await wait_for(
        session, daemon, thread, lambda e: e["kind"] == "turn.ended" and e["seq"] > after
    )


async def test_a_provider_overflow_is_summarized_on_the_emergency_model_and_the_work_goes_on(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Warnings ignored, the provider refuses the prompt as too long: the emergency model
    summarizes the view (its previews), and the next request is exactly the emergency notice
    and the summary, as one user message; the turn goes on and completes. The summary's call
    is billed as a side call."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Overflow(), Text("continued from the summary"), model=model)
    fake.queue(Text("SUMMARY: the user wants version 2 released."), model=condenser)
    thread = await start(session, daemon, tmp_path / "w", model, condensing_on(condenser))
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "completed"
    (summarized,) = [r.body for r in fake.requests if r.model == condenser]
    assert "Release version 2" in str(summarized["messages"])
    after = sent(fake, model)[1]
    assert after == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": reset.EMERGENCY_NOTICE},
                {"type": "text", "text": "SUMMARY: the user wants version 2 released."},
            ],
        }
    ]
    (made,) = [e for e in events if e["kind"] == "reset.emergency"]
    assert (made["attempts"], made["model"]) == (1, f"anthropic:{condenser}")
    side = [e for e in events if e["kind"] == "model.usage" and e["side"]]
    assert len(side) == 1


async def test_input_that_arrives_during_an_emergency_condensation_is_kept_after_it(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A message sent while the emergency summary is written follows the summary in the next
    request."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Overflow(), Text("on it"), model=model)
    fake.queue(Slow(Text("SUMMARY"), chunk_delay=0.3, chunks=6), model=condenser)
    policy = {"emergencyModel": f"anthropic:{condenser}"}
    thread = await start(session, daemon, tmp_path / "w", model, policy)
    with anyio.fail_after(10):
        while not [r for r in fake.requests if r.model == condenser]:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    path = f"/threads/{thread['id']}/messages"
    status, _ = await call(session, daemon, "POST", path, {"text": "also tag it"})
    assert status == 202
    await wait_for(session, daemon, thread["id"], lambda e: e.get("text") == "on it")
    after = sent(fake, model)[1]
    texts = [b["text"] for b in after[0]["content"]]
    assert texts == [reset.EMERGENCY_NOTICE, "SUMMARY", "also tag it"]


async def test_without_an_emergency_condenser_an_overflow_stops_the_turn_and_keeps_it_all(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """No emergency model: the turn fails with a recoverable error saying so, and nothing is
    cut or summarized."""
    model = fresh_model()
    fake.queue(Overflow(), model=model)
    thread = await start(session, daemon, tmp_path / "w", model)
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "failed"
    assert "no emergency condenser" in events[-1]["reason"]
    assert not [e for e in events if e["kind"].startswith("reset.")]
    assert [e["code"] for e in events if e["kind"] == "system.line"] == ["emergency-unavailable"]


async def test_an_emergency_condenser_that_fails_every_try_stops_the_turn(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Five tries, each with shorter previews, all refused: the turn fails naming them, and
    the history is kept."""
    model, condenser = fresh_model(), emergency_model()
    work = tmp_path / "w"
    await anyio.Path(work).mkdir()
    await anyio.Path(work / "big.txt").write_text(
        "the quick brown fox jumps over a lazy dog\n" * 500
    )
    fake.queue(ToolCalls([Call("read", {"path": "big.txt"})]), Overflow(), model=model)
    fake.queue(*[Fail(500)] * 5, model=condenser)
    thread = await start(session, daemon, work, model, {"emergencyModel": f"anthropic:{condenser}"})
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "failed"
    assert "failed all 5 tries" in events[-1]["reason"]
    tries = [len(str(r.body["messages"])) for r in fake.requests if r.model == condenser]
    assert len(tries) == 5
    assert tries == sorted(tries, reverse=True)
    assert tries[0] > tries[-1]
    assert "reset.emergency" not in kinds(events)


async def test_a_second_overflow_before_any_success_is_not_condensed_again(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """After an emergency condensation the prompt overflows again before any response
    succeeds: the turn stops without a second summary, and new input does not lift that;
    once a response succeeds, a later overflow is condensed again."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Overflow(), Overflow(), Overflow(), Text("fits now"), model=model)
    fake.queue(Overflow(), Text("ok"), model=model)
    fake.queue(Text("S1"), Text("S2"), model=condenser)
    thread = await start(session, daemon, tmp_path / "w", model, condensing_on(condenser))
    first = await ended(session, daemon, thread["id"])
    assert "another is not made automatically" in first[-1]["reason"]
    second = await turn_after(session, daemon, thread["id"], "try again", first[-1]["seq"])
    assert "another is not made automatically" in second[-1]["reason"]
    assert len([r for r in fake.requests if r.model == condenser]) == 1
    third = await turn_after(session, daemon, thread["id"], "once more", second[-1]["seq"])
    assert third[-1]["outcome"] == "completed"
    fourth = await turn_after(session, daemon, thread["id"], "and again", third[-1]["seq"])
    assert fourth[-1]["outcome"] == "completed"
    assert len([r for r in fake.requests if r.model == condenser]) == 2
    assert kinds(fourth).count("reset.emergency") == 2


@pytest.mark.parametrize("status", [401, 429, 500])
async def test_unrelated_provider_errors_never_invoke_the_emergency_condenser(
    daemon: DaemonProcess,
    fake: FakeModelServer,
    session: aiohttp.ClientSession,
    tmp_path: Path,
    status: int,
) -> None:
    """An authentication, rate-limit or server error fails the turn as it would anyway: no
    summary is asked for and nothing is reset."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Fail(status), model=model)
    thread = await start(
        session, daemon, tmp_path / "w", model, {"emergencyModel": f"anthropic:{condenser}"}
    )
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "failed"
    assert not [r for r in fake.requests if r.model == condenser]
    assert not [e for e in events if e["kind"].startswith("reset.e")]


async def test_an_estimate_past_the_budget_never_condenses(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A prompt estimated at many times the budget is warned about and sent: only a
    provider's refusal could invoke the emergency condenser."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Text("fine"), model=model)
    policy = {"budget": 10, "emergencyModel": f"anthropic:{condenser}"}
    thread = await start(session, daemon, tmp_path / "w", model, policy)
    events = await ended(session, daemon, thread["id"])
    assert events[-1]["outcome"] == "completed"
    assert [e["level"] for e in events if e["kind"] == "reset.warned"] == [0.90]
    assert not [r for r in fake.requests if r.model == condenser]


async def test_a_fixed_context_that_fills_the_window_stops_with_a_sentence_saying_so(
    fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A model window the system prompt and tools alone fill: the overflow stops the turn
    with a sentence saying no condensation can help; the emergency model is not asked."""
    model, condenser = fresh_model(), emergency_model()
    fake.queue(Overflow(), model=model)
    home = tmp_path / "home"
    await anyio.Path(home).mkdir()
    windows = f'{{"anthropic:{model}": 1000}}'
    # No reserve below the line, so that a brief still fits a window the fixed context fills.
    with running_daemon(
        home, fake.url, CONDENSATE_MODEL_WINDOWS=windows, CONDENSATE_OUTPUT_RESERVE="0"
    ) as small:
        thread = await start(
            session, small, tmp_path / "w", model, {"emergencyModel": f"anthropic:{condenser}"}
        )
        events = await ended(session, small, thread["id"])
    assert "the fixed context alone" in events[-1]["reason"]
    assert "1,000-token window" in events[-1]["reason"]
    assert not [r for r in fake.requests if r.model == condenser]


async def test_context_usage_tells_a_native_agent_how_full_its_context_is(
    daemon: DaemonProcess, fake: FakeModelServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A native thread's context_usage answers with the next prompt against its line,
    ceiling and window, and for an agent-reset thread against its budget, its warning levels
    and its resets."""
    model = fresh_model()
    fake.queue(ToolCalls([Call("context_usage", {}, id="u1")]), Text("noted"), model=model)
    thread = await start(session, daemon, tmp_path / "w", model, {"budget": 50_000})
    events = await ended(session, daemon, thread["id"])
    (result,) = [e for e in events if e["kind"] == "tool.result"]
    answer = json.loads(result["output"])
    assert not result["is_error"]
    assert answer["budget"] == 50_000
    assert answer["warnings"] == [0.75, 0.80, 0.85, 0.90]
    assert answer["resets"] == 0
    assert 0 < answer["used"] < answer["line"] <= answer["ceiling"] <= answer["window"]
    assert answer["ofBudget"] == round(answer["used"] / 50_000, 4)
