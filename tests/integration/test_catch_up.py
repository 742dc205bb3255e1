"""A CLI's request may reach the gateway before its engine has logged what the CLI just did
(``admission.caught_up``): a request that may carry something the view clamps waits, a
little, for the log to hold its newest result; any other goes on at once."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import anyio

from condensate.events import AssistantMessage, ToolCall, ToolResult
from condensate.runtime import Runtime
from condensate.runtime.gateway_port import NewestResult
from condensate.runtime.thread import Thread
from condensate.testing.fake_model import FakeModelServer
from tests.integration.harness import runtime_on
from tests.integration.test_attached import attached

AT = datetime(2026, 12, 5, tzinfo=UTC)
LOGGED_AFTER = 0.3


async def session(runtime: Runtime, tmp_path: Path) -> Thread:
    """A thread whose log nobody else writes (a person's session, not yet heard)."""
    thread, _ = await attached(runtime, tmp_path)
    return thread


async def waited(runtime: Runtime, thread: Thread, newest: NewestResult) -> float:
    """How long ``caught_up`` took while the call and its result were logged
    ``LOGGED_AFTER`` seconds after it began."""

    async def log_it() -> None:
        await anyio.sleep(LOGGED_AFTER)
        call = ToolCall(id=newest.call_id, name="Bash", arguments={"command": "true"})
        result = ToolResult(at=AT, call_id=newest.call_id, tool="Bash", output="ok")
        await runtime.append(thread, [AssistantMessage(at=AT, tool_calls=(call,)), result])

    async with anyio.create_task_group() as group:
        group.start_soon(log_it)
        began = time.monotonic()
        await runtime.caught_up(thread.thread_id, newest)
        took = time.monotonic() - began
    return took


async def test_a_short_result_with_a_long_call_before_it_waits_for_the_log(
    tmp_path: Path,
) -> None:
    """A two-character result whose request brought 100,000 new bytes (its call's argument
    may be past the 64,000-character clamp): the request waits until the log holds it."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        thread = await session(runtime, tmp_path)
        took = await waited(runtime, thread, NewestResult("c1", "Bash", 2, arrived=100_000))
    assert LOGGED_AFTER <= took < 3


async def test_a_request_that_brought_nothing_past_the_clamp_goes_on_at_once(
    tmp_path: Path,
) -> None:
    """A two-character result in a request that brought 2,000 new bytes: nothing in it is
    clamped, and it does not wait for the log."""
    async with FakeModelServer() as fake, runtime_on(tmp_path / "home", fake) as runtime:
        thread = await session(runtime, tmp_path)
        took = await waited(runtime, thread, NewestResult("c1", "Bash", 2, arrived=2_000))
    assert took < LOGGED_AFTER
