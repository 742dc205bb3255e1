"""The gateway's held-summary path, deterministically, with no CLI: a thread on an engine that
restarts its session to apply a summary (a test engine, declared like Claude Code's) sends,
through the real gateway on loopback, a request over its line. The runtime takes the summary
on the request's own size, the engine is told to apply it, and the request is answered with
Condensate's own reply, never forwarded; every later request of the old session is held too,
with no second window, until the engine's next session starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from condensate.engine import (
    EngineEnv,
    EngineInfo,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.events import AssistantMessage, ModelUsage, SystemLine, UserMessage, Window
from condensate.gateway.wire import HELD_MARK
from condensate.runtime import Runtime
from condensate.testing.fake_model import FakeModelServer, Text
from tests.integration.harness import runtime_on

MODEL = "claude-sonnet-4-5"
REPLY_TOKENS = 7_000
"""About a reply's size: twelve put the thread well over its 71,808 line, under the window."""
SESSION_HEADER = "x-test-session"


def reply_text(i: int) -> str:
    """About ``REPLY_TOKENS`` tokens (a word a token), each reply its own."""
    return f"reply {i}: " + "the quick brown fox jumps over a lazy dog " * (REPLY_TOKENS // 9)


@dataclass
class Talker:
    """An engine whose one turn logs a long conversation, as a CLI's would, without calling
    a model; it writes down each window it is asked to apply."""

    spec: ThreadSpec
    env: EngineEnv
    applied: list[Window] = field(default_factory=list)

    def baseline(self, spec: ThreadSpec) -> int:
        return 2_000

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        for i in range(12):
            await ctx.append(UserMessage(at=ctx.now(), text=f"step {i}, go on"))
            await ctx.append(AssistantMessage(at=ctx.now(), text=reply_text(i)))
        return TurnOutcome("completed")

    async def apply_window(self, window: Window) -> None:
        self.applied.append(window)

    async def close(self) -> None:
        return None


TALKER = EngineInfo(
    name="talker",
    title="Talker",
    make=Talker,
    checkpoints="after-each-response",
    heads="asked",
    restarts=True,
    default=True,
    session_header=SESSION_HEADER,
)


def request(text: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "stream": False,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }


async def post(
    url: str, credential: str, body: dict[str, Any], extra: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"x-api-key": credential, SESSION_HEADER: "s-old", **(extra or {})}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/messages", json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


async def events(runtime: Runtime, thread_id: str) -> list[Any]:
    return [stored.event for stored in await runtime.log.events(thread_id)]


async def test_a_request_over_the_line_is_summarized_and_answered_by_condensate(
    tmp_path: Path,
) -> None:
    """The held request gets Condensate's own reply (marked, ``end_turn``, no usage), a
    summary is logged and handed to the engine to apply, a gateway-held line says why, and
    the provider sees the curator's call alone; the next request of the old session is held
    as well, with no second window, and nothing of either is logged as the model's."""
    async with FakeModelServer() as fake:
        # The summary holds every human message it replaces (its probes pass: one call).
        steps = " ".join(f"step {i}, go on" for i in range(12))
        fake.queue(Text(f"The summary: twelve steps were taken; go on from step 12. {steps}"))
        async with runtime_on(tmp_path / "home", fake, engines={"talker": TALKER}) as runtime:
            thread = await runtime.create(
                ThreadSpec(
                    engine="talker", model=f"anthropic:{MODEL}", cwd=str(tmp_path), brief="b"
                )
            )
            with anyio.fail_after(30):
                await thread.turn_done.wait()
            usage = runtime.usage(thread)
            assert usage.used > usage.line  # the log alone is past the line
            assert runtime.gateway_for is not None
            access = runtime.gateway_for(thread.thread_id, "anthropic", SESSION_HEADER)
            credential = access.issue()
            access.session("s-old")
            big = " ".join(reply_text(i) for i in range(12))

            status, reply = await post(access.url, credential, request(big))

            assert status == 200, reply
            assert reply["stop_reason"] == "end_turn"
            (block,) = reply["content"]
            assert block["text"].startswith(HELD_MARK)
            logged = await events(runtime, thread.thread_id)
            windows = [e for e in logged if isinstance(e, Window)]
            assert [w.window_kind for w in windows] == ["summary"]
            assert isinstance(thread.engine, Talker)
            assert thread.engine.applied == windows
            held = [e for e in logged if isinstance(e, SystemLine) and e.code == "gateway-held"]
            assert len(held) == 1
            assert len(fake.requests) == 1  # the curator's summary, not the held request
            assert "twelve steps" in (windows[0].summary or "")

            status, again = await post(access.url, credential, request("and now?"))

            assert status == 200
            assert again["content"][0]["text"].startswith(HELD_MARK)
            logged = await events(runtime, thread.thread_id)
            assert len([e for e in logged if isinstance(e, Window)]) == 1
            assert len(fake.requests) == 1
            assert not [
                e for e in logged if isinstance(e, AssistantMessage) and HELD_MARK in e.text
            ]


async def test_a_subagents_request_over_the_line_goes_on_as_sent_as_a_side_call(
    tmp_path: Path,
) -> None:
    """A request Claude Code marks as a subagent's (``x-claude-code-agent-id``) has a context
    of its own: over the thread's line it is neither held nor answered by Condensate, it
    reaches the provider as the subagent sent it, its usage is logged as a side call, and the
    thread's measured prompt and windows are unchanged."""
    async with FakeModelServer() as fake:
        fake.queue(Text("the subagent's answer"))
        async with runtime_on(tmp_path / "home", fake, engines={"talker": TALKER}) as runtime:
            thread = await runtime.create(
                ThreadSpec(
                    engine="talker", model=f"anthropic:{MODEL}", cwd=str(tmp_path), brief="b"
                )
            )
            with anyio.fail_after(30):
                await thread.turn_done.wait()
            before = runtime.usage(thread)
            assert before.used > before.line
            assert runtime.gateway_for is not None
            access = runtime.gateway_for(thread.thread_id, "anthropic", SESSION_HEADER)
            credential = access.issue()
            access.session("s-old")
            big = request(" ".join(reply_text(i) for i in range(12)))

            status, reply = await post(
                access.url, credential, big, {"x-claude-code-agent-id": "agent-1"}
            )

            assert status == 200, reply
            assert reply["content"][0]["text"] == "the subagent's answer"
            [seen] = fake.requests
            assert seen.body["messages"] == big["messages"]
            logged = await events(runtime, thread.thread_id)
            assert not [e for e in logged if isinstance(e, Window)]
            assert not [e for e in logged if isinstance(e, SystemLine)]
            [usage] = [e for e in logged if isinstance(e, ModelUsage)]
            assert usage.side
            assert usage.measured is None
            assert runtime.usage(thread).used == before.used
