"""Clamps: any one message, tool result or tool argument longer than the thread's cap keeps
its head and its tail in the view; the middle stays in the log, and ``read_tool_output`` (or
``recall``) reads it back a page at a time. Pure: no I/O.

The rule is on characters (``CHARS_PER_TOKEN`` a token, the estimate's own ratio), so that
the native loop's view and the gateway's rewrite of a CLI's request clamp the same text the
same way, and every later request shows the same bytes (the cached prefix stays valid).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from condensate.core.paging import READ_TOOL

CHARS_PER_TOKEN = 4
DEFAULT_TOKENS = 16_000
"""The cap's default (``CONDENSATE_CLAMP_TOKENS``): at the native loop's and Codex's default
line (about 72,000 tokens) one item may hold under a quarter of it."""


def cap_chars(tokens: int) -> int:
    return tokens * CHARS_PER_TOKEN


def over(text: str, cap: int | None) -> bool:
    """Whether ``text`` is clamped under a cap of ``cap`` characters (None: no cap)."""
    return cap is not None and len(text) > cap


def clamp(text: str, cap: int, seq: int, *, argument: bool = False) -> str:
    """``text``'s first and last ``cap // 2`` characters around a note that says where the
    rest is; ``text`` itself when it fits. An ``argument`` is one string of a call: the log
    keeps it with the call's other arguments, read from the start of the message."""
    if len(text) <= cap:
        return text
    half = cap // 2
    cut = len(text) - 2 * half
    where = (
        f'{READ_TOOL}(ref="{seq}") reads the whole message with its calls'
        if argument
        else f'{READ_TOOL}(ref="{seq}", offset={half}, length=...) reads on from here'
    )
    note = (
        f"\n[... {cut:,} of {len(text):,} characters clamped here; the log keeps them: "
        f"{where} ...]\n"
    )
    return f"{text[:half]}{note}{text[len(text) - half :]}"


def clamp_value(value: Any, cap: int, seq: int) -> Any:
    """A tool call's arguments with every string longer than ``cap`` clamped (nested ones
    too)."""
    if isinstance(value, str):
        return clamp(value, cap, seq, argument=True) if len(value) > cap else value
    if isinstance(value, Mapping):
        return {k: clamp_value(v, cap, seq) for k, v in value.items()}
    if isinstance(value, list):
        return [clamp_value(v, cap, seq) for v in value]
    return value


def has_long_string(value: Any, cap: int) -> bool:
    """Whether any string in ``value`` is longer than ``cap``."""
    if isinstance(value, str):
        return len(value) > cap
    if isinstance(value, Mapping):
        return any(has_long_string(v, cap) for v in value.values())
    if isinstance(value, list):
        return any(has_long_string(v, cap) for v in value)
    return False


def digest(text: str) -> str:
    """How the gateway recognizes a clamped message's text in a CLI's request."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def clamped_json(arguments: str, cap: int, seq: int) -> str:
    """A call's arguments as the Responses API carries them (a JSON string), clamped; a
    string that is not a JSON object is clamped as text."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return clamp(arguments, cap, seq, argument=True)
    if not isinstance(parsed, dict):
        return clamp(arguments, cap, seq, argument=True)
    return json.dumps(clamp_value(parsed, cap, seq), ensure_ascii=False)


def readable(text: str, calls: list[tuple[str, str, Mapping[str, Any]]]) -> str:
    """An assistant message as ``read_tool_output`` and ``recall`` read it: its text, then
    each call (id, name, arguments) on its own line."""
    lines = [
        f"[tool call {i}] {name} {json.dumps(args, ensure_ascii=False)}" for i, name, args in calls
    ]
    return "\n".join([text, *lines]) if lines else text
