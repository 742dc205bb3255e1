"""The peer arms (benchmarks/peers/): each peer's own code, in its own virtualenv, runs a
scripted two-turn conversation against the fake model server with the two tools it executes
itself, and its context management fires once the context passes a small threshold.

A peer whose virtualenv is missing (``scripts/setup-peers`` not run) is skipped on a
developer's machine and fails under CI, where ``scripts/setup`` installs them all.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks.peers import Driver, PeerRun, peer_python
from benchmarks.peers import gwenflow as gwenflow_peer
from benchmarks.peers import openhands as openhands_peer
from benchmarks.peers import pydantic_ai_harness as pydantic_ai_peer
from condensate.testing.fake_model import Call, FakeModelServer, RecordedRequest, Text, ToolCalls

TIMEOUT = 60.0
PEERS = {
    "openhands": openhands_peer,
    "pydantic-ai": pydantic_ai_peer,
    "gwenflow": gwenflow_peer,
}
DRIVERS: dict[str, Driver] = {name: module.run for name, module in PEERS.items()}
GENERATION = ("messages", "chat", "responses")


def need(peer: str) -> None:
    if peer_python(peer) is None:
        reason = f".venv-peers/{peer} is missing: run scripts/setup-peers"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def generations(fake: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in fake.requests if r.endpoint in GENERATION]


def text_of(request: RecordedRequest) -> str:
    return json.dumps(request.body)


def tool_names(request: RecordedRequest) -> set[str]:
    tools: list[dict[str, Any]] = request.body.get("tools") or []
    return {t.get("name") or t["function"]["name"] for t in tools}


def read(path: str) -> ToolCalls:
    return ToolCalls([Call("read", {"path": path})])


def shell(command: str) -> ToolCalls:
    return ToolCalls([Call("shell", {"command": command})])


def answers(run: PeerRun) -> list[str | None]:
    return [t.answer for t in run.turns]


def assert_ok(run: PeerRun, turns: int) -> None:
    assert run.ok, (run.errors, run.stderr_tail)
    assert len(run.turns) == turns, run


@pytest.mark.parametrize("peer", sorted(PEERS))
async def test_two_turns_with_tool_calls(peer: str, fake: FakeModelServer, tmp_path: Path) -> None:
    """Each turn's tool calls run in the working directory through the peer's own loop, and
    every request after a call carries its result: the file's text, the command's output and
    exit code. The second turn continues the same conversation."""
    need(peer)
    module = PEERS[peer]
    (tmp_path / "a.py").write_text("A_CONTENT = 'alpha-7f3'\n")
    (tmp_path / "c.txt").write_text("C-CONTENT-91b\n")
    fake.queue(
        read("a.py"),
        shell("echo B-OUTPUT-5d2 > made.txt; cat made.txt; exit 3"),
        Text("ANSWER-ONE"),
        read("c.txt"),
        Text("ANSWER-TWO"),
    )
    run = await DRIVERS[peer](
        fake.url, module.MODEL, tmp_path, ["TURN-ONE: read a.py", "TURN-TWO: now c.txt"], TIMEOUT
    )
    assert_ok(run, 2)
    assert answers(run) == ["ANSWER-ONE", "ANSWER-TWO"]
    assert [t.tool_calls for t in run.turns] == [2, 1]
    assert (tmp_path / "made.txt").read_text() == "B-OUTPUT-5d2\n"
    requests = generations(fake)
    assert [r.status for r in requests] == [200] * 5
    assert {r.model for r in requests} == {module.MODEL}
    assert all({"read", "shell"} <= tool_names(r) for r in requests)
    first, after_read, after_shell, second, after_c = map(text_of, requests)
    assert "TURN-ONE" in first
    assert "alpha-7f3" not in first
    assert "alpha-7f3" in after_read
    assert "B-OUTPUT-5d2" in after_shell
    assert "[exit code 3]" in after_shell
    assert all(s in second for s in ("TURN-ONE", "alpha-7f3", "ANSWER-ONE", "TURN-TWO"))
    assert "C-CONTENT-91b" in after_c
    assert names_its_defaults(run)


def names_its_defaults(run: PeerRun) -> bool:
    """The run names the peer's context management at its defaults."""
    defaults = {
        "openhands": "LLMSummarizingCondenser(max_size=80, keep_first=4, max_tokens=None)",
        "pydantic-ai": "ClearToolResults(max_fraction=0.7, keep_pairs=3)",
        "gwenflow": "ChatSummaryMemoryBuffer(max_fraction=0.85, token_limit=None",
    }
    return run.context_management.startswith(defaults[run.peer])


