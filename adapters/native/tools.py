"""The file and shell tools the native loop's model can call: read, search, edit, write, shell.

Each tool is a plain async function ``(ToolContext, arguments) -> ToolOutcome`` and never
raises: every failure comes back as an outcome with ``is_error`` set and a sentence naming the
problem. The context's ``permissions`` decide what may run (``native_permissions``): under
``default`` the tools reach any path and run any command, so they are **not** a sandbox.
No events, no store: the loop records the outcomes.

The file tools live in ``native_files``, shell in ``native_shell``; this module names them for
the model and dispatches a call to one, refusing the tools the permissions forbid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from adapters.native.files import MAX_FILES, MAX_MATCHES, SKIP_DIRS, edit, read, search, write
from adapters.native.permissions import NATIVE_PERMISSIONS, refusal
from adapters.native.shell import shell
from adapters.tool_contract import (
    EDIT_PARAMETERS,
    READ_PARAMETERS,
    SEARCH_PARAMETERS,
    SHELL_PARAMETERS,
    WRITE_PARAMETERS,
    Tool,
    ToolContext,
    ToolOutcome,
    failed,
)

__all__ = [
    "MAX_FILES",
    "MAX_MATCHES",
    "NATIVE_PERMISSIONS",
    "SKIP_DIRS",
    "TOOLS",
    "edit",
    "read",
    "run_tool",
    "search",
    "shell",
    "write",
]

log = structlog.get_logger()

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "read",
            "Read a text file. Returns its lines numbered like `cat -n`, up to a line limit; "
            "the output says how to read on. Use offset and limit for long files. "
            "Refuses directories (use search with a glob) and binary files.",
            READ_PARAMETERS,
            read,
        ),
        Tool(
            "search",
            "Search files. With pattern, returns matching lines as path:line:text; with "
            "glob alone, lists matching files. Skips .git, node_modules and virtualenvs, "
            f"and stops at {MAX_MATCHES} matches or {MAX_FILES} files.",
            SEARCH_PARAMETERS,
            search,
        ),
        Tool(
            "edit",
            "Replace exact text in a file. old_string must match the file exactly, "
            "whitespace included, and occur once unless replace_all is true. Read the file "
            "first.",
            EDIT_PARAMETERS,
            edit,
        ),
        Tool(
            "write",
            "Create or overwrite a file with the given content, creating parent directories. "
            "Prefer edit for changes to an existing file.",
            WRITE_PARAMETERS,
            write,
        ),
        Tool(
            "shell",
            "Run a bash command in the working directory and return its combined stdout and "
            "stderr with the exit code. No stdin; each call is a fresh shell; long output "
            "keeps its head and tail; a command that runs past the timeout is killed.",
            SHELL_PARAMETERS,
            shell,
        ),
    )
}


async def run_tool(name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
    """Run the tool ``name``. Unknown names, tools the context's permissions forbid, bad
    arguments and anything unexpected come back as an error outcome, never an exception, so
    one bad call cannot end the loop."""
    tool = TOOLS.get(name)
    if tool is None:
        return failed(f"Unknown tool {name!r}; the tools are {', '.join(TOOLS)}.", "")
    if refused := refusal(ctx.permissions, name):
        return failed(refused, "")
    try:
        return await tool.run(ctx, arguments)
    except Exception as exc:
        log.exception("tool_crashed", tool=name)
        return failed(f"{name} failed unexpectedly: {type(exc).__name__}: {exc}", "")
