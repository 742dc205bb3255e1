"""What reading another agent's transcript into a ``Recording`` takes: the formats the engine
packages register (entry-point group ``condensate.transcripts``: a Claude Code transcript, a
Codex rollout), and the helpers they share to turn lines into events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from condensate.core.receipts import argument_of
from condensate.errors import ConfigError
from condensate.events import AssistantMessage, ThinkingBlock, ToolCall, ToolResult
from condensate.replay.recording import Recording

GROUP = "condensate.transcripts"


@dataclass(frozen=True)
class TranscriptFormat:
    """A transcript format an engine's package can read."""

    title: str
    """How messages name it ("a Claude Code transcript")."""
    recognizes: Callable[[Mapping[str, Any]], bool]
    """Whether a file whose first JSON line is this is in the format."""
    read: Callable[[str, Sequence[Mapping[str, Any]]], Recording]
    """The recording of the file called ``name`` with these lines."""


@cache
def formats() -> tuple[TranscriptFormat, ...]:
    """Every transcript format installed, in its entry points' order."""
    found: list[TranscriptFormat] = []
    for point in entry_points(group=GROUP):
        value = point.load()
        if not isinstance(value, TranscriptFormat):
            msg = f"The transcript entry point {point.name} = {point.value} is not a format."
            raise ConfigError(msg)
        found.append(value)
    return tuple(found)


def at_of(line: Mapping[str, Any], fallback: datetime) -> datetime:
    raw = line.get("timestamp")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    if isinstance(content, dict):
        return content_text(content.get("content") or content.get("output") or "")
    return "" if content is None else json.dumps(content)


class Calls:
    """Tool calls seen so far, by id, to name the results that answer them."""

    def __init__(self) -> None:
        self.by_id: dict[str, ToolCall] = {}

    def result(self, at: datetime, call_id: str, output: str, is_error: bool) -> ToolResult | None:
        call = self.by_id.pop(call_id, None)
        if call is None:
            return None  # a result whose call the transcript does not hold
        return ToolResult(
            at=at,
            call_id=call_id,
            tool=call.name,
            argument=argument_of(call.name, call.arguments),
            output=output,
            is_error=is_error,
        )


@dataclass
class Reply:
    """An assistant message being assembled from a transcript's lines."""

    at: datetime
    id: str | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    def done(self, calls: Calls) -> AssistantMessage:
        """The finished message; its calls are remembered so their results can be named."""
        for call in self.calls:
            calls.by_id[call.id] = call
        return AssistantMessage(
            at=self.at,
            text="\n".join(self.text),
            thinking=tuple(self.thinking),
            tool_calls=tuple(self.calls),
            message_id=self.id,
        )
