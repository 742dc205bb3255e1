"""Paging and recall on the native engine, through a real daemon and the fake model: a tool
result over the thread's output cap reaches the model as its beginning and a reference (the
log keeps all of it), ``read_tool_output`` pages through the rest, ``recall`` returns an
earlier original, and a receipt says how to get its original back."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.core import paging
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for

LINE = "the quick brown fox jumps over a lazy dog {:05d}\n"
READ_SEQ = 6
"""The read's result: after the thread, the brief, the turn, the first count and the call."""
_models = itertools.count(1)


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("paging"), fake.url) as process:
        yield process


@pytest.fixture
async def session() -> Any:
    async with aiohttp.ClientSession() as http:
        yield http


async def run(
    daemon: DaemonProcess,
    session: aiohttp.ClientSession,
    fake: FakeModelServer,
    work: Path,
    replies: list[Any],
    **extra: Any,
) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """A thread over ``work`` whose model answers ``replies``: its log once its turn ended,
    and the messages of each request the fake had."""
    model = f"claude-paging-{next(_models)}"
    fake.queue(*replies, model=model)
    body = {"model": f"anthropic:{model}", "cwd": str(work), "brief": "Look at big.txt.", **extra}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    events = await wait_for(session, daemon, created["id"], lambda e: e["kind"] == "turn.ended")
    requests = [r.body["messages"] for r in fake.requests if r.model == model and r.body]
    return events, requests


PAGE = {"offset": 500, "length": 300}


@pytest.fixture
async def work(tmp_path: Path) -> Path:
    folder = tmp_path / "w"
    await anyio.Path(folder).mkdir()
    text = "".join(LINE.format(i) for i in range(2_000))  # about 90,000 characters
    await anyio.Path(folder / "big.txt").write_text(text)
    return folder


def result_of(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    for message in messages:
        for block in message["content"]:
            if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                return dict(block)
    msg = f"no result for {call_id}"
    raise AssertionError(msg)


async def test_a_result_over_the_cap_is_paged_and_read_on(
    daemon: DaemonProcess, session: aiohttp.ClientSession, fake: FakeModelServer, work: Path
) -> None:
    """With outputCap 1,000 tokens, a 90,000-character read reaches the model as its
    beginning and a notice naming its ref and where to read on; the log holds all of it; a
    read_tool_output call returns exactly the characters asked for."""
    events, requests = await run(
        daemon,
        session,
        fake,
        work,
        [
            ToolCalls([Call("read", {"path": "big.txt"}, id="r1")]),
            Text("done"),
        ],
        outputCap=1_000,
    )
    logged = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "r1")
    assert logged["seq"] == READ_SEQ
    assert "00000" in logged["output"]
    assert "01999" in logged["output"]  # the log keeps all of it
    seen = result_of(requests[1], "r1")["content"]
    assert seen.startswith(logged["output"][:200])
    assert "01999" not in seen
    assert f'{paging.READ_TOOL}(ref="{logged["seq"]}", offset=' in seen
    assert len(seen) < 6_000


async def test_read_tool_output_returns_the_page_asked_for(
    daemon: DaemonProcess, session: aiohttp.ClientSession, fake: FakeModelServer, work: Path
) -> None:
    """read_tool_output(ref, offset, length) answers with exactly those characters of the
    logged original and says where the next page starts."""
    events, requests = await run(
        daemon,
        session,
        fake,
        work,
        [
            ToolCalls([Call("read", {"path": "big.txt"}, id="r1")]),
            ToolCalls([Call(paging.READ_TOOL, {"ref": str(READ_SEQ), **PAGE}, id="p1")]),
            Text("done"),
        ],
        outputCap=1_000,
    )
    logged = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "r1")
    assert logged["seq"] == READ_SEQ
    paged = next(e for e in events if e["kind"] == "tool.result" and e["call_id"] == "p1")
    assert not paged["is_error"], paged["output"]
    assert paged["output"].startswith(logged["output"][500:800] + "\n\n[Characters 500 to 800")
    assert f'ref="{READ_SEQ}", offset=800, length=300' in paged["output"]
    assert result_of(requests[2], "p1")["content"] == paged["output"]


