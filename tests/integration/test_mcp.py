"""A CLI thread's MCP server (``python -m condensate.engine.mcp``) as a real subprocess against a
real daemon: the MCP handshake, the tools of each kind of thread, their answers, and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from condensate.api.tokens import thread_token
from condensate.client import DaemonClient
from condensate.core import context_tools, reset
from condensate.core.context_tools import offered
from condensate.engine.mcp import TOKEN_ENV
from tests.integration.daemon import REPO, DaemonProcess

HEAD_TOOLS = offered(head=True, reset=False)


def idle_thread(daemon: DaemonProcess, cwd: str, **more: Any) -> str:
    client = DaemonClient(daemon.url, daemon.token)
    thread = client.call(
        "POST",
        "/threads",
        {"model": "anthropic:claude-sonnet-4-5", "cwd": cwd, "brief": "hello from mcp", **more},
    )["id"]
    for _ in range(300):
        if client.call("GET", f"/threads/{thread}")["status"] == "idle":
            return str(thread)
        time.sleep(0.1)
    msg = "the thread never went idle"
    raise AssertionError(msg)


def session(
    daemon: DaemonProcess,
    thread: str,
    *messages: dict[str, Any],
    token: str | None = None,
    tools: Sequence[str] = HEAD_TOOLS,
) -> list[dict[str, Any]]:
    """Every reply the server wrote for ``messages`` (sent as one stdin, one per line), the
    server listing ``tools`` (a head's, unless given) and holding the thread's own token."""
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    args = ["--url", daemon.url, "--thread", thread, "--tools", ",".join(tools)]
    result = subprocess.run(
        [sys.executable, "-m", "condensate.engine.mcp", *args],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=True,
        # The thread's own token, as its CLI engine hands it to the server.
        env={
            **os.environ,
            TOKEN_ENV: thread_token(daemon.token, thread) if token is None else token,
        },
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def call(ident: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }


HANDSHAKE = (
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
)


def test_handshake_lists_a_heads_tools(daemon, tmp_path):
    """initialize answers with tool capabilities; tools/list offers a head the compaction
    tools, context_usage, recall and read_tool_output; a notification gets no reply."""
    replies = session(daemon, idle_thread(daemon, str(tmp_path)), *HANDSHAKE)
    assert [r["id"] for r in replies] == [1, 2]
    assert "tools" in replies[0]["result"]["capabilities"]
    names = [tool["name"] for tool in replies[1]["result"]["tools"]]
    assert names == [
        "compact_context",
        "compact_microcompact",
        "context_usage",
        "recall",
        "read_tool_output",
        "pin",
    ]


def test_each_kind_of_thread_gets_its_own_tools(daemon, tmp_path):
    """A thread Condensate windows without asking reads its context (no compaction tools); an
    agent-reset thread has condense in their place; a call to a tool not listed is invalid."""
    thread = idle_thread(daemon, str(tmp_path))
    plain = offered(head=False, reset=False)
    listed = session(
        daemon, thread, *HANDSHAKE, call(3, "compact_context", {"summary": "s"}), tools=plain
    )
    assert [t["name"] for t in listed[1]["result"]["tools"]] == [
        "context_usage",
        "recall",
        "read_tool_output",
        "pin",
    ]
    assert listed[2]["error"]["code"] == -32602
    assert "compact_context" in listed[2]["error"]["message"]
    reset = offered(head=False, reset=True)
    assert reset == ("condense", "context_usage", "recall", "read_tool_output", "pin")


def test_recall_and_read_tool_output_answer_from_the_log(daemon, tmp_path):
    """recall(seq) returns the brief the thread was created with (seq 2); read_tool_output
    pages it from an offset; a seq the log lacks is a tool error saying so."""
    thread = idle_thread(daemon, str(tmp_path))
    replies = session(
        daemon,
        thread,
        *HANDSHAKE,
        call(3, "recall", {"seq": 2}),
        call(4, "read_tool_output", {"ref": "2", "offset": 6, "length": 4}),
        call(5, "recall", {"seq": 99999}),
        call(6, "recall", {"seq": "two"}),
    )
    assert replies[2]["result"] == {
        "content": [{"type": "text", "text": "hello from mcp"}],
        "isError": False,
    }
    page = replies[3]["result"]["content"][0]["text"]
    assert page.startswith("from\n\n[Characters 6 to 10 of 14;")
    assert replies[4]["result"]["isError"] is True
    assert "99999" in replies[4]["result"]["content"][0]["text"]
    assert replies[5]["error"]["code"] == -32602
    assert "'seq'" in replies[5]["error"]["message"]


def test_condense_answers_with_the_recovery_text_of_a_reset_thread(daemon, tmp_path):
    """On an agent-reset thread condense answers the recovery text with the message; a
    message past 16,384 UTF-16 code units is an error that resets nothing; on a thread
    Condensate windows, condense is an error saying so."""
    reset_thread = idle_thread(daemon, str(tmp_path), reset={})
    tools = offered(head=False, reset=True)
    replies = session(
        daemon,
        reset_thread,
        *HANDSHAKE,
        call(3, "condense", {context_tools.MESSAGE: "notes in NOTES.md"}),
        call(4, "condense", {context_tools.MESSAGE: "x" * 16_385}),
        tools=tools,
    )
    assert replies[2]["result"]["isError"] is False
    assert replies[2]["result"]["content"][0]["text"] == reset.recovery("notes in NOTES.md")
    assert replies[3]["result"]["isError"] is True
    assert "16,385 UTF-16 code units" in replies[3]["result"]["content"][0]["text"]
    windowed = idle_thread(daemon, str(tmp_path))
    (*_, refused) = session(daemon, windowed, *HANDSHAKE, call(3, "condense"), tools=tools)
    assert refused["result"]["isError"] is True
    assert "not in agent-reset mode" in refused["result"]["content"][0]["text"]


def test_context_usage_reports_the_threads_numbers(daemon, tmp_path):
    """context_usage answers with the thread's used, line, ceiling and window."""
    replies = session(
        daemon, idle_thread(daemon, str(tmp_path)), *HANDSHAKE, call(3, "context_usage")
    )
    result = replies[-1]["result"]
    assert result["isError"] is False
    usage = json.loads(result["content"][0]["text"])
    assert {"used", "line", "ceiling", "window", "pendingAsk"} <= usage.keys()
    assert usage["used"] > 0


def test_compaction_tools_queue_a_compaction_by_the_thread(daemon, tmp_path):
    """compact_microcompact and compact_context queue compactions recorded as the thread's."""
    thread = idle_thread(daemon, str(tmp_path))
    replies = session(
        daemon,
        thread,
        *HANDSHAKE,
        call(3, "compact_microcompact"),
        call(4, "compact_context", {"summary": "my own notes"}),
    )
    assert all(r["result"]["isError"] is False for r in replies[2:])
    client = DaemonClient(daemon.url, daemon.token)
    tail = client.call("GET", f"/threads/{thread}/tail?limit=1000")["events"]
    requested = [
        (e["mode"], e["by"], e["summary"]) for e in tail if e["kind"] == "compaction.requested"
    ]
    assert requested == [("microcompact", "thread", None), ("summary", "thread", "my own notes")]


def test_bad_calls_are_errors_not_crashes(daemon, tmp_path):
    """An empty summary and an unknown tool are invalid params naming the argument or the
    tool; an unknown method is method-not-found; a wrong token is a tool error the model can
    read."""
    thread = idle_thread(daemon, str(tmp_path))
    replies = session(
        daemon,
        thread,
        *HANDSHAKE,
        call(3, "compact_context", {"summary": " "}),
        call(4, "no_such_tool"),
        {"jsonrpc": "2.0", "id": 5, "method": "resources/list"},
        call(6, "compact_context", {"summary": "s", "keep_from": "soon"}),
    )
    assert replies[2]["error"]["code"] == -32602
    assert "'summary'" in replies[2]["error"]["message"]
    assert replies[3]["error"]["code"] == -32602
    assert "no_such_tool" in replies[3]["error"]["message"]
    assert replies[4]["error"]["code"] == -32601
    assert "'keep_from'" in replies[5]["error"]["message"]
    refused = session(daemon, thread, *HANDSHAKE, call(3, "compact_microcompact"), token="wrong")  # noqa: S106 - a wrong token on purpose
    assert refused[2]["result"]["isError"] is True
    assert "unauthorized" in refused[2]["result"]["content"][0]["text"]


def initialize(version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}},
    }


