"""A sans-I/O parser for server-sent events: feed it bytes, get (event, data) pairs. Pure.

It splits on any of the three line endings the format allows and joins multi-line data, so
that a JSON body of any length survives however the transport chunks it.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerEvent:
    event: str
    data: str


@dataclass
class SSEParser:
    _buffer: str = ""
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _pending_cr: bool = False
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=codecs.getincrementaldecoder("utf-8")
    )

    def feed(self, chunk: bytes | str) -> list[ServerEvent]:
        """Events completed by ``chunk``; a character split across chunks waits for its end."""
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = text.endswith("\r")
        self._buffer += text
        lines = self._buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()
        out: list[ServerEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                out.append(event)
        return out

    def close(self) -> list[ServerEvent]:
        """Flush a final event that was not followed by a blank line."""
        out = self.feed("\n\n") if (self._buffer or self._data) else []
        return out

    def _line(self, line: str) -> ServerEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


def text_delta(data: Any) -> str:
    """The reply text one event of a model's stream adds: Anthropic's ``text_delta``, the
    Responses API's ``response.output_text.delta``, a Chat Completions chunk's content; else
    ``""``. The native loop and the gateway both pass it on as the reply is written."""
    if not isinstance(data, dict):
        return ""
    kind = data.get("type")
    if kind == "content_block_delta":
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            return str(delta.get("text") or "")
        return ""
    if kind == "response.output_text.delta":
        return str(data.get("delta") or "")
    choices = data.get("choices")
    if kind is None and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        return str(delta.get("content") or "") if isinstance(delta, dict) else ""
    return ""
