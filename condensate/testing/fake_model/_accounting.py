"""Token accounting: the readable text of content blocks, an OpenAI request's canonical text as
items (instructions + tools first, then one per input item or message), token counts, the bill
of a prompt and the context windows. Pure and thread-safe; no I/O. ``cache_control`` markers
never change a block's text.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from condensate.core.tokens import counter_for

DEFAULT_WINDOW = 200_000
_COUNT_CACHE_LIMIT = 50_000


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys and every ``cache_control`` removed."""
    return json.dumps(strip_cache_control(value), sort_keys=True, ensure_ascii=False)


def strip_cache_control(value: Any) -> Any:
    """Drops ``cache_control``: clients move their breakpoints from one request to the next."""
    if isinstance(value, Mapping):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def content_text(content: Any) -> str:
    """The readable text of a message's content: a string, or a list of typed blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(block) for block in content)
    return canonical_json(content)


def _block_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        return content_text(block) if isinstance(block, str | list) else canonical_json(block)
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text", "summary_text"):
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return ""
    if kind == "compaction":
        return str(block.get("content") or "")
    if kind in ("image", "input_image", "document", "input_file"):
        return f"[{kind}]"
    if kind == "tool_use":
        return f"tool_use {block.get('name')} {canonical_json(block.get('input', {}))}"
    if kind == "tool_result":
        return f"tool_result {content_text(block.get('content'))}"
    return canonical_json(block)


def _preamble(*parts: tuple[str, Any]) -> str:
    return "\n".join(f"{name}: {text}" for name, text in parts if text)


def responses_preamble(body: Mapping[str, Any]) -> str:
    """The instructions and tools of a Responses request, as one block."""
    tools = body.get("tools")
    instructions = body.get("instructions")
    return _preamble(("instructions", instructions), ("tools", tools and canonical_json(tools)))


def responses_items(body: Mapping[str, Any]) -> list[Any]:
    """The input items of a Responses request; a string input is one user message."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    return list(items or [])


def responses_item_text(item: Any) -> str | None:
    """An input item's canonical text; ``None`` for a reasoning item, which is not counted."""
    if not isinstance(item, Mapping):
        return canonical_json(item)
    kind = item.get("type", "message")
    if kind == "message":
        return f"{item.get('role')}: {content_text(item.get('content'))}"
    if kind == "reasoning":
        return None
    if kind in ("function_call", "custom_tool_call"):
        raw = item.get("arguments") if kind == "function_call" else item.get("input")
        return f"{kind} {item.get('name')}: {raw}"
    if kind in ("function_call_output", "custom_tool_call_output"):
        return f"{kind}: {content_text(item.get('output'))}"
    return canonical_json(item)


def responses_blocks(body: Mapping[str, Any]) -> list[str]:
    """Instructions and tools, then each input item; reasoning items are not counted."""
    texts = (responses_item_text(item) for item in responses_items(body))
    return [responses_preamble(body), *(t for t in texts if t is not None)]


def chat_blocks(body: Mapping[str, Any]) -> list[str]:
    """Tools, then each message with its tool calls."""
    tools = body.get("tools") or body.get("functions")
    blocks = [_preamble(("tools", tools and canonical_json(tools)))]
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            blocks.append(canonical_json(message))
            continue
        text = f"{message.get('role')}: {content_text(message.get('content'))}"
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\ntool_call {function.get('name')}: {function.get('arguments')}"
        blocks.append(text)
    return blocks


_counts: dict[tuple[str, str], int] = {}
_counts_lock = threading.Lock()


def count_text(model: str, text: str) -> int:
    """Tokens in ``text`` with ``counter_for(model)``; a text seen before is counted once."""
    if not text:
        return 0
    counter = counter_for(model)
    key = (counter.name, hashlib.sha256(text.encode()).hexdigest())
    with _counts_lock:
        tokens = _counts.get(key)
    if tokens is None:
        tokens = counter.count(text)
        with _counts_lock:
            if len(_counts) > _COUNT_CACHE_LIMIT:
                _counts.clear()
            _counts[key] = tokens
    return tokens


def count_blocks(model: str, blocks: Sequence[str]) -> list[int]:
    """Tokens per block with ``counter_for(model)``."""
    return [count_text(model, block) for block in blocks]


@dataclass(frozen=True)
class Bill:
    """How a prompt is billed: ``cache_read + cache_write + uncached == total``.

    ``cache_read`` is what the prompt cache served, ``cache_write`` what this request wrote to
    it (``cache_write_1h`` of which with the one-hour lifetime), ``uncached`` the rest.
    Anthropic reports them as ``cache_read_input_tokens``, ``cache_creation_input_tokens``
    (split in ``cache_creation``) and ``input_tokens``; OpenAI as ``cached_tokens`` and, from
    GPT-5.6 on, ``cache_write_tokens``, out of ``input_tokens == total``.
    """

    total: int
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0

    @property
    def uncached(self) -> int:
        return self.total - self.cache_read - self.cache_write

    @property
    def cache_write_5m(self) -> int:
        return self.cache_write - self.cache_write_1h

    def reported(self, prompt_tokens: int | None, cached_tokens: int | None) -> Bill:
        """The bill with a ``Usage`` override applied; the sum still holds."""
        total = self.total if prompt_tokens is None else max(0, prompt_tokens)
        read = min(self.cache_read if cached_tokens is None else max(0, cached_tokens), total)
        uncached = min(self.uncached, total - read)
        write = total - read - uncached
        return Bill(total, read, write, min(self.cache_write_1h, write))


@dataclass
class Windows:
    """Context windows: per model (exact name) else ``default``; ``None`` means unlimited."""

    default: int | None = DEFAULT_WINDOW
    per_model: dict[str, int] = field(default_factory=dict)

    def limit(self, model: str) -> int | None:
        return self.per_model.get(model, self.default)