async def test_recall_returns_an_earlier_original_from_the_log(
    daemon: DaemonProcess, session: aiohttp.ClientSession, fake: FakeModelServer, work: Path
) -> None:
    """recall(seq) of the brief returns its text; of a seq that is no message or result, an
    error naming it; of a seq past the log, an error."""
    events, _ = await run(
        daemon,
        session,
        fake,
        work,
        [
            ToolCalls(
                [
                    Call(paging.RECALL_TOOL, {"seq": 2}, id="a"),
                    Call(paging.RECALL_TOOL, {"seq": 1}, id="b"),
                    Call(paging.RECALL_TOOL, {"seq": 9999}, id="c"),
                ]
            ),
            Text("done"),
        ],
    )
    results = {e["call_id"]: e for e in events if e["kind"] == "tool.result"}
    assert (results["a"]["output"], results["a"]["is_error"]) == ("Look at big.txt.", False)
    assert results["b"]["is_error"]
    assert "thread.created" in results["b"]["output"]
    assert results["c"]["is_error"]


def system(body: dict[str, Any]) -> str:
    """A Messages request's system prompt as text (a string, or text blocks)."""
    raw = body.get("system") or ""
    if isinstance(raw, list):
        return " ".join(str(b.get("text", "")) for b in raw if isinstance(b, dict))
    return str(raw)


async def test_a_request_near_the_line_carries_a_notice_after_its_cached_prompt_only(
    fake: FakeModelServer, session: aiohttp.ClientSession, work: Path, tmp_path: Path
) -> None:
    """With nearLimitWarnings and a 20,000-token ceiling, the request after a large read
    (past 70 % of the line) ends with an URGENT notice, after the last cache breakpoint; the
    first did not; the system prompt stays as it was (the cache holds), and no event holds
    the notice."""
    home = tmp_path / "home"
    await anyio.Path(home).mkdir()
    with running_daemon(home, fake.url, CONDENSATE_WINDOW_CEILING="20000") as small:
        model = f"claude-paging-{next(_models)}"
        fake.queue(ToolCalls([Call("read", {"path": "big.txt"})]), Text("done"), model=model)
        body = {
            "model": f"anthropic:{model}",
            "cwd": str(work),
            "brief": "Look at big.txt.",
            "nearLimitWarnings": True,
        }
        status, created = await call(session, small, "POST", "/threads", body)
        assert status == 201, created
        events = await wait_for(session, small, created["id"], lambda e: e["kind"] == "turn.ended")
    first, second = [r.body for r in fake.requests if r.model == model]
    assert "[Condensate]" not in str(first)
    assert system(second) == system(first)
    *blocks, notice = second["messages"][-1]["content"]
    assert notice["text"].startswith(("[Condensate] URGENT:", "[Condensate] CRITICAL:"))
    assert "cache_control" not in notice
    assert "cache_control" in blocks[-1]
    assert "[Condensate]" not in str(events)


async def test_a_long_argument_reaches_the_model_clamped_by_default(daemon, session, fake, work):
    """A thread made with the daemon's defaults clamps at 16,000 tokens (64,000 characters):
    the request after a write of 80,000 characters shows its content's head and tail and a
    note naming the message's seq; the file and the log hold it whole."""
    content = "a" * 40_000 + "MIDDLE-OF-THE-WRITE" + "z" * 40_000
    write = Call("write", {"path": "out.txt", "content": content}, id="call_w1")
    events, requests = await run(daemon, session, fake, work, [ToolCalls([write]), Text("Done.")])
    assert (work / "out.txt").read_text() == content
    made = next(e for e in events if e["kind"] == "message.assistant" and e["tool_calls"])
    assert made["tool_calls"][0]["arguments"]["content"] == content
    (use,) = [
        block
        for message in requests[-1]
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    shown = use["input"]["content"]
    assert shown.startswith("a" * 32_000)
    assert shown.endswith("z" * 32_000)
    assert "MIDDLE-OF-THE-WRITE" not in shown
    assert f'read_tool_output(ref="{made["seq"]}") reads the whole message' in shown
