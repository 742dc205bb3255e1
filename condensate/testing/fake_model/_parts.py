"""An Anthropic Messages request cut into parts in the API's order: each tool (``tools.i``), each
system block (``system``, or ``system.i``), each message content block
(``messages.i.content.j``). Prompt caching, the preserved-thinking check and context editing all
work on these parts. Pure; no I/O.

A part's value is its block as canonical JSON (sorted keys) with every ``cache_control``
removed: "JSON formatting and key order don't matter; the values do", and moving a breakpoint
changes nothing (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking). A
string ``content`` is the one text block it stands for, so ``"hi"`` and
``[{"type": "text", "text": "hi"}]`` are the same value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from condensate.testing.fake_model._accounting import canonical_json, content_text, count_text

Section: TypeAlias = Literal["tools", "system", "messages"]

THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0


@dataclass(frozen=True)
class Part:
    """One block of a request. ``tokens`` is ``overhead`` (the ``role:`` or section label the
    fake counts on a message's or section's first part) plus the block's own tokens."""

    path: str
    section: Section
    message: int | None
    role: str | None
    block: Mapping[str, Any]
    digest: bytes
    text: str
    first: bool
    overhead: int
    tokens: int
    ttl: float | None
    """The block's ``cache_control`` lifetime in seconds, ``None`` when it carries none."""

    @property
    def kind(self) -> str:
        return str(self.block.get("type", ""))

    @property
    def is_thinking(self) -> bool:
        return self.section == "messages" and self.kind in THINKING_KINDS

    @property
    def signature(self) -> str:
        """A thinking block's ``signature`` (``data`` for ``redacted_thinking``)."""
        key = "data" if self.kind == "redacted_thinking" else "signature"
        return str(self.block.get(key) or "")

    def with_block(self, block: Mapping[str, Any], model: str) -> Part:
        """The same place holding ``block`` instead (what context editing leaves)."""
        return make_part(
            model,
            path=self.path,
            section=self.section,
            message=self.message,
            role=self.role,
            block=block,
            first=self.first,
        )


def digest_of(section: Section, role: str | None, block: Any) -> bytes:
    return hashlib.sha256(f"{section}|{role}|{canonical_json(block)}".encode()).digest()


def ttl_of(marker: Any) -> float | None:
    """The lifetime a ``cache_control`` marker asks for: ``ttl`` "5m" (the default) or "1h"."""
    if not isinstance(marker, Mapping):
        return None
    return ONE_HOUR if marker.get("ttl") == "1h" else FIVE_MINUTES


def make_part(
    model: str,
    *,
    path: str,
    section: Section,
    message: int | None,
    role: str | None,
    block: Mapping[str, Any],
    first: bool,
) -> Part:
    label = _label(section, role)
    text = canonical_json(block) if section == "tools" else content_text([block])
    overhead = count_text(model, label) if first else 0
    return Part(
        path=path,
        section=section,
        message=message,
        role=role,
        block=block,
        digest=digest_of(section, role, block),
        text=text,
        first=first,
        overhead=overhead,
        tokens=overhead + count_text(model, text),
        ttl=ttl_of(block.get("cache_control")),
    )


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, Mapping) else {"type": "text", "text": str(b)} for b in content]
    if content is None:
        return []
    return [{"type": "text", "text": canonical_json(content)}]


def anthropic_parts(body: Mapping[str, Any], model: str) -> list[Part]:
    """Tools, then system, then each message's content blocks (``role: "system"`` messages
    inside ``messages`` are ordinary messages)."""
    parts: list[Part] = []
    for i, tool in enumerate(body.get("tools") or []):
        block = tool if isinstance(tool, Mapping) else {"value": tool}
        parts.append(
            make_part(
                model,
                path=f"tools.{i}",
                section="tools",
                message=None,
                role=None,
                block=block,
                first=i == 0,
            )
        )
    system = body.get("system")
    for i, block in enumerate(_blocks(system or None)):
        path = "system" if isinstance(system, str) else f"system.{i}"
        parts.append(
            make_part(
                model,
                path=path,
                section="system",
                message=None,
                role=None,
                block=block,
                first=i == 0,
            )
        )
    for i, message in enumerate(body.get("messages") or []):
        held = message if isinstance(message, Mapping) else {"role": None, "content": message}
        role = None if held.get("role") is None else str(held.get("role"))
        for j, block in enumerate(_blocks(held.get("content"))):
            parts.append(
                make_part(
                    model,
                    path=f"messages.{i}.content.{j}",
                    section="messages",
                    message=i,
                    role=role,
                    block=block,
                    first=j == 0,
                )
            )
    return parts


def settle(model: str, parts: Sequence[Part]) -> list[Part]:
    """``parts`` with the section or role label counted on the first part of each section and
    message again, after blocks were taken out."""
    settled: list[Part] = []
    for part in parts:
        before = settled[-1] if settled else None
        first = before is None or (before.section, before.message) != (part.section, part.message)
        settled.append(part if first == part.first else _relabelled(model, part, first))
    return settled


def _relabelled(model: str, part: Part, first: bool) -> Part:
    label = count_text(model, _label(part.section, part.role)) if first else 0
    tokens = part.tokens - part.overhead + label
    return replace(part, first=first, overhead=label, tokens=tokens)


def _label(section: Section, role: str | None) -> str:
    return {"tools": "tools: ", "system": "system: ", "messages": f"{role}: "}[section]


def total_tokens(parts: Sequence[Part]) -> int:
    return sum(p.tokens for p in parts)


def chain(parts: Sequence[Part]) -> list[bytes]:
    """The running digest after each part: equal at ``i`` exactly when parts ``0..i`` are."""
    digest, running = b"", []
    for part in parts:
        digest = hashlib.sha256(digest + part.digest).digest()
        running.append(digest)
    return running
