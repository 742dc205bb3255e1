"""A person's own CLI session through the gateway (``condensate claude``): what its requests
log, a conversation that changes under the log, a summary applied in flight, and the
session's end. The requests are sent as Claude Code sends them, to the gateway's base URL
with the session's pass in its path."""

from __future__ import annotations

import io
import json
import socket
import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.cli.relay import Relay
from condensate.engine import ThreadSpec
from condensate.events import (
    AssistantMessage,
    SystemLine,
    ToolResult,
    TurnEnded,
    UserMessage,
    Window,
    WindowTrigger,
)
from condensate.gateway import Gateway
from condensate.runtime import Runtime
from condensate.runtime.thread import Thread
from condensate.testing.fake_model import Fail, FakeModelServer, Text
from tests.integration.harness import runtime_on

MODEL = "claude-opus-5-5"


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}},
        ],
    }


def result(call_id: str, output: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}],
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def attached(
    runtime: Runtime, tmp_path: Path, manage: bool = True, head: bool = False
) -> tuple[Thread, str]:
    spec = ThreadSpec(
        engine="claude",
        model=f"anthropic:{MODEL}",
        cwd=str(tmp_path),
        brief="",
        head=head,
        attached="managed" if manage else "costs",
    )
    thread = await runtime.create(spec)
    return thread, runtime.attach_url(thread)


