"""Paging a large tool output: the view shows its beginning and a reference, the log keeps all
of it, and ``read_tool_output(ref, offset, length)`` (or ``recall``) reads the rest a page at a
time. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

READ_TOOL = "read_tool_output"
RECALL_TOOL = "recall"
PAGE_CHARS = 30_000
"""A page when the thread sets no output cap (about what a tool's own cap keeps)."""
MAX_PAGE_CHARS = 100_000


def shown_chars(output: str, tokens: int, cap_tokens: int) -> int:
    """How much of an output of ``tokens`` tokens the view shows under a cap of
    ``cap_tokens``: the same share of its characters."""
    return max(1, int(len(output) * cap_tokens / max(tokens, 1)))


def page_chars(cap_tokens: int | None) -> int:
    """A page's characters for a thread's output cap (about four characters a token)."""
    return PAGE_CHARS if cap_tokens is None else min(max(cap_tokens * 4, 1_000), MAX_PAGE_CHARS)


def shown(output: str, chars: int, seq: int) -> str:
    """The output's first ``chars`` characters and how to read on."""
    return (
        f"{output[:chars]}\n\n[Output paged: {len(output):,} characters in all, the first "
        f'{chars:,} shown. Read the rest with {READ_TOOL}(ref="{seq}", offset={chars}, '
        "length=...).]"
    )


def page(output: str, offset: int, length: int, seq: int) -> str:
    """``length`` characters of the output from ``offset``, and where the next page starts."""
    end = min(offset + length, len(output))
    text = output[offset:end]
    if end >= len(output):
        return f"{text}\n\n[End of output: characters {offset:,} to {end:,} of {len(output):,}.]"
    return (
        f"{text}\n\n[Characters {offset:,} to {end:,} of {len(output):,}; the next page is "
        f'{READ_TOOL}(ref="{seq}", offset={end}, length={length}).]'
    )


READ_DESCRIPTION = (
    "Read part of a tool output that was too large to show whole (the view shows its "
    "beginning and names its ref): the characters from offset, length of them."
)
READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"type": "string", "description": "The output's ref, as its notice gives it."},
        "offset": {"type": "integer", "minimum": 0},
        "length": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_CHARS},
    },
    "required": ["ref"],
}
RECALL_DESCRIPTION = (
    "Get back the original of something a receipt stands for (or any earlier message or "
    "result), by the seq the receipt names; a large one comes a page at a time."
)
RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"seq": {"type": "integer", "minimum": 1}},
    "required": ["seq"],
}
