"""What the gateway reads in requests and replies whatever the API, with no I/O: the pass a
request carries, the size of what it holds (``SessionMeter``), a reply's counts as they arrive
(``ReplyUsage``), SSE framing, and the notices it keeps in a session's conversation. What
differs by API is its dialect's (``condensate.gateway.dialects``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from condensate.core.tokens import MESSAGE_OVERHEAD, Counter
from condensate.gateway.binding import canonical_digest
from condensate.gateway.bound import bound as bytes_bound
from condensate.gateway.bound import changed


def credential_of(headers: Mapping[str, str]) -> str:
    """The pass: Claude Code sends its API key as ``x-api-key`` (or ``ANTHROPIC_AUTH_TOKEN`` as
    a bearer token); Codex sends its ``env_key`` as a bearer token."""
    key = headers.get("x-api-key")
    if key:
        return key.strip()
    bearer = headers.get("Authorization", "")
    return bearer[7:].strip() if bearer[:7].lower() == "bearer " else ""


# -- what a request holds ----------------------------------------------------------------------


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in {"type", "id", "tool_use_id", "call_id", "cache_control", "role"}:
                _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def text_of(value: Any) -> str:
    """The text a provider tokenizes in a message or a fixed part, without JSON's syntax."""
    out: list[str] = []
    _strings(value, out)
    return "\n".join(out)


@dataclass(frozen=True)
class RequestShape:
    """A model request cut into the parts the meter adds up: the fixed part (system prompt,
    instructions, tool schemas) and the conversation, one entry per message or item."""

    model: str
    fixed_part: Any
    """The system prompt (instructions) and tool schemas, as sent: turned into text only
    for a session's first request (``fixed``), as it seldom changes and is large."""
    messages: tuple[Any, ...]
    """Each message (item) as parsed."""
    stream: bool

    @property
    def fixed(self) -> str:
        return text_of(self.fixed_part)


@dataclass(frozen=True)
class Sent:
    """A request's conversation as the meter counted it: its messages and their counts."""

    messages: tuple[Any, ...] = ()
    counts: tuple[int, ...] = ()


def _common_prefix(new: tuple[Any, ...], old: tuple[Any, ...]) -> int:
    """How many leading messages ``new`` shares with ``old`` (compared as parsed JSON)."""
    if new[: len(old)] == old:
        return len(old)
    shared = 0
    for a, b in zip(new, old, strict=False):
        if a != b:
            break
        shared += 1
    return shared


