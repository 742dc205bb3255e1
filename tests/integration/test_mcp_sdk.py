"""Condensate's MCP server against the official ``mcp`` SDK's client (a development
dependency): the SDK negotiates a protocol version with it, lists its tools with their
annotations, and calls them; an invalid call comes back as the SDK's error for it."""

from __future__ import annotations

import json
import os
import sys

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from condensate.engine.mcp import PROTOCOL_VERSIONS, TOKEN_ENV
from tests.integration.daemon import REPO, DaemonProcess
from tests.integration.test_mcp import HEAD_TOOLS, idle_thread


def server(daemon: DaemonProcess, thread: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "condensate.engine.mcp", "--url", daemon.url, "--thread", thread),
            *("--tools", ",".join(HEAD_TOOLS)),
        ],
        env={**os.environ, TOKEN_ENV: daemon.token},
        cwd=REPO,
    )


async def test_the_sdk_client_negotiates_lists_and_calls(daemon: DaemonProcess, tmp_path) -> None:
    """initialize settles on a version both speak; tools/list gives a head's tools with
    annotations; context_usage answers with the thread's numbers."""
    thread = idle_thread(daemon, str(tmp_path))
    async with (
        stdio_client(server(daemon, thread)) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        assert client.protocol_version in PROTOCOL_VERSIONS
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert tuple(tools) == HEAD_TOOLS
        annotations = tools["context_usage"].annotations
        assert annotations is not None
        assert annotations.read_only_hint is True
        answer = await client.call_tool("context_usage", {})
        assert answer.is_error is False
        usage = json.loads(answer.content[0].text)  # type: ignore[union-attr]
        assert usage["used"] > 0


async def test_the_sdk_client_sees_an_invalid_call_as_an_error(
    daemon: DaemonProcess, tmp_path
) -> None:
    """An unknown tool is a protocol error the SDK raises, naming the tool."""
    thread = idle_thread(daemon, str(tmp_path))
    async with (
        stdio_client(server(daemon, thread)) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        with pytest.raises(Exception, match="no_such_tool"):
            await client.call_tool("no_such_tool", {})
