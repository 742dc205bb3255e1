"""Anthropic server-side context management: context editing (``context_management.edits``)
and on-demand compaction (``compaction: {"type": "summarize"}``). Pure and thread-safe; no I/O.

Context editing (https://platform.claude.com/docs/en/build-with-claude/context-editing) is
"Applied before the prompt reaches Claude": ``clear_thinking_20251015`` removes the thinking of
older assistant turns, ``clear_tool_uses_20250919`` clears older tool results past a trigger.
The placeholder a cleared result holds is the fake's own: the API's text is not documented.
The shapes of ``trigger``, ``keep`` and ``clear_at_least``, and the rule that
``clear_thinking_20251015`` comes first, are from captured API answers (secondary).

On-demand compaction (https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand,
beta ``compact-2026-09-04``) summarizes every message of the request into one signed
``compaction`` block, which later requests carry first in ``messages``. The error codes
``compaction_block_misplaced``, ``compaction_signature_invalid`` and
``compaction_content_mismatch`` are from a secondary source; where the API puts them in its
error body is not documented, so the fake starts the message with them.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._models import keeps_all_thinking
from condensate.testing.fake_model._parts import Part, settle, total_tokens
from condensate.testing.fake_model._thinking import Carried, PrefixPart

COMPACT_BETA = "compact-2026-09-04"
CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEARED_RESULT = "[The fake model server cleared this tool result (context editing).]"
"""What a cleared ``tool_result`` holds; the API's placeholder text is not documented."""
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3

Edit = Mapping[str, Any]


def edits_of(body: Mapping[str, Any]) -> list[Edit] | None:
    """The request's context edits (``None`` without ``context_management``); raises
    ``BadRequest`` for a strategy out of place or one the fake does not implement."""
    management = body.get("context_management")
    if management is None:
        return None
    if not isinstance(management, Mapping):
        msg = "context_management: Input should be a valid dictionary"
        raise BadRequest(msg)
    edits = management.get("edits") or []
    if not isinstance(edits, list) or not all(isinstance(e, Mapping) for e in edits):
        msg = "context_management.edits: Input should be a valid list of objects"
        raise BadRequest(msg)
    for i, edit in enumerate(edits):
        kind = edit.get("type")
        if kind == CLEAR_THINKING and i > 0:
            msg = (
                f"context_management: `{CLEAR_THINKING}` must be the first strategy in "
                "`context_management.edits` when provided"
            )
            raise BadRequest(msg)
        if kind not in (CLEAR_THINKING, CLEAR_TOOL_USES):
            msg = (
                f"context_management.edits.{i}.type: the fake model server does not implement "
                f"{kind!r} (it implements {CLEAR_THINKING!r} and {CLEAR_TOOL_USES!r})"
            )
            raise BadRequest(msg)
        keep = edit.get("keep")
        if kind == CLEAR_THINKING and isinstance(keep, Mapping) and _value(keep, 1) < 1:
            msg = f"context_management.edits.{i}.keep.value: N must be > 0"
            raise BadRequest(msg)
    return list(edits)


def _value(setting: Any, default: int) -> int:
    if isinstance(setting, Mapping) and isinstance(setting.get("value"), int):
        return int(setting["value"])
    return default


def apply_edits(
    model: str, parts: Sequence[Part], edits: Sequence[Edit]
) -> tuple[list[Part], list[dict[str, Any]]]:
    """The parts the model reads after ``edits``, in order, and the ``applied_edits``."""
    current = list(parts)
    applied: list[dict[str, Any]] = []
    for edit in edits:
        if edit.get("type") == CLEAR_THINKING:
            current, entry = _clear_thinking(model, current, edit)
        else:
            current, entry = _clear_tool_uses(model, current, edit)
        if entry is not None:
            applied.append(entry)
    return current, applied


def _clear_thinking(
    model: str, parts: list[Part], edit: Edit
) -> tuple[list[Part], dict[str, Any] | None]:
    """Keeps the thinking of the last N assistant turns that carry any ("keep": {"type":
    "thinking_turns", "value": N}); ``"all"`` keeps everything. Unset, the model's default."""
    keep = edit.get("keep")
    if keep is None:
        keep = "all" if keeps_all_thinking(model) else {"type": "thinking_turns", "value": 1}
    if keep == "all":
        return parts, None
    turns = sorted({p.message for p in parts if p.is_thinking and p.message is not None})
    cleared = set(turns[: max(0, len(turns) - _value(keep, 1))])
    if not cleared:
        return parts, None
    kept = settle(model, [p for p in parts if not (p.is_thinking and p.message in cleared)])
    entry = {
        "type": CLEAR_THINKING,
        "cleared_thinking_turns": len(cleared),
        "cleared_input_tokens": total_tokens(parts) - total_tokens(kept),
    }
    return kept, entry


