"""The tools Condensate gives a CLI thread over its own context, as a stdio MCP server.

``python -m condensate.engine.mcp --url URL --thread ID --tools a,b,...`` (the bearer token in
``CONDENSATE_MCP_TOKEN``) speaks JSON-RPC 2.0, one message per line on stdin and stdout (MCP's
stdio transport): ``initialize`` (the protocol version negotiated: the client's when this
server speaks it, else its own newest), ``notifications/initialized``, ``ping``,
``tools/list`` (the thread's tools, each with its annotations) and ``tools/call``. A request
before ``initialize`` (but ``ping``), a batch, a message that is not a JSON-RPC object, an
unknown tool and an argument that is wrong are answered with JSON-RPC errors naming the
problem. Each tool is one call to the daemon's HTTP API for that thread:

- ``compact_context(summary, keep_from?)``: ``POST /threads/:id/compact`` with mode ``summary``,
  by the thread; it answers a pending ask, or queues a compaction;
- ``compact_microcompact()``: the same with mode ``microcompact``;
- ``condense``, ``recall``, ``read_tool_output`` and ``context_usage``:
  ``POST /threads/:id/tools/:name``, answered from the thread's view and log.

The thread's tools are ``context_tools.offered``'s. The runtime takes a requested compaction
at the engine's next checkpoint (after this tool's result), and a reset when the CLI logs the
``condense`` result. Standard library only: a CLI starts one of these per session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, TextIO

from condensate.core.context_tools import (
    COMPACT_CONTEXT,
    COMPACTION_TOOLS,
    CONDENSE,
    CONTEXT_TOOLS,
    MESSAGE,
    PIN,
    READ_TOOL_OUTPUT,
    READING_TOOLS,
    RECALL,
)

PROTOCOL_VERSION = "2025-06-18"
"""The newest protocol version this server speaks: the answer to a client asking for one it
does not know."""
PROTOCOL_VERSIONS = frozenset({"2024-11-05", "2025-03-26", PROTOCOL_VERSION})
NOT_INITIALIZED = -32002
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NAME = "condensate"
TOKEN_ENV = "CONDENSATE_MCP_TOKEN"  # noqa: S105 - the variable's name
TIMEOUT_SECONDS = 30.0

TOOLS: dict[str, dict[str, Any]] = {
    t["name"]: {
        "name": t["name"],
        "description": t["description"],
        "inputSchema": t["schema"],
        "annotations": t["annotations"],
    }
    for t in CONTEXT_TOOLS
}
"""Every tool this server can list, as ``tools/list`` shows it."""


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


class InvalidParams(ValueError):
    """A ``tools/call`` the protocol refuses: no such tool, or an argument that is wrong."""


def _natural(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def check_arguments(name: str, arguments: Any, tools: Sequence[str]) -> dict[str, Any]:
    """The call's arguments, or ``InvalidParams`` naming what is wrong with them."""
    if name not in tools:
        msg = f"Unknown tool {name!r}; this thread's tools are: {', '.join(tools)}."
        raise InvalidParams(msg)
    if not isinstance(arguments, dict):
        msg = f"The arguments of {name} must be an object."
        raise InvalidParams(msg)
    problem = None
    if name == COMPACT_CONTEXT:
        summary = arguments.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            problem = "Argument 'summary' of compact_context must be a non-empty string."
        elif (keep := arguments.get("keep_from")) is not None and not _natural(keep, 1):
            problem = "Argument 'keep_from' of compact_context must be an integer of at least 1."
    elif name == CONDENSE:
        if not isinstance(arguments.get(MESSAGE, ""), str):
            problem = f"Argument '{MESSAGE}' of condense must be a string."
    elif name in (RECALL, PIN):
        if not _natural(arguments.get("seq"), 1):
            problem = f"Argument 'seq' of {name} must be an integer of at least 1."
    elif name == READ_TOOL_OUTPUT:
        if not isinstance(arguments.get("ref"), str | int) or isinstance(arguments["ref"], bool):
            problem = "Argument 'ref' of read_tool_output must be the ref its notice gives."
        elif not _natural(arguments.get("offset", 0), 0):
            problem = "Argument 'offset' of read_tool_output must be an integer of at least 0."
        elif not _natural(arguments.get("length", 1), 1):
            problem = "Argument 'length' of read_tool_output must be an integer of at least 1."
    if problem is not None:
        raise InvalidParams(problem)
    return arguments