def test_the_protocol_version_is_negotiated_not_echoed(daemon, tmp_path):
    """A version the server speaks is answered with itself; one it does not know, with the
    server's own newest."""
    thread = idle_thread(daemon, str(tmp_path))
    (known,) = session(daemon, thread, initialize("2024-11-05"))
    (unknown,) = session(daemon, thread, initialize("2099-01-01"))
    assert known["result"]["protocolVersion"] == "2024-11-05"
    assert unknown["result"]["protocolVersion"] == "2025-06-18"


def test_requests_before_initialize_are_refused_but_ping(daemon, tmp_path):
    """tools/list and tools/call before initialize are refused as not initialized; ping is
    answered."""
    thread = idle_thread(daemon, str(tmp_path))
    replies = session(
        daemon,
        thread,
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        call(3, "context_usage"),
    )
    assert replies[0]["result"] == {}
    assert [r["error"]["code"] for r in replies[1:]] == [-32002, -32002]


def test_batches_and_non_objects_are_invalid_requests(daemon, tmp_path):
    """A batch, a number, a string and an object that is not JSON-RPC 2.0 are each answered
    with an invalid-request error (id null); the session goes on."""
    thread = idle_thread(daemon, str(tmp_path))
    lines = [
        [{"jsonrpc": "2.0", "id": 7, "method": "ping"}],
        5,
        "ping",
        {"id": 8, "method": "ping"},
    ]
    replies = session(daemon, thread, *lines, {"jsonrpc": "2.0", "id": 9, "method": "ping"})  # type: ignore[arg-type]
    assert [r["error"]["code"] for r in replies[:4]] == [-32600] * 4
    assert all(r["id"] is None for r in replies[:4])
    assert replies[4] == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_tools_carry_annotations(daemon, tmp_path):
    """Each tool says whether it only reads, destroys, or may be repeated."""
    replies = session(daemon, idle_thread(daemon, str(tmp_path)), *HANDSHAKE)
    tools = {t["name"]: t["annotations"] for t in replies[1]["result"]["tools"]}
    assert tools["context_usage"]["readOnlyHint"] is True
    assert tools["compact_context"]["destructiveHint"] is True
    assert tools["compact_microcompact"]["idempotentHint"] is True