async def send(base: str, messages: list[dict[str, Any]], model: str = MODEL) -> dict[str, Any]:
    body = json.dumps({"model": model, "max_tokens": 200, "messages": messages}).encode()
    headers = {
        "x-api-key": "sk-person",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    async with (
        aiohttp.ClientSession() as session,
        # A stream, not bytes: aiohttp warns of a large body sent at once.
        session.post(f"{base}/v1/messages", data=io.BytesIO(body), headers=headers) as reply,
    ):
        assert reply.status == 200, await reply.text()
        answer: dict[str, Any] = await reply.json()
        return answer


async def logged(runtime: Runtime, thread: Thread) -> list[Any]:
    return [s.event for s in await runtime.log.events(thread.thread_id)]


async def test_each_request_logs_what_goes_past_the_log(tmp_path: Path) -> None:
    """Two requests of one conversation: the first logs the person's message, the second only
    the reply and the result it adds (a result named by its call's argument)."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), model=MODEL)
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            first = [user("list the files")]
            await send(base, first)
            await send(base, [*first, bash("c1", "ls -la"), result("c1", "a.txt")])
            events = await logged(runtime, thread)
    kinds = [
        type(e).__name__
        for e in events
        if isinstance(e, UserMessage | AssistantMessage | ToolResult)
    ]
    assert kinds == ["UserMessage", "AssistantMessage", "ToolResult"]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert (results[0].tool, results[0].argument, results[0].output) == ("Bash", "ls -la", "a.txt")


async def test_a_conversation_that_no_longer_extends_the_log_starts_the_view_again(
    tmp_path: Path,
) -> None:
    """After /clear the CLI sends a new conversation: it is logged, and a drop window (and a
    system line) starts the view there; the old messages are out of the view."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), model=MODEL)
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            await send(base, [user("first task")])
            await send(base, [user("a new start")])
            events = await logged(runtime, thread)
            shown = [e.event for e in thread.projection.entries if e.event is not None]
    drops = [e for e in events if isinstance(e, Window) and e.window_kind == "drop"]
    assert len(drops) == 1
    assert any(isinstance(e, SystemLine) and e.code == "cli-conversation-changed" for e in events)
    texts = [e.text for e in shown if isinstance(e, UserMessage)]
    assert "a new start" in texts
    assert texts.index("a new start") > (texts.index("first task") if "first task" in texts else -1)


async def test_a_summary_is_sent_in_place_of_the_older_part(tmp_path: Path) -> None:
    """With a summary in the view, the next request reaches the provider starting with the
    summary, then the CLI's messages from the kept part on; the CLI's own history is not
    changed (it sends all of it, the provider sees the cut)."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), Text("c"), model=MODEL)
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            history = [user("task"), bash("c1", "cat big.log"), result("c1", "x" * 4000)]
            await send(base, history)
            history += [bash("c2", "ls"), result("c2", "b.txt")]
            await send(base, history)
            keep = next(
                e.seq
                for e in thread.projection.entries
                if isinstance(e.event, AssistantMessage) and e.event.tool_calls[0].id == "c2"
            )
            summary = "SUMMARY: read big.log, it was all x."
            await runtime.append(thread, summary_window(runtime, thread, summary, keep))
            history += [bash("c3", "pwd"), result("c3", "/w")]
            await send(base, history)
    last = [r for r in fake.requests if r.endpoint == "messages"][-1]
    sent = last.body["messages"]
    assert "SUMMARY: read big.log" in str(sent[0])
    assert "x" * 4000 not in str(sent)
    ids = [b.get("id") for m in sent for b in m["content"] if isinstance(b, dict)]
    assert "c1" not in ids
    assert ids.count("c2") == 1
    assert ids.count("c3") == 1


async def test_the_session_ends_with_the_clis_exit_code(tmp_path: Path) -> None:
    """Detaching with the CLI's exit code ends the session's turn: completed for 0."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        thread, _ = await attached(runtime, tmp_path)
        with anyio.fail_after(10):
            await runtime.detach(thread, 0)
        events = await logged(runtime, thread)
    ended = [e for e in events if isinstance(e, TurnEnded)]
    assert [(e.outcome, e.reason) for e in ended] == [("completed", "the CLI exited")]


async def test_a_costs_only_session_is_never_held(tmp_path: Path) -> None:
    """``--no-manage``: the gateway holds nothing for the session (no line applies)."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        thread, _ = await attached(runtime, tmp_path, manage=False)
        assert runtime.gate(thread.thread_id) is None
        managed, _ = await attached(runtime, tmp_path)
        assert runtime.gate(managed.thread_id) is not None


async def test_a_chatgpt_sign_in_goes_to_the_subscriptions_backend(tmp_path: Path) -> None:
    """A person's own Codex signed in with ChatGPT (its token and ``chatgpt-account-id``) is
    forwarded to ``CONDENSATE_CHATGPT_BASE_URL``, with its own token; an API key's request to
    the API."""
    async with FakeModelServer() as api, FakeModelServer() as chatgpt:
        api.queue(Text("from the api"), model="gpt-5.5")
        chatgpt.queue(Text("from chatgpt"), model="gpt-5.5")
        overrides = {"chatgpt_base_url": chatgpt.url + "/v1"}
        async with runtime_on(tmp_path / "home", api, overrides=overrides) as runtime:
            spec = ThreadSpec(
                engine="codex",
                model="openai:gpt-5.5",
                cwd=str(tmp_path),
                brief="",
                attached="managed",
            )
            thread = await runtime.create(spec)
            base = runtime.attach_url(thread)
            body = {"model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}]}
            signed_in = {"Authorization": "Bearer chatgpt-token", "chatgpt-account-id": "acct"}
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{base}/responses", json=body, headers=signed_in) as r:
                    assert r.status == 200, await r.text()
                keyed = {"Authorization": "Bearer sk-person"}
                async with session.post(f"{base}/responses", json=body, headers=keyed) as r:
                    assert r.status == 200, await r.text()
    assert bearers(chatgpt) == ["Bearer chatgpt-token"]
    assert bearers(api) == ["Bearer sk-person"]


def bearers(fake: FakeModelServer) -> list[str | None]:
    """The credential each Responses request reached ``fake`` with."""
    return [
        {k.lower(): v for k, v in r.headers.items()}.get("authorization")
        for r in fake.requests
        if r.endpoint == "responses"
    ]


async def test_a_session_whose_wrapper_is_gone_ends(tmp_path: Path) -> None:
    """The wrapper's process killed (the daemon was never told the CLI exited): the session's
    turn ends, failed, naming the process, within the poll's period."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        wrapper = await anyio.open_process(["sleep", "60"])
        spec = ThreadSpec(
            engine="claude",
            model=f"anthropic:{MODEL}",
            cwd=str(tmp_path),
            brief="",
            attached="managed",
            attached_pid=wrapper.pid,
        )
        thread = await runtime.create(spec)
        await anyio.sleep(0.1)
        assert thread.running
        wrapper.kill()
        await wrapper.wait()
        with anyio.fail_after(10):
            await thread.turn_done.wait()
        events = await logged(runtime, thread)
    (ended,) = [e for e in events if isinstance(e, TurnEnded)]
    assert ended.outcome == "failed"
    assert f"pid {wrapper.pid}" in ended.reason


async def test_the_person_is_told_once_of_a_window_and_the_provider_never_sees_it(
    tmp_path: Path,
) -> None:
    """A window taken: the next reply starts with one line for the person (what was taken,
    what it freed), streamed as its own first block with the others moved one on; the request
    after it comes back with that line in the CLI's history and reaches the provider without
    it; the reply after that says nothing more."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), Text("c"), model=MODEL)
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            history = [user("task"), bash("c1", "cat big.log"), result("c1", "x" * 4000)]
            await send(base, history)
            await runtime.append(thread, summary_window(runtime, thread))
            streamed = await send_streamed(base, history)
            told = [b for b in streamed if b["type"] == "text"]
            assert told[0]["text"].startswith("[condensate window] summary freed ~")
            assert told[1]["text"] == "b"
            history += [{"role": "assistant", "content": streamed}, user("go on")]
            third = await send(base, history)
    assert [b["text"] for b in third["content"] if b["type"] == "text"] == ["c"]
    last = [r for r in fake.requests if r.endpoint == "messages"][-1]
    assert "[condensate window]" not in str(last.body)


def summary_window(
    runtime: Runtime,
    thread: Thread,
    summary: str = "SUMMARY: read big.log.",
    keep_from: int | None = None,
) -> Window:
    """A summary of the view before ``keep_from`` (of all of it, by default), as an
    operator's answer would take it."""
    usage = runtime.usage(thread)
    trigger = WindowTrigger(
        used=usage.used,
        line=usage.line,
        ceiling=usage.ceiling,
        window=usage.window,
        freed=1000,
        reason="test",
    )
    return Window(
        at=runtime.clock(),
        window_kind="summary",
        cut=thread.projection.last_seq,
        keep_from=keep_from,
        summary=summary,
        author="operator",
        trigger=trigger,
    )


async def send_streamed(base: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A streamed request as Claude Code sends it: the reply's blocks, rebuilt from its
    events by index."""
    body = {"model": MODEL, "max_tokens": 200, "messages": messages, "stream": True}
    headers = {"x-api-key": "sk-person", "anthropic-version": "2023-06-01"}
    blocks: dict[int, dict[str, Any]] = {}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base}/v1/messages", json=body, headers=headers) as reply,
    ):
        assert reply.status == 200, await reply.text()
        raw = await reply.read()
    for event in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in event.splitlines() if line.startswith("data:")]
        if not data:
            continue
        item = json.loads(data[0])
        if item["type"] == "content_block_start":
            blocks[item["index"]] = dict(item["content_block"])
        elif item["type"] == "content_block_delta" and item["delta"]["type"] == "text_delta":
            blocks[item["index"]]["text"] += item["delta"]["text"]
    return [blocks[i] for i in sorted(blocks)]


async def test_a_request_past_the_apis_limit_is_refused_unread(tmp_path: Path) -> None:
    """A Messages request over the API's 32 MB is answered 413 ``request_too_large`` as
    Anthropic words it, never parsed or forwarded."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        _, base = await attached(runtime, tmp_path)
        huge = (
            b'{"model":"claude-opus-5-5","messages":[{"role":"user","content":"'
            + (b"x" * (33 * 1024 * 1024))
            + b'"}]}'
        )
        headers = {"x-api-key": "sk-person", "content-type": "application/json"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/v1/messages", data=io.BytesIO(huge), headers=headers) as reply,
        ):
            status, answer = reply.status, await reply.json()
    assert status == 413
    assert answer["error"]["type"] == "request_too_large"
    assert [r for r in fake.requests if r.endpoint == "messages"] == []


async def test_a_large_request_is_counted_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a request of several megabytes is counted, the daemon's event loop goes on
    (another task ticks meanwhile): the counting runs in a worker thread."""
    spans: list[tuple[float, float]] = []
    measure = Gateway._measure

    def slow_measure(self: Gateway, call: Any, document: Any) -> int:
        began = time.monotonic()
        time.sleep(0.3)  # a count as long as a big request's
        size = measure(self, call, document)
        spans.append((began, time.monotonic()))
        return size

    monkeypatch.setattr(Gateway, "_measure", slow_measure)
    ticks: list[float] = []
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        fake.queue(Text("a"), model=MODEL)
        _, base = await attached(runtime, tmp_path)
        async with anyio.create_task_group() as tasks:

            async def tick() -> None:
                while True:
                    ticks.append(time.monotonic())
                    await anyio.sleep(0.01)

            tasks.start_soon(tick)
            await send(base, [user("y" * (3 * 1024 * 1024))])
            tasks.cancel_scope.cancel()
    assert spans
    began, ended = spans[0]
    assert len([t for t in ticks if began < t < ended]) >= 5


async def test_the_relay_answers_for_a_daemon_that_is_down(tmp_path: Path) -> None:
    """The wrapper's relay, its daemon gone: a Messages request is answered 503 in
    Anthropic's shape with ``x-should-retry: false`` and a sentence naming the daemon; a
    Responses request in OpenAI's."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens once closed
    relay = Relay(gone)
    url = relay.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/gateway/anthropic/s/p/v1/messages", json={}) as r:
                anthropic = (r.status, r.headers.get("x-should-retry"), await r.json())
            async with session.post(f"{url}/gateway/openai/s/p/responses", json={}) as r:
                openai = (r.status, await r.json())
    finally:
        relay.stop()
    assert anthropic[:2] == (503, "false")
    assert anthropic[2]["type"] == "error"
    assert f"daemon at {gone} is not running" in anthropic[2]["error"]["message"]
    assert openai[0] == 503
    assert "is not running" in openai[1]["error"]["message"]


async def test_the_persons_model_change_is_logged_for_what_it_is(tmp_path: Path) -> None:
    """The conversation goes on on another model (the person's /model): one system line
    says so, naming both; the same model again says nothing."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), Text("c"))
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            history = [user("one")]
            await send(base, history)
            history += [{"role": "assistant", "content": "a"}, user("two")]
            await send(base, history, model="claude-sonnet-5-5")
            history += [{"role": "assistant", "content": "b"}, user("three")]
            await send(base, history, model="claude-sonnet-5-5")
            events = await logged(runtime, thread)
    lines = [e.text for e in events if isinstance(e, SystemLine) and e.code == "cli-model"]
    assert len(lines) == 1
    assert "claude-sonnet-5-5" in lines[0]
    assert MODEL in lines[0]


async def test_a_persons_cli_retrying_a_failing_provider_is_told(tmp_path: Path) -> None:
    """The provider answers a person's Claude Code 529 three times in a row (the CLI retries
    on its own and says so only in its own terminal): the session's log says so once."""
    async with FakeModelServer() as fake:
        fake.queue(Fail(529), Fail(529), Fail(529), model=MODEL)
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread, base = await attached(runtime, tmp_path)
            body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": [user("hi")]})
            headers = {"x-api-key": "sk-person", "content-type": "application/json"}
            async with aiohttp.ClientSession() as session:
                for _ in range(3):
                    async with session.post(f"{base}/v1/messages", data=body, headers=headers) as r:
                        assert r.status == 529
            events = await logged(runtime, thread)
    told = [e for e in events if isinstance(e, SystemLine) and e.code == "provider-retrying"]
    assert len(told) == 1
    assert "3 requests in a row with 529" in told[0].text


async def test_a_persons_session_offers_no_recall_and_plans_as_for_a_restart(
    tmp_path: Path,
) -> None:
    """The person's CLI runs without Condensate's tools: its receipts never offer
    ``recall``; and a summary starts its prompt anew, so its planner keeps the tail a restart
    keeps (the engine's own planner settings), though its session is never restarted."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        thread, _ = await attached(runtime, tmp_path)
        headless = runtime.profile_of("claude")
        created = (await logged(runtime, thread))[0]
    assert created.recall is False
    assert thread.projection.recall is False
    assert thread.profile.info.restarts is False
    assert thread.profile.planner == headless.planner
    assert headless.planner.restarts is True


async def test_a_head_session_has_a_heads_line(tmp_path: Path) -> None:
    """``condensate claude --head``: the session is a head: its line is the model's window
    less the reserves (not the working ceiling), and its engine asks it before a cut."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        head, _ = await attached(runtime, tmp_path, head=True)
        ordinary, _ = await attached(runtime, tmp_path)
        usage, other = runtime.usage(head), runtime.usage(ordinary)
    assert head.spec.head is True
    assert head.profile.info.heads == "asked"
    assert usage.line > usage.ceiling
    assert other.line < other.ceiling


async def test_a_codex_session_is_told_in_a_message_of_its_own_after_the_reply(
    tmp_path: Path,
) -> None:
    """A person's Codex: after a window, the streamed reply ends with one message item of
    its own (the line for the person) before the completion, numbered on from the reply's
    own events; the next request comes back with it in its input and reaches the provider
    without it."""
    async with FakeModelServer() as fake:
        fake.queue(Text("a"), Text("b"), Text("c"), model="gpt-5.5")
        async with runtime_on(tmp_path / "home", fake) as runtime:
            spec = ThreadSpec(
                engine="codex", model="openai:gpt-5.5", cwd=str(tmp_path), brief="",
                attached="managed",
            )  # fmt: skip
            thread = await runtime.create(spec)
            base = runtime.attach_url(thread)
            items: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
            await responses(base, items)
            await runtime.append(thread, summary_window(runtime, thread))
            events = await responses(base, items, stream=True)
            done = [e for e in events if e["type"] == "response.output_item.done"]
            told = done[-1]["item"]
            assert told["content"][0]["text"].startswith("[condensate window] summary freed ~")
            numbers = [e["sequence_number"] for e in events]
            assert numbers == sorted(set(numbers))
            assert events[-1]["type"] == "response.completed"
            items += [d["item"] for d in done] + [{"role": "user", "content": "go on"}]
            await responses(base, items)
    last = [r for r in fake.requests if r.endpoint == "responses"][-1]
    assert "[condensate window]" not in str(last.body)


async def responses(
    base: str, items: list[dict[str, Any]], *, stream: bool = False
) -> list[dict[str, Any]]:
    """A Responses request as a person's Codex sends it: the stream's events, or the reply."""
    body = {"model": "gpt-5.5", "input": items, "stream": stream}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{base}/responses", json=body, headers={"Authorization": "Bearer sk-person"}
        ) as reply,
    ):
        assert reply.status == 200, await reply.text()
        raw = await reply.read()
    if not stream:
        return [json.loads(raw)]
    found = []
    for event in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in event.splitlines() if line.startswith("data:")]
        if data:
            found.append(json.loads(data[0]))
    return found
