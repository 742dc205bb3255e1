"""The tools an agent has over its own context, defined once: the native loop offers them as
tool specs, the CLI engines through Condensate's MCP server (``mcp``), which lists the ones
its thread has (``offered``). Standard library only (the MCP server starts with each CLI
session).

- ``compact_context`` / ``compact_microcompact``: a thread Condensate windows asks for a
  compaction of its own (a head answers its ask with them);
- ``condense``: an agent-reset thread resets its own context (``reset``);
- ``recall`` / ``read_tool_output``: the original of what a receipt stands for, a page of an
  output too large to show whole (``paging``);
- ``context_usage``: how full the context is.
"""

from __future__ import annotations

from typing import Any

from condensate.core import paging

COMPACT_CONTEXT = "compact_context"
COMPACT_MICROCOMPACT = "compact_microcompact"
CONTEXT_USAGE = "context_usage"
CONDENSE = "condense"
RECALL = paging.RECALL_TOOL
READ_TOOL_OUTPUT = paging.READ_TOOL
PIN = "pin"
MESSAGE = "message_to_future_self"
MAX_MESSAGE_UNITS = 16_384
"""The longest message to a future self, in UTF-16 code units."""

CONDENSE_DESCRIPTION = (
    "Reset your context to start fresh. First save what you will need (unfinished requests, "
    "decisions, file locations, next steps) with your tools and wait for the writes to "
    "succeed; then call this, alone in its response. Your conversation history is cleared "
    "from your context (the log keeps it); you then see this call, its result with your "
    "message, and any new user messages. Optionally leave a short message to your future "
    "self, such as where your notes are."
)
CONDENSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        MESSAGE: {
            "type": "string",
            "description": "Kept verbatim and shown to you after the reset "
            f"(at most {MAX_MESSAGE_UNITS:,} UTF-16 code units).",
        }
    },
}

CONTEXT_TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": COMPACT_CONTEXT,
        "description": (
            "Replace the older part of your context with your own summary. Write down "
            "everything you still need: the task, decisions, files touched, failed attempts "
            "with their errors, and what is left to do. The compaction happens right after "
            "this call; your conversation continues from the summary and the recent part."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "What matters so far."},
                "keep_from": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Optional: the log seq from which to keep the context "
                    "verbatim (see context_usage).",
                },
            },
            "required": ["summary"],
        },
        "annotations": {
            "title": "Compact my context with my summary",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
    {
        "name": COMPACT_MICROCOMPACT,
        "description": (
            "Clear older tool results you can get again (file reads, searches, diffs) from "
            "your context, keeping everything else. Cheaper than a summary."
        ),
        "schema": {"type": "object", "properties": {}},
        "annotations": {
            "title": "Clear old re-readable results",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": CONTEXT_USAGE,
        "description": (
            "How full your context is: tokens used, your line (where Condensate asks you to "
            "compact), the working ceiling, the model's window, and any pending ask."
        ),
        "schema": {"type": "object", "properties": {}},
        "annotations": {
            "title": "How full my context is",
            "readOnlyHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": CONDENSE,
        "description": CONDENSE_DESCRIPTION,
        "schema": CONDENSE_SCHEMA,
        "annotations": {
            "title": "Reset my context, with a note to my future self",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
    {
        "name": PIN,
        "description": (
            "Pin a message of your context (by the seq recall and receipts name) so that it "
            "survives every window, as the brief and the latest instruction do: a decision, "
            "a constraint, a plan you must not lose. A user message or an assistant message "
            "without tool calls."
        ),
        "schema": {
            "type": "object",
            "properties": {"seq": {"type": "integer", "minimum": 1}},
            "required": ["seq"],
        },
        "annotations": {
            "title": "Keep this message through every window",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": RECALL,
        "description": paging.RECALL_DESCRIPTION,
        "schema": paging.RECALL_SCHEMA,
        "annotations": {
            "title": "Get back what a receipt stands for",
            "readOnlyHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": READ_TOOL_OUTPUT,
        "description": paging.READ_DESCRIPTION,
        "schema": paging.READ_SCHEMA,
        "annotations": {
            "title": "Read a page of a large output",
            "readOnlyHint": True,
            "openWorldHint": False,
        },
    },
)
"""Each tool's name, description, JSON schema of its arguments and MCP annotations."""

COMPACTION_TOOLS = (COMPACT_CONTEXT, COMPACT_MICROCOMPACT)
"""The two that request a compaction (the native loop takes them itself)."""
READING_TOOLS = (CONTEXT_USAGE, RECALL, READ_TOOL_OUTPUT, PIN)
"""The ones every thread has: they read (``pin`` only marks what to keep)."""
ANSWERED_TOOLS = (CONDENSE, *READING_TOOLS)
"""The ones the daemon answers for a CLI thread's MCP server (``POST /threads/:id/tools/:name``;
the compaction tools are ``/compact``'s)."""


def offered(*, head: bool, reset: bool) -> tuple[str, ...]:
    """The context tools of a CLI thread: the reading ones; ``condense`` for an agent-reset
    thread (nothing is windowed for it), the compaction tools for a head (it is asked to
    compact rather than cut; another thread is windowed without asking)."""
    if reset:
        return (CONDENSE, *READING_TOOLS)
    return (*COMPACTION_TOOLS, *READING_TOOLS) if head else READING_TOOLS
