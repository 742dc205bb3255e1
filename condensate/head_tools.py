"""The tools a head is given over its own context, defined once: the native loop offers them
as tool specs, the CLI engines through Condensate's MCP server (``mcp``). Standard library
only (the MCP server starts with each Claude Code session).
"""

from __future__ import annotations

from typing import Any

COMPACT_CONTEXT = "compact_context"
COMPACT_MICROCOMPACT = "compact_microcompact"
CONTEXT_USAGE = "context_usage"

HEAD_TOOLS: tuple[dict[str, Any], ...] = (
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
    },
    {
        "name": COMPACT_MICROCOMPACT,
        "description": (
            "Clear older tool results you can get again (file reads, searches, diffs) from "
            "your context, keeping everything else. Cheaper than a summary."
        ),
        "schema": {"type": "object", "properties": {}},
    },
    {
        "name": CONTEXT_USAGE,
        "description": (
            "How full your context is: tokens used, your line (where Condensate asks you to "
            "compact), the working ceiling, the model's window, and any pending ask."
        ),
        "schema": {"type": "object", "properties": {}},
    },
)
"""Each tool's name, description and JSON schema of its arguments."""

COMPACTION_TOOLS = (COMPACT_CONTEXT, COMPACT_MICROCOMPACT)
"""The two that request a compaction (the native loop takes them itself)."""
