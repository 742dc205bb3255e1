"""The tools Condensate gives a head on a CLI engine, as a stdio MCP server.

``python -m condensate.mcp --url URL --thread ID`` (the bearer token in ``CONDENSATE_MCP_TOKEN``)
speaks JSON-RPC 2.0, one message per line on stdin and stdout (MCP's stdio transport):
``initialize``, ``notifications/initialized``, ``ping``, ``tools/list`` and ``tools/call``. Each
tool is one call to the daemon's HTTP API for that thread:

- ``compact_context(summary, keep_from?)``: ``POST /threads/:id/compact`` with mode ``summary``,
  by the thread; it answers a pending ask, or queues a compaction;
- ``compact_microcompact()``: the same with mode ``microcompact``;
- ``context_usage()``: ``GET /threads/:id``: used, line, ceiling, window and any pending ask.

The runtime takes a requested compaction at the engine's next checkpoint (after this tool's
result). Standard library only: Claude Code starts one of these per session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any, TextIO

from condensate.head_tools import COMPACT_CONTEXT, COMPACT_MICROCOMPACT, HEAD_TOOLS

PROTOCOL_VERSION = "2025-06-18"
SERVER_NAME = "condensate"
TOKEN_ENV = "CONDENSATE_MCP_TOKEN"  # noqa: S105 - the variable's name
TIMEOUT_SECONDS = 30.0

TOOLS: list[dict[str, Any]] = [
    {"name": t["name"], "description": t["description"], "inputSchema": t["schema"]}
    for t in HEAD_TOOLS
]


class Daemon:
    """The daemon's HTTP API for one thread."""

    def __init__(self, url: str, token: str, thread: str) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.thread = thread

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the daemon's own loopback URL
            f"{self.url}/threads/{self.thread}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def run_tool(daemon: Daemon, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """A tool's text result, and whether it is an error."""
    if name == COMPACT_CONTEXT:
        summary = arguments.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            return "compact_context needs a non-empty 'summary'.", True
        body: dict[str, Any] = {"mode": "summary", "summary": summary, "by": "thread"}
        if arguments.get("keep_from") is not None:
            body["keepFrom"] = int(arguments["keep_from"])
        status, answer = daemon.call("POST", "/compact", body)
    elif name == COMPACT_MICROCOMPACT:
        status, answer = daemon.call("POST", "/compact", {"mode": "microcompact", "by": "thread"})
    elif name == "context_usage":
        status, answer = daemon.call("GET", "")
        if status == 200:
            usage = answer["usage"]
            shown = {k: usage[k] for k in ("used", "line", "ceiling", "window")}
            shown["pendingAsk"] = answer.get("pendingAsk")
            return json.dumps(shown), False
    else:
        return f"There is no tool {name!r}.", True
    if status >= 400:
        return f"Condensate refused: {json.dumps(answer)}", True
    if answer.get("queued"):
        return "Compaction queued: it is taken right after this call.", False
    return "Ask answered: the compaction is taken right after this call.", False


def handle(daemon: Daemon, message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one JSON-RPC message; None for a notification."""
    method = message.get("method")
    ident = message.get("id")
    if ident is None:
        return None  # notifications/initialized, notifications/cancelled, ...
    params = message.get("params") or {}
    result: dict[str, Any]
    if method == "initialize":
        result = {
            "protocolVersion": str(params.get("protocolVersion") or PROTOCOL_VERSION),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        try:
            text, is_error = run_tool(
                daemon, str(params.get("name")), dict(params.get("arguments") or {})
            )
        except (OSError, ValueError, KeyError) as exc:
            text, is_error = f"Condensate could not be reached: {exc}", True
        result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    else:
        return {
            "jsonrpc": "2.0",
            "id": ident,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def serve(daemon: Daemon, stdin: TextIO, stdout: TextIO) -> None:
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            reply: dict[str, Any] | None = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "Parse error"},
            }
        else:
            reply = handle(daemon, message) if isinstance(message, dict) else None
        if reply is not None:
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()


def config(python: str, url: str, token: str, thread: str) -> dict[str, Any]:
    """The ``--mcp-config`` document that starts this server for ``thread``."""
    return {
        "mcpServers": {
            SERVER_NAME: {
                "type": "stdio",
                "command": python,
                "args": ["-m", "condensate.mcp", "--url", url, "--thread", thread],
                "env": {TOKEN_ENV: token},
            }
        }
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m condensate.mcp")
    parser.add_argument("--url", required=True, help="the daemon's URL")
    parser.add_argument("--thread", required=True, help="the thread these tools act on")
    args = parser.parse_args(argv)
    serve(Daemon(args.url, os.environ.get(TOKEN_ENV, ""), args.thread), sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