def files(root: Path, count: int, words: int = 1) -> list[str]:
    """``f0.txt``..: each holds its own marker, ``F<i>-MARK``, and ``words`` words."""
    names = []
    for i in range(count):
        body = " ".join(f"F{i}-word{j}" for j in range(words))
        (root / f"f{i}.txt").write_text(f"F{i}-MARK {body}\n")
        names.append(f"f{i}.txt")
    return names


def marked(requests: Sequence[RecordedRequest], text: str) -> list[int]:
    """The positions of the requests whose body carries ``text``."""
    return [i for i, r in enumerate(requests) if text in text_of(r)]


async def test_openhands_condenser_summarizes(fake: FakeModelServer, tmp_path: Path) -> None:
    """``LLMSummarizingCondenser`` with ``max_size=10`` events: once the view passes it, the
    condenser asks the model for a summary (a request of its own, no tools, its summarizing
    prompt) and the next request carries the summary in place of the forgotten events.

    On claude-sonnet-4-5, where the fake runs no preserved-thinking check: on claude-opus-5-5
    the request after a condensation has its signed thinking blocks behind a changed prefix,
    which the fake refuses as the API does."""
    need("openhands")
    names = files(tmp_path, 6)
    # Five reads make the view pass ten events; the summary request comes next.
    fake.queue(*map(read, names[:5]), Text("SUMMARY-MARKER of f0-f3"), read(names[5]), Text("done"))
    run = await openhands_peer.run(
        fake.url,
        "claude-sonnet-4-5",
        tmp_path,
        ["read the files"],
        TIMEOUT,
        condenser_args={"max_size": 10, "keep_first": 1},
    )
    assert_ok(run, 1)
    assert run.context_management.startswith("LLMSummarizingCondenser(max_size=10, keep_first=1")
    assert answers(run) == ["done"]
    assert run.condensations == 1
    requests = generations(fake)
    summaries = [i for i, r in enumerate(requests) if not tool_names(r)]
    assert len(summaries) == 1
    summary = summaries[0]
    assert openhands_peer.SUMMARY_PROMPT in text_of(requests[summary])
    assert "F0-MARK" in text_of(requests[summary])
    assert marked(requests, "SUMMARY-MARKER")[:1] == [summary + 1]
    assert "F0-MARK" not in text_of(requests[-1])
    assert "F5-MARK" in text_of(requests[-1])


async def test_pydantic_ai_clears_old_tool_results(fake: FakeModelServer, tmp_path: Path) -> None:
    """``ClearToolResults(max_fraction=0.7)`` with a 300-token window: once the history passes
    210 tokens, the oldest tool results are blanked, the 3 most recent kept; the blanks carry
    into the second turn."""
    need("pydantic-ai")
    names = files(tmp_path, 6)
    fake.queue(*map(read, names), Text("done"), shell("echo again"), Text("done again"))
    run = await pydantic_ai_peer.run(
        fake.url,
        pydantic_ai_peer.MODEL,
        tmp_path,
        ["read the files", "once more"],
        TIMEOUT,
        condenser_args={"context_window": 300},
    )
    assert_ok(run, 2)
    assert answers(run) == ["done", "done again"]
    assert run.condensations >= 1
    requests = generations(fake)
    last = text_of(requests[-1])
    assert "F0-MARK" not in last
    assert "[tool result cleared]" in last
    assert all(f"F{i}-MARK" in last for i in (4, 5))
    assert marked(requests, "F0-MARK")[0] == 1


async def test_gwenflow_summary_buffer_summarizes(fake: FakeModelServer, tmp_path: Path) -> None:
    """The default ``ChatSummaryMemoryBuffer`` with a 1,500-token limit: three reads of about
    500 tokens pass it, no tool result can be cleared (the 3 most recent are kept), so the
    older messages are folded into a summary by a copy of the agent's LLM, which later
    requests carry at their head."""
    need("gwenflow")
    names = files(tmp_path, 4, words=120)
    # The summary request comes before the fourth request of the turn.
    fake.queue(*map(read, names[:3]), Text("SUMMARY-MARKER"), read(names[3]), Text("done"))
    run = await gwenflow_peer.run(
        fake.url,
        gwenflow_peer.MODEL,
        tmp_path,
        ["read the files"],
        TIMEOUT,
        condenser_args={"max_fraction": None, "token_limit": 1500},
    )
    assert_ok(run, 1)
    assert answers(run) == ["done"]
    assert run.condensations == 1
    requests = generations(fake)
    summary = 3
    assert not tool_names(requests[summary])
    assert gwenflow_peer.SUMMARY_PROMPT in text_of(requests[summary])
    assert marked(requests, "SUMMARY-MARKER") == [summary + 1, summary + 2]
    assert "F0-MARK" not in text_of(requests[-1])
    assert "F3-MARK" in text_of(requests[-1])