def run_tool(daemon: Daemon, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """A tool's text result, and whether it is an error (its arguments checked already)."""
    if name not in COMPACTION_TOOLS:
        status, answer = daemon.call("POST", f"/tools/{name}", arguments)
        if status == 200:
            return str(answer["text"]), bool(answer["isError"])
        return f"Condensate refused: {json.dumps(answer)}", True
    if name == COMPACT_CONTEXT:
        body: dict[str, Any] = {"mode": "summary", "summary": arguments["summary"], "by": "thread"}
        if arguments.get("keep_from") is not None:
            body["keepFrom"] = int(arguments["keep_from"])
    else:
        body = {"mode": "microcompact", "by": "thread"}
    status, answer = daemon.call("POST", "/compact", body)
    if status >= 400:
        return f"Condensate refused: {json.dumps(answer)}", True
    if answer.get("queued"):
        return "Compaction queued: it is taken right after this call.", False
    return "Ask answered: the compaction is taken right after this call.", False


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


class Server:
    """One MCP session over stdio: refuses requests before ``initialize``."""

    def __init__(self, daemon: Daemon, tools: Sequence[str]) -> None:
        self.daemon = daemon
        self.tools = tuple(t for t in tools if t in TOOLS)
        self.initialized = False

    def handle(self, message: Any) -> dict[str, Any] | None:
        """The response to one JSON-RPC message; None for a notification or a response."""
        if isinstance(message, list):
            return _error(None, INVALID_REQUEST, "Invalid Request: batches are not supported.")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 object.")
        method = message.get("method")
        ident = message.get("id")
        if not isinstance(method, str):
            if ident is not None and ("result" in message or "error" in message):
                return None  # a response to a request of ours: we send none
            return _error(ident, INVALID_REQUEST, "Invalid Request: no method.")
        if ident is None:
            return None  # notifications/initialized, notifications/cancelled, ...
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return _error(ident, INVALID_PARAMS, "Invalid params: params must be an object.")
        if method == "initialize":
            self.initialized = True
            asked = params.get("protocolVersion")
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSION
            result: dict[str, Any] = {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": "1"},
            }
        elif method == "ping":
            result = {}
        elif not self.initialized:
            return _error(
                ident, NOT_INITIALIZED, f"Server not initialized: {method} before initialize."
            )
        elif method == "tools/list":
            result = {"tools": [TOOLS[t] for t in self.tools]}
        elif method == "tools/call":
            name = str(params.get("name"))
            try:
                arguments = check_arguments(name, params.get("arguments") or {}, self.tools)
            except InvalidParams as exc:
                return _error(ident, INVALID_PARAMS, f"Invalid params: {exc}")
            try:
                text, is_error = run_tool(self.daemon, name, arguments)
            except (OSError, ValueError, KeyError) as exc:
                text, is_error = f"Condensate could not be reached: {exc}", True
            result = {"content": [{"type": "text", "text": text}], "isError": is_error}
        else:
            return _error(ident, METHOD_NOT_FOUND, f"Method not found: {method}")
        return {"jsonrpc": "2.0", "id": ident, "result": result}


def serve(daemon: Daemon, tools: Sequence[str], stdin: TextIO, stdout: TextIO) -> None:
    server = Server(daemon, tools)
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            reply: dict[str, Any] | None = _error(None, -32700, "Parse error")
        else:
            reply = server.handle(message)
        if reply is not None:
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()


def config(python: str, url: str, token: str, thread: str, tools: Sequence[str]) -> dict[str, Any]:
    """The ``--mcp-config`` document that starts this server for ``thread``, with ``tools``."""
    return {
        "mcpServers": {
            SERVER_NAME: {
                "type": "stdio",
                "command": python,
                "args": [
                    *("-m", "condensate.engine.mcp", "--url", url, "--thread", thread),
                    *("--tools", ",".join(tools)),
                ],
                "env": {TOKEN_ENV: token},
            }
        }
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m condensate.engine.mcp")
    parser.add_argument("--url", required=True, help="the daemon's URL")
    parser.add_argument("--thread", required=True, help="the thread these tools act on")
    parser.add_argument(
        "--tools", default=",".join(READING_TOOLS), help="the tools to list, comma-separated"
    )
    args = parser.parse_args(argv)
    daemon = Daemon(args.url, os.environ.get(TOKEN_ENV, ""), args.thread)
    serve(daemon, args.tools.split(","), sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
