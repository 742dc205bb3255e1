"""Provider-neutral request and response values shared by every model client. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from condensate.events import ModelUsage, ThinkingBlock, ToolCall


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolOutput:
    call_id: str
    output: str
    is_error: bool = False


@dataclass(frozen=True)
class Thinking:
    text: str
    signature: str = ""


Block = Text | ToolUse | ToolOutput | Thinking


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (Text(text),))


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class Request:
    """One model call. ``model`` is the provider's own name (no ``anthropic:`` prefix)."""

    model: str
    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 8_192
    thinking: bool = False
    """False switches thinking off where the model allows it."""
    stream: bool = True
    notice: str | None = None
    """A note for this request only: user text after the last message, past the prompt
    cache's last breakpoint, so the cached prefix of the next request is unchanged."""
    cached_through: int | None = None
    """The last message this request shares with the conversation's previous one (where
    the provider finds that request's cached prefix again, when the view changed in between);
    None: the user message before the last reply, as when the view only grew."""
    cached: bool = True
    """Whether the prompt is marked for the provider's cache. A one-off call (a curator's
    summary) is not: a cache write costs more than input and is never read back."""
    cache_key: str | None = None
    """What the provider's prompt cache keys this conversation by, where it takes one
    (OpenAI's ``prompt_cache_key``: a thread's id)."""
    on_text: Callable[[str], None] | None = field(default=None, compare=False)
    """Told each chunk of the reply's text as the model streams it (never blocks)."""


@dataclass(frozen=True)
class Usage:
    """What the provider billed for one call; ``prompt`` is the size of the prompt it read."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cache_write_1h: int = 0
    """Of ``cache_write``, the tokens written for an hour (Anthropic's ``ttl: "1h"``)."""
    compaction_input: int = 0
    compaction_output: int = 0
    """A server-side compaction's tokens (Anthropic's ``usage.iterations``), billed beside
    the reply's and never part of its prompt."""

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    def logged(
        self, at: datetime, model: str, *, message_id: str | None = None, side: bool = False
    ) -> ModelUsage:
        """The call's count as the log keeps it."""
        return ModelUsage(
            at=at,
            input=self.input,
            cache_read=self.cache_read,
            cache_write=self.cache_write,
            output=self.output,
            cache_write_1h=self.cache_write_1h,
            compaction_input=self.compaction_input,
            compaction_output=self.compaction_output,
            model=model,
            message_id=message_id,
            side=side,
        )


@dataclass(frozen=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...]
    thinking: tuple[ThinkingBlock, ...]
    usage: Usage
    stop_reason: str
    message_id: str
    model: str
    invalid_arguments: Mapping[str, str] = field(default_factory=dict)
    """Call id -> a sentence naming why that call's arguments could not be read (not JSON,
    cut off at max_tokens); such a call carries empty arguments and is answered with an
    error result the model can correct, never run."""
