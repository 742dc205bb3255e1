"""Token accounting: a request's canonical text as blocks (system + tools first, then one block
per message), their counts, the simulated prompt cache and the context windows.
Pure and thread-safe; no I/O. ``cache_control`` markers never change a block's text.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from condensate.tokens import counter_for

DEFAULT_WINDOW = 200_000
_COUNT_CACHE_LIMIT = 50_000


def _dumps(value: Any) -> str:
    return json.dumps(_strip(value), sort_keys=True, ensure_ascii=False)


def _strip(value: Any) -> Any:
    """Drops ``cache_control``: clients move their breakpoints from one request to the next."""
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def content_text(content: Any) -> str:
    """The readable text of a message's content: a string, or a list of typed blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(block) for block in content)
    return _dumps(content)


def _block_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        return content_text(block) if isinstance(block, str | list) else _dumps(block)
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text", "summary_text"):
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return ""
    if kind in ("image", "input_image", "document", "input_file"):
        return f"[{kind}]"
    if kind == "tool_use":
        return f"tool_use {block.get('name')} {_dumps(block.get('input', {}))}"
    if kind == "tool_result":
        return f"tool_result {content_text(block.get('content'))}"
    return _dumps(block)


def _preamble(*parts: tuple[str, Any]) -> str:
    return "\n".join(f"{name}: {text}" for name, text in parts if text)


def anthropic_blocks(body: Mapping[str, Any]) -> list[str]:
    """System and tools, then each message (``role: "system"`` ones included) in order."""
    tools = body.get("tools")
    blocks = [
        _preamble(("system", content_text(body.get("system"))), ("tools", tools and _dumps(tools)))
    ]
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            blocks.append(f"{message.get('role')}: {content_text(message.get('content'))}")
        else:
            blocks.append(_dumps(message))
    return blocks


def responses_blocks(body: Mapping[str, Any]) -> list[str]:
    """Instructions and tools, then each input item; reasoning items are not counted."""
    tools = body.get("tools")
    instructions = body.get("instructions")
    blocks = [_preamble(("instructions", instructions), ("tools", tools and _dumps(tools)))]
    items = body.get("input")
    if isinstance(items, str):
        return [*blocks, f"user: {items}"]
    for item in items or []:
        if not isinstance(item, Mapping):
            blocks.append(_dumps(item))
            continue
        kind = item.get("type", "message")
        if kind == "message":
            blocks.append(f"{item.get('role')}: {content_text(item.get('content'))}")
        elif kind == "reasoning":
            continue
        elif kind in ("function_call", "custom_tool_call"):
            raw = item.get("arguments") if kind == "function_call" else item.get("input")
            blocks.append(f"{kind} {item.get('name')}: {raw}")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            blocks.append(f"{kind}: {content_text(item.get('output'))}")
        else:
            blocks.append(_dumps(item))
    return blocks


def chat_blocks(body: Mapping[str, Any]) -> list[str]:
    """Tools, then each message with its tool calls."""
    tools = body.get("tools") or body.get("functions")
    blocks = [_preamble(("tools", tools and _dumps(tools)))]
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            blocks.append(_dumps(message))
            continue
        text = f"{message.get('role')}: {content_text(message.get('content'))}"
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\ntool_call {function.get('name')}: {function.get('arguments')}"
        blocks.append(text)
    return blocks


_counts: dict[tuple[str, str], int] = {}
_counts_lock = threading.Lock()


def count_blocks(model: str, blocks: Sequence[str]) -> list[int]:
    """Tokens per block with ``counter_for(model)``; repeated blocks are counted once."""
    counter = counter_for(model)
    result = []
    for block in blocks:
        key = (counter.name, hashlib.sha256(block.encode()).hexdigest())
        with _counts_lock:
            tokens = _counts.get(key)
        if tokens is None:
            tokens = counter.count(block)
            with _counts_lock:
                if len(_counts) > _COUNT_CACHE_LIMIT:
                    _counts.clear()
                _counts[key] = tokens
        result.append(tokens)
    return result


@dataclass(frozen=True)
class Bill:
    """How a prompt is billed: ``cache_read + cache_write + uncached == total``.

    ``cache_read`` is the leading run of blocks some earlier request of the model already sent,
    never including the last block; ``uncached`` is the last block (the new message);
    ``cache_write`` is the rest. Anthropic reports them as ``cache_read_input_tokens``,
    ``cache_creation_input_tokens`` and ``input_tokens``; OpenAI as ``cached_tokens`` out of
    ``input_tokens == total``.
    """

    total: int
    cache_read: int
    cache_write: int
    uncached: int

    @classmethod
    def of(cls, counts: Sequence[int], matched: int) -> Bill:
        read = sum(counts[: min(matched, len(counts) - 1)])
        last = counts[-1] if counts else 0
        total = sum(counts)
        return cls(total, read, total - read - last, last)

    def reported(self, prompt_tokens: int | None, cached_tokens: int | None) -> Bill:
        """The bill with a ``Usage`` override applied; the sum still holds."""
        total = self.total if prompt_tokens is None else max(0, prompt_tokens)
        read = min(self.cache_read if cached_tokens is None else max(0, cached_tokens), total)
        last = min(self.uncached, total - read)
        return Bill(total, read, total - read - last, last)


def _chain(blocks: Sequence[str]) -> list[bytes]:
    digest, chain = b"", []
    for block in blocks:
        digest = hashlib.sha256(digest + hashlib.sha256(block.encode()).digest()).digest()
        chain.append(digest)
    return chain


class PromptCache:
    """Remembers every prefix of every answered request, per model, as a chain of hashes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, set[bytes]] = {}

    def matched(self, model: str, blocks: Sequence[str]) -> int:
        """How many leading blocks an earlier request of ``model`` also began with."""
        with self._lock:
            seen = self._seen.get(model, set())
            count = 0
            for digest in _chain(blocks):
                if digest not in seen:
                    break
                count += 1
            return count

    def remember(self, model: str, blocks: Sequence[str]) -> None:
        with self._lock:
            self._seen.setdefault(model, set()).update(_chain(blocks))

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


@dataclass
class Windows:
    """Context windows: per model (exact name) else ``default``; ``None`` means unlimited."""

    default: int | None = DEFAULT_WINDOW
    per_model: dict[str, int] = field(default_factory=dict)

    def limit(self, model: str) -> int | None:
        return self.per_model.get(model, self.default)
