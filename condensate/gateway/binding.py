"""Keeping a session's signed thinking valid when the gateway changes what its CLI sent.
Pure: no I/O.

Anthropic's models with preserved thinking bind every signed ``thinking`` (and
``redacted_thinking``) block to what came before it: the ``tools``, the ``system`` prompt and
the messages before it, thinking blocks left out, ``cache_control`` markers left out. A block
whose prefix changed since it was produced is refused with a 400 ("The block is bound to a
different conversation"); so is a block after a gap in the run of thinking blocks
(platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks). The gateway
changes earlier parts of a request (receipts, clamps, pages, a reset's cut, notices), so it
removes the thinking those changes invalidated, the documented fix ("Remove the block";
removing blocks "from the start of the history, from the end, or all of them" is valid):

- a block the gateway saw produced (its reply came through a request the gateway changed) is
  kept while the forwarded prefix before it is the one it was produced on: thinking produced
  after a change stays;
- a block it did not see produced (its request went on as the CLI sent it, or the daemon
  restarted since) is kept only before the first part the gateway changes in this request:
  the gateway's changes only ever grow, so such a prefix is the one the block was produced on;
- a block once removed stays removed in every later request of the session ("Once you remove a
  block, leave it out"), so the thinking produced while it was gone stays valid too.

A removed block is "lost": its reasoning is gone from the model's view. Each request counts the
blocks it newly lost and their tokens (what the text says, else the producing reply's output
less what the turn shows).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})
BINDING_MODELS = (
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
"""The Claude models that run the prefix check (the page's ``supportedModels``); older ones
do not check (and keep only the last turn's thinking themselves)."""


BINDING_REFUSAL = "bound to a different conversation"
"""What the provider's 400 says when a block's binding fails."""


@dataclass(frozen=True)
class Produced:
    """A thinking block the gateway saw produced: the digest of the forwarded prefix it was
    produced on, and the output tokens of the reply that carried it."""

    prefix: bytes
    output: int


@dataclass
class Ledger:
    """One CLI session's record of its signed thinking, kept by the gateway."""

    produced: dict[str, Produced] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def record(self, keys: Sequence[str], prefix: bytes, output: int) -> None:
        """The reply to a request whose prefix digest was ``prefix`` carried these blocks."""
        for key in keys:
            self.produced[key] = Produced(prefix, output)


@dataclass(frozen=True)
class Lost:
    """Thinking a request went without, newly: blocks and their tokens."""

    blocks: int = 0
    tokens: int = 0

    def __add__(self, other: Lost) -> Lost:
        return Lost(self.blocks + other.blocks, self.tokens + other.tokens)


def block_key(block: Mapping[str, Any]) -> str | None:
    """What names a thinking block across requests: its signature (a redacted block's data)."""
    value = block.get("signature") if block.get("type") == "thinking" else block.get("data")
    if not isinstance(value, str) or not value:
        return None
    # Signatures run to kilobytes; their digest names them as well.
    return hashlib.sha256(value.encode()).hexdigest()


def _canonical(value: Any) -> bytes:
    """A part's value as the check compares it: values, not bytes or key order; no
    ``cache_control`` (moving a breakpoint is no change)."""
    dumped = _dumps(value)
    # Most parts carry no marker: one encoding, and a second only for those that do.
    return dumped if b'"cache_control"' not in dumped else _dumps(_without_markers(value))


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # What orjson cannot write (an integer past 64 bits) Python's encoder can.
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def canonical_digest(value: Any) -> bytes:
    """The digest of a value as the binding check compares it (``cache_control`` left out)."""
    return hashlib.sha256(_canonical(value)).digest()


def _without_markers(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return value


def _content(message: Any) -> list[Any]:
    if not isinstance(message, Mapping):
        return []
    content = message.get("content")
    if isinstance(content, str):
        # A string is one text block: the same value as its list form.
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _is_thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_KINDS


class _Prefix:
    """The running digest of a request's prefix, message by message, thinking left out
    (a block is checked at the start of its message; what comes before it in its own turn is
    the CLI's as received unless the gateway made the message anew)."""

    def __init__(self, fixed: Any) -> None:
        self._hash = hashlib.sha256()
        self._hash.update(_canonical(fixed))

    def add(self, role: Any, blocks: list[Any]) -> None:
        self._hash.update(_canonical([role, [b for b in blocks if not _is_thinking(b)]]))

    def digest(self) -> bytes:
        return self._hash.copy().digest()


def prefix_digest(body: Mapping[str, Any]) -> bytes:
    """The digest of the whole request's prefix: what a block of its reply is bound to."""
    prefix = _Prefix(_fixed(body))
    for message in body.get("messages") or []:
        role = message.get("role") if isinstance(message, Mapping) else None
        prefix.add(role, _content(message))
    return prefix.digest()


def _fixed(body: Mapping[str, Any]) -> list[Any]:
    """What comes before the conversation, in either API."""
    return [body.get("tools"), body.get("system"), body.get("instructions")]


def _first_change(
    body: Mapping[str, Any], original: Mapping[str, Any], key: str, own: set[int]
) -> int:
    """The index of the first message (item) of ``body`` the gateway made or changed (those
    it kept are the CLI's own objects, ``own`` by id); 0 when the fixed part changed."""
    if any(body.get(k) is not original.get(k) for k in ("system", "tools", "instructions")):
        return 0
    conversation = body.get(key)
    items = conversation if isinstance(conversation, list) else []
    for i, item in enumerate(items):
        if id(item) not in own:
            return i
    return len(items)


@dataclass(frozen=True)
class Kept:
    """A request with its invalid thinking taken out: the body, what it lost, and the digest
    of its prefix (what its reply's blocks will be bound to)."""

    body: dict[str, Any]
    lost: Lost
    prefix: bytes


def keep_valid(
    body: Mapping[str, Any],
    original: Mapping[str, Any],
    ledger: Ledger,
    count: Callable[[str], int],
) -> Kept:
    """``body`` (what the gateway made of ``original``, the CLI's request, sharing the
    messages it left alone) with the thinking blocks whose binding its changes broke taken
    out, and those a session removed before kept out."""
    own = {id(m) for m in original.get("messages") or []}
    first = _first_change(body, original, "messages", own)
    prefix = _Prefix(_fixed(body))
    lost = Lost()
    messages: list[Any] = []
    for i, message in enumerate(body.get("messages") or []):
        at_start = prefix.digest()
        role = message.get("role") if isinstance(message, Mapping) else None
        blocks = _content(message)
        prefix.add(role, blocks)
        if not any(_is_thinking(b) for b in blocks):
            messages.append(message)
            continue
        kept: list[Any] = []
        shown_before = False
        for block in blocks:
            if not _is_thinking(block):
                kept.append(block)
                shown_before = True
                continue
            key = block_key(block)
            if key is not None and key not in ledger.removed:
                produced = ledger.produced.get(key)
                if produced is not None:
                    # Blocks before it in its own turn are the CLI's as received unless the
                    # gateway made this message anew.
                    valid = produced.prefix == at_start and (not shown_before or id(message) in own)
                else:
                    valid = i < first
                if valid:
                    kept.append(block)
                    continue
                ledger.removed.add(key)
                lost = lost + Lost(1, _tokens(block, produced, blocks, count))
        if len(kept) == len(blocks):
            messages.append(message)
        else:
            messages.append({**message, "content": kept})
    out = dict(body)
    if "messages" in body:
        out["messages"] = messages
    return Kept(out, lost, prefix.digest())


def keep_valid_reasoning(
    body: Mapping[str, Any],
    original: Mapping[str, Any],
    ledger: Ledger,
    count: Callable[[str], int],
) -> Kept:
    """The same for the Responses API: a ``reasoning`` input item follows "the conversation
    history that comes before it", and a newer model drops one whose history changed
    (developers.openai.com/api/docs/guides/keep-prefix-unchanged): the gateway takes it out
    itself, so that the loss is known and the input it would bill is not sent."""
    conversation = body.get("input")
    if not isinstance(conversation, list):
        return Kept(dict(body), Lost(), prefix_digest(body))
    first = _first_change(body, original, "input", {id(i) for i in original.get("input") or []})
    prefix = _Prefix(_fixed(body))
    lost = Lost()
    items: list[Any] = []
    for i, item in enumerate(conversation):
        if not _is_reasoning(item):
            prefix.add(None, [item])
            items.append(item)
            continue
        key = item_key(item)
        if key is None or key in ledger.removed:
            if key is None:
                items.append(item)
            continue
        produced = ledger.produced.get(key)
        if (produced.prefix == prefix.digest()) if produced is not None else i < first:
            items.append(item)
            continue
        ledger.removed.add(key)
        lost = lost + Lost(1, _reasoning_tokens(item, produced, count))
    return Kept({**body, "input": items}, lost, prefix.digest())


def _is_reasoning(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == "reasoning"


def item_key(item: Mapping[str, Any]) -> str | None:
    """What names a reasoning item across requests: its encrypted content, else its id."""
    value = item.get("encrypted_content") or item.get("id")
    return hashlib.sha256(value.encode()).hexdigest() if isinstance(value, str) and value else None


def _reasoning_tokens(
    item: Mapping[str, Any], produced: Produced | None, count: Callable[[str], int]
) -> int:
    """A lost item's tokens: its summary's count, else the producing reply's output."""
    summary = item.get("summary")
    texts = (
        [str(part.get("text") or "") for part in summary if isinstance(part, Mapping)]
        if isinstance(summary, list)
        else []
    )
    if any(texts):
        return sum(count(t) for t in texts)
    return produced.output if produced is not None else 0


def without_thinking_from(
    body: Mapping[str, Any], message_index: int, ledger: Ledger, count: Callable[[str], int]
) -> Kept:
    """``body`` with every thinking block from message ``message_index`` on taken out (and
    kept out): the documented fix for a binding the provider refused (removing the last blocks
    of the run leaves the earlier ones valid)."""
    lost = Lost()
    messages: list[Any] = []
    for i, message in enumerate(body.get("messages") or []):
        blocks = _content(message)
        if i < message_index or not any(_is_thinking(b) for b in blocks):
            messages.append(message)
            continue
        kept = []
        for block in blocks:
            if not _is_thinking(block):
                kept.append(block)
                continue
            key = block_key(block)
            if key is not None and key not in ledger.removed:
                ledger.removed.add(key)
                lost = lost + Lost(1, _tokens(block, ledger.produced.get(key), blocks, count))
        messages.append({**message, "content": kept})
    return Kept({**body, "messages": messages}, lost, prefix_digest(body))


def _tokens(
    block: Mapping[str, Any],
    produced: Produced | None,
    turn: Sequence[Any],
    count: Callable[[str], int],
) -> int:
    """A lost block's tokens: its text's count when the reply showed it; else, for a block
    the gateway saw produced, the reply's output less what its turn shows; else unknown (0)."""
    text = block.get("thinking")
    if isinstance(text, str) and text:
        return count(text)
    if produced is None:
        return 0
    shown = sum(count(orjson.dumps(b).decode()) for b in turn if not _is_thinking(b))
    return max(produced.output - shown, 0)


def refused_at(message: str) -> int | None:
    """The message index a binding refusal names (``messages.3.content.0: ...``), or None
    when the error is not a binding refusal."""
    if BINDING_REFUSAL not in message:
        return None
    head = message.split(":", 1)[0].strip()
    parts = head.split(".")
    if len(parts) >= 2 and parts[0] == "messages" and parts[1].isdigit():
        return int(parts[1])
    return 0


@dataclass
class ReplyThinking:
    """What a reply says of thinking, read from its body or its stream: the keys of the
    blocks it carries, and how many blocks of the request the provider dropped
    (``input_transformations`` entries of type ``thinking_dropped``)."""

    signatures: dict[int, str] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    dropped: int = 0

    def read_body(self, body: Any) -> None:
        """A whole reply: a message's thinking blocks, a response's reasoning items."""
        if not isinstance(body, Mapping):
            return
        self._transformations(body.get("input_transformations"))
        content = body.get("content")
        for block in content if isinstance(content, list) else []:
            if _is_thinking(block) and (key := block_key(block)) is not None:
                self.keys.append(key)
        output = body.get("output")
        for item in output if isinstance(output, list) else []:
            if _is_reasoning(item) and (key := item_key(item)) is not None:
                self.keys.append(key)

    def _transformations(self, entries: Any) -> None:
        if isinstance(entries, list):
            # The last list the stream sends is the serving model's (after a fallback).
            self.dropped = sum(
                1 for e in entries if isinstance(e, Mapping) and e.get("type") == "thinking_dropped"
            )

    def read_event(self, data: Any) -> None:
        """One SSE event's data: a signature arrives in ``signature_delta`` pieces, a redacted
        block whole in its ``content_block_start``, the provider's drops on ``message_start``
        (and again on the last ``message_delta`` after a fallback)."""
        if not isinstance(data, Mapping):
            return
        kind = data.get("type")
        index = data.get("index")
        if kind in ("response.completed", "response.incomplete"):
            self.read_body(data.get("response"))
        elif kind == "message_start" and isinstance(data.get("message"), Mapping):
            self._transformations(data["message"].get("input_transformations"))
        elif kind == "message_delta":
            self._transformations(data.get("input_transformations"))
        elif kind == "content_block_delta" and isinstance(index, int):
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "signature_delta":
                self.signatures[index] = self.signatures.get(index, "") + str(
                    delta.get("signature") or ""
                )
        elif kind == "content_block_start" and isinstance(index, int):
            block = data.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "redacted_thinking":
                key = block_key(block)
                if key is not None:
                    self.keys.append(key)

    def all_keys(self) -> list[str]:
        streamed = [
            key
            for _, signature in sorted(self.signatures.items())
            if (key := block_key({"type": "thinking", "signature": signature})) is not None
        ]
        return [*self.keys, *streamed]


THINKING_EVENTS = (b"signature_delta", b"redacted_thinking", b"input_transformations")
"""The events of a Messages stream that carry its thinking signatures and the provider's
drops (a response's reasoning items come in its last event, which the usage reader parses)."""
