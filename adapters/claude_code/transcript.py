"""A Claude Code transcript (``~/.claude/projects/…/<session>.jsonl``) read as a recording, for
``condensate replay``; registered as a transcript format (``condensate.transcripts``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from condensate.events import Event, ThinkingBlock, ToolCall, UserMessage
from condensate.replay.recording import EPOCH, Recording, first_prompt_baseline
from condensate.replay.transcripts import Calls, Reply, TranscriptFormat, at_of, content_text

ENGINE_NAME = "claude"


def from_claude(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Claude Code transcript (cli-protocols §2.7): one line per content block of an
    assistant message (merged by ``message.id``), user lines with text or tool results.
    Sidechains (subagents) and API error lines are skipped."""
    events: list[Event] = []
    calls = Calls()
    pending: Reply | None = None
    model = ""
    first_prompt: int | None = None
    clock = EPOCH

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            events.append(pending.done(calls))
        pending = None

    for line in lines:
        clock = at_of(line, clock + timedelta(seconds=1))
        if line.get("isSidechain") or line.get("isApiErrorMessage") or line.get("error"):
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            continue
        kind = line.get("type")
        if kind == "assistant":
            message_id = str(message.get("id") or line.get("uuid") or "")
            if pending is not None and pending.id != message_id:
                flush()
            if pending is None:
                pending = Reply(clock, message_id)
                model = model or str(message.get("model") or "")
                usage = message.get("usage")
                if first_prompt is None and isinstance(usage, dict):
                    first_prompt = sum(
                        int(usage.get(k) or 0)
                        for k in (
                            "input_tokens",
                            "cache_read_input_tokens",
                            "cache_creation_input_tokens",
                        )
                    )
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    pending.text.append(str(block.get("text", "")))
                elif block.get("type") == "thinking":
                    pending.thinking.append(
                        ThinkingBlock(
                            text=str(block.get("thinking", "")),
                            signature=str(block.get("signature", "")),
                        )
                    )
                elif block.get("type") == "tool_use":
                    pending.calls.append(
                        ToolCall(
                            id=str(block["id"]),
                            name=str(block.get("name", "")),
                            arguments=dict(block.get("input") or {}),
                        )
                    )
        elif kind == "user":
            flush()
            if line.get("isMeta"):
                continue
            content = message.get("content")
            if isinstance(content, str):
                if content.strip():
                    events.append(UserMessage(at=clock, text=content))
                continue
            texts: list[str] = []
            for block in content or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result":
                    result = calls.result(
                        clock,
                        str(block.get("tool_use_id")),
                        content_text(block.get("content")),
                        bool(block.get("is_error")),
                    )
                    if result is not None:
                        events.append(result)
                elif block.get("type") == "text":
                    text = str(block.get("text", ""))
                    if text.strip() and not text.lstrip().startswith("<system-reminder>"):
                        texts.append(text)
            if texts:
                events.append(UserMessage(at=clock, text="\n".join(texts)))
    flush()
    model = f"anthropic:{model}" if model and ":" not in model else model
    model = model or "anthropic:claude-sonnet-4-5"
    baseline = first_prompt_baseline(events, first_prompt)
    return Recording("claude", name, ENGINE_NAME, model, baseline, tuple(events))


def _recognizes(first: Mapping[str, Any]) -> bool:
    return first.get("type") in {"user", "assistant", "system", "summary"} or "sessionId" in first


FORMAT = TranscriptFormat("a Claude Code transcript", _recognizes, from_claude)