def _clear_tool_uses(
    model: str, parts: list[Part], edit: Edit
) -> tuple[list[Part], dict[str, Any] | None]:
    """Past the trigger, clears every tool result but those of the last ``keep`` tool uses and
    of ``exclude_tools``; ``clear_tool_inputs`` (true, or a list of tool names) clears the
    calls' inputs too. Clearing fewer than ``clear_at_least`` tokens applies nothing."""
    uses = [p for p in parts if p.section == "messages" and p.kind == "tool_use"]
    trigger = edit.get("trigger")
    if isinstance(trigger, Mapping) and trigger.get("type") == "tool_uses":
        over = len(uses) > _value(trigger, 0)
    else:
        over = total_tokens(parts) > _value(trigger, DEFAULT_TRIGGER)
    if not over:
        return parts, None
    keep = _value(edit.get("keep"), DEFAULT_KEEP)
    excluded = set(edit.get("exclude_tools") or [])
    older = uses[: max(0, len(uses) - keep)]
    cleared = {str(u.block.get("id")): u for u in older if u.block.get("name") not in excluded}
    if not cleared:
        return parts, None
    inputs = edit.get("clear_tool_inputs", False)
    edited: list[Part] = []
    for part in parts:
        block = part.block
        if part.kind == "tool_result" and str(block.get("tool_use_id")) in cleared:
            edited.append(part.with_block({**block, "content": CLEARED_RESULT}, model))
            continue
        wiped = inputs is True or (isinstance(inputs, list) and block.get("name") in inputs)
        if part.kind == "tool_use" and str(block.get("id")) in cleared and wiped:
            edited.append(part.with_block({**block, "input": {}}, model))
            continue
        edited.append(part)
    tokens = total_tokens(parts) - total_tokens(edited)
    if tokens < _value(edit.get("clear_at_least"), 0):
        return parts, None
    entry = {
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": len(cleared),
        "cleared_input_tokens": tokens,
    }
    return edited, entry


def compaction_asked(body: Mapping[str, Any], betas: frozenset[str]) -> bool:
    """Whether the request asks for a summary; raises ``BadRequest`` where the API does."""
    asked = body.get("compaction")
    if asked is None:
        return False
    if COMPACT_BETA not in betas:
        msg = "compaction: Extra inputs are not permitted"
        raise BadRequest(msg)
    if body.get("context_management") is not None:
        msg = "compaction: You can't combine `compaction` with `context_management` on one request."
        raise BadRequest(msg)
    if not isinstance(asked, Mapping) or asked.get("type") != "summarize":
        msg = "compaction.type: Input should be 'summarize'"
        raise BadRequest(msg)
    return True


def default_summary(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or []
    return f"Summary of the conversation so far: the {len(messages)} messages before this one."


@dataclass(frozen=True)
class Summary:
    content: str
    covered: tuple[bytes, ...]
    """The digests of the summarizing request's parts, thinking blocks left out."""


class CompactionLedger:
    """Every compaction block the fake issued."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, Summary] = {}

    def issue(self, summary: Summary) -> str:
        with self._lock:
            seed = f"{len(self._issued)}|{summary.content}".encode()
            signature = "fakecmp" + hashlib.sha256(seed).hexdigest()[:40]
            self._issued[signature] = summary
            return signature

    def get(self, signature: str) -> Summary | None:
        with self._lock:
            return self._issued.get(signature)

    def clear(self) -> None:
        with self._lock:
            self._issued.clear()


def carried(ledger: CompactionLedger, parts: Sequence[Part]) -> Carried | None:
    """The compaction block the request carries back, checked: "Put the block first in
    `messages`, either as an `assistant` message of its own or as the first content block of
    the first message"; "Send exactly one `compaction` block per request"."""
    blocks = [p for p in parts if p.section == "messages" and p.kind == "compaction"]
    if not blocks:
        return None
    for part in blocks:
        if part.path != "messages.0.content.0" or part is not blocks[0]:
            msg = (
                f"compaction_block_misplaced: {part.path}: a `compaction` block must be the "
                "first block of the first message, and a request carries one at most."
            )
            raise BadRequest(msg)
    (part,) = blocks
    summary = ledger.get(str(part.block.get("signature") or ""))
    if summary is None:
        msg = (
            f"compaction_signature_invalid: {part.path}: Invalid `signature` in `compaction` block."
        )
        raise BadRequest(msg)
    if part.block.get("content") != summary.content:
        msg = (
            f"compaction_content_mismatch: {part.path}: the `content` of this `compaction` block "
            "differs from what the API returned."
        )
        raise BadRequest(msg)
    return Carried(PrefixPart(part.digest, part.section, part.path), summary.covered)