@dataclass
class SessionMeter:
    """The meter's anchor-plus-delta rule on a session's requests: the provider's count for
    the last request whose reply came back, plus a local count of the messages appended to
    the conversation since. A request that does not extend the last one (a rewritten history)
    is counted whole. Messages are compared as parsed (no re-encoding) and only new ones are
    counted: this runs on every request, in its latency."""

    counter: Counter
    last: Sent = field(default_factory=Sent)
    """The last request whose reply came back."""
    seen: Sent = field(default_factory=Sent)
    """The last request measured (its counts are reused for the next)."""
    anchor: int | None = None
    """The provider's count for ``last``, once its reply came back."""
    prior: bytes | None = None
    """``last`` as it was sent, when those were the CLI's own bytes."""
    fixed_tokens: int = 0
    requests: int = 0

    def _count(self, message: Any) -> int:
        return self.counter.count(text_of(message)) + MESSAGE_OVERHEAD

    def measure(self, shape: RequestShape, baseline: int | None = None) -> tuple[int, Sent]:
        """The request's size before it is forwarded, and what was counted (for
        ``answered``). A request with no count to stand on (a session's first) has
        ``baseline`` as its fixed part when given: the thread's, measured on an earlier
        session's first reply, where the local count of schemas and prompts can be far off
        the provider's."""
        messages = shape.messages
        seen = self.seen
        known = _common_prefix(messages, seen.messages)
        counts = seen.counts[:known] + tuple(self._count(m) for m in messages[known:])
        sent = Sent(messages, counts)
        self.seen = sent
        if self.requests == 0:
            self.fixed_tokens = self.counter.count(shape.fixed)
        self.requests += 1
        anchored = len(self.last.messages)
        if self.anchor is not None:
            # The answered request is most often the one seen last: compared once.
            shared = known if self.last is seen else _common_prefix(messages, self.last.messages)
            if shared == anchored:
                return self.anchor + sum(counts[anchored:]), sent
        fixed = self.fixed_tokens if baseline is None else baseline
        return fixed + sum(counts), sent

    def answered(self, sent: Sent, prompt: int, body: bytes | None = None) -> None:
        """The provider counted ``prompt`` tokens for the request ``sent``, whose bytes were
        ``body`` (None: not the CLI's own, a receipt replaced something)."""
        self.last, self.anchor, self.prior = sent, prompt, body

    def bound(self, body: bytes) -> int | None:
        """At most how many tokens the provider counts for ``body``, from its bytes and the
        last counted request's (``bound``); None when they cannot say."""
        if self.anchor is None or self.prior is None:
            return None
        return bytes_bound(self.prior, self.anchor, body)

    def new_bytes(self, body: bytes) -> int | None:
        """How many bytes of ``body`` are not in the prefix and suffix it shares with the last
        counted request (None: no such request's own bytes to compare with)."""
        if self.prior is None:
            return None
        start, end = changed(self.prior, body)
        return end - start

    def conversation_tokens(self, sent: Sent) -> int:
        return sum(sent.counts)

    def baseline(self, prompt: int, sent: Sent) -> int:
        """The fixed part of a first request the provider counted ``prompt``: the count less
        the conversation, kept within half and twice the local count of its text (a count
        that says more holds what no request shows, and is no baseline)."""
        rest = prompt - self.conversation_tokens(sent)
        return min(max(rest, self.fixed_tokens // 2), 2 * self.fixed_tokens)


# -- what a reply says ---------------------------------------------------------------------------


@dataclass
class ReplyUsage:
    """The provider's count for one call, gathered from its reply."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cache_write_1h: int = 0
    """Of ``cache_write``, the tokens written for an hour."""
    compaction_input: int = 0
    compaction_output: int = 0
    """A server-side compaction's tokens, billed beside the reply's."""
    message_id: str | None = None
    model: str = ""
    seen: bool = False
    """Some count arrived."""
    complete: bool = False
    """The reply's last count arrived: the call can be logged."""

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


def read_whole(
    into: ReplyUsage, body: Any, read_usage: Callable[[ReplyUsage, Mapping[str, Any]], None]
) -> None:
    """A whole (non-streamed) reply's counts (read by its API's ``read_usage``), id and
    model: both APIs put them at the same keys."""
    if not isinstance(body, Mapping):
        return
    usage = body.get("usage")
    if isinstance(usage, Mapping):
        read_usage(into, usage)
        into.complete = True
    into.message_id = str(body["id"]) if body.get("id") else None
    into.model = str(body.get("model") or "")


TEXT_EVENTS = (b"text_delta", b"output_text.delta")
"""The events that carry a reply's text as it is written (read only while somebody follows
the thread live)."""
USAGE_EVENTS = (
    b"message_start",
    b"message_delta",
    b"message_stop",
    b"response.completed",
    b"response.incomplete",
    b"response.failed",
)
"""The events that carry a reply's counts, or end it."""


@dataclass
class SseSplitter:
    """Cuts a byte stream into SSE events; what is left of a partial event waits for the next
    chunk."""

    buffer: bytes = b""
    wanted: tuple[bytes, ...] | None = None
    """Decode only events whose bytes hold one of these (None: every event): a reply's text
    deltas need no parsing to find its counts."""

    def feed(self, chunk: bytes) -> list[Any]:
        """The data of each event that ``chunk`` completes (``None`` for data that is not
        JSON)."""
        # Normalized with what came before: a chunk may end between a CR and its LF.
        self.buffer = (self.buffer + chunk).replace(b"\r\n", b"\n")
        *events, self.buffer = self.buffer.split(b"\n\n")
        out: list[Any] = []
        for event in events:
            if self.wanted is not None and not any(w in event for w in self.wanted):
                continue
            lines = [ln[5:].lstrip() for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if not lines:
                continue
            try:
                out.append(json.loads(b"\n".join(lines)))
            except ValueError:
                out.append(None)
        return out


# -- Condensate's own answers --------------------------------------------------------------------

HELD_MARK = "[condensate]"
"""How a reply the gateway wrote (not the model) begins: the engines do not log it as the
model's words."""


NOTICE_MARK = "[condensate window]"
"""How the line a person's CLI shows when a window was taken begins: the gateway puts it
first in the reply and takes it out of every later request (the provider never sees it)."""


def held_text(reason: str) -> str:
    return f"{HELD_MARK} {reason}"


@dataclass
class EventEdits:
    """A byte stream's SSE events, each passed through ``edit`` as it completes (the raw
    event, without its blank line, to the bytes that stand for it); what is left of a partial
    event waits for the next chunk, and goes out as it is at the end."""

    edit: Callable[[bytes], bytes]
    buffer: bytes = b""

    def feed(self, chunk: bytes) -> bytes:
        self.buffer += chunk
        *events, self.buffer = self.buffer.split(b"\n\n")
        return b"".join(self.edit(event) for event in events)

    def end(self) -> bytes:
        rest, self.buffer = self.buffer, b""
        return rest


def parsed_event(raw: bytes) -> tuple[str, Any]:
    """An SSE event's name (its ``event:``, else its data's ``type``) and its data, parsed
    (None for data that is not JSON)."""
    name = ""
    data: list[bytes] = []
    for line in raw.replace(b"\r", b"").split(b"\n"):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip())
    try:
        parsed = json.loads(b"\n".join(data))
    except ValueError:
        return name, None
    if not name and isinstance(parsed, dict):
        name = str(parsed.get("type") or "")
    return name, parsed


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


# -- notices, kept where they were first added ------------------------------------------------


@dataclass(frozen=True)
class Insertion:
    """A notice the gateway added to a session's conversation, after the content of the
    message (item) at ``index`` of the CLI's requests, whose digest is ``anchor``. It stays
    there in every later request of the session: a notice added to one request and gone
    from the next would change what the model's later thinking is bound to."""

    key: str
    text: str
    index: int
    anchor: bytes


def insertions_at(
    conversation: list[Any], insertions: Sequence[Insertion]
) -> tuple[list[Any], dict[int, list[str]], tuple[str, ...]]:
    """The conversation's items (a copy to change), the texts due after each index whose
    anchor the conversation still holds (a history the CLI rewrote, or another conversation
    on the same pass, holds none), and the keys of the insertions carried."""
    items = list(conversation)
    carried: list[str] = []
    added: dict[int, list[str]] = {}
    for insertion in insertions:
        at = insertion.index
        if at < len(items) and canonical_digest(conversation[at]) == insertion.anchor:
            added.setdefault(at, []).append(insertion.text)
            carried.append(insertion.key)
    return items, added, tuple(carried)


def opens_with(block: Any, marks: tuple[str, ...]) -> bool:
    """A text block that opens with one of ``marks``: one the CLI wrote itself (its
    environment, its instructions), fixed context."""
    if not isinstance(block, Mapping) or block.get("type") not in ("text", "input_text"):
        return False
    return bool(marks) and str(block.get("text") or "").lstrip().startswith(marks)
