"""Loading a recording from a log of any of three formats (``load`` tells which apart).

Condensate's own log (the SQLite file, or events as JSON lines), a Claude Code transcript
(``~/.claude/projects/…/<session>.jsonl``) or a Codex rollout
(``$CODEX_HOME/sessions/…/rollout-….jsonl``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from condensate.errors import CondensateError, EventLogError
from condensate.events import (
    EVENT_TYPES,
    AssistantMessage,
    Event,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    decode,
)
from condensate.replay.recording import (
    _EPOCH,
    Recording,
    first_prompt_baseline,
    from_events,
)
from condensate.store import EventLog

ARGUMENT_CHARS = 120
_SQLITE_MAGIC = b"SQLite format 3\x00"


def load(path: Path, thread: str | None = None) -> Recording:
    """A recording from a log file, whichever of the three formats it is."""
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        return _load_sqlite(path, thread)
    lines = _json_lines(path)
    first = lines[0] if lines else None
    if first is None:
        msg = f"{path} holds no JSON lines to replay."
        raise CondensateError(msg)
    if first.get("kind") in EVENT_TYPES:
        return from_events(path.name, "condensate", (decode(_strip(line)) for line in lines))
    if "payload" in first and first.get("type") in {
        "session_meta",
        "response_item",
        "turn_context",
        "event_msg",
        "compacted",
    }:
        return from_codex(path.name, lines)
    if first.get("type") in {"user", "assistant", "system", "summary"} or "sessionId" in first:
        return from_claude(path.name, lines)
    msg = (
        f"{path} is not a Condensate log, a Claude Code transcript or a Codex rollout "
        f"(its first line has keys {sorted(first)[:8]})."
    )
    raise CondensateError(msg)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            msg = f"{path}, line {number}, is not JSON: {exc}."
            raise CondensateError(msg) from exc
        if isinstance(value, dict):
            out.append(value)
    return out


def _strip(line: dict[str, Any]) -> dict[str, Any]:
    """An event as the tail API prints it carries ``seq`` and ``tokens``; drop them."""
    return {k: v for k, v in line.items() if k not in ("seq", "tokens", "thread_id")}


def _load_sqlite(path: Path, thread: str | None) -> Recording:
    """A thread of a Condensate log (the one with the most events unless named), opened read
    only: replaying a log never changes it."""
    try:
        with EventLog.open_read_only(path) as log:
            if thread is None:
                sizes = {t: log.last_seq(t) for t in log.thread_ids()}
                if not sizes:
                    msg = f"{path} holds no threads."
                    raise CondensateError(msg)
                thread = max(sizes, key=lambda t: sizes[t])
            events = [stored.event for stored in log.replay(thread)]
    except EventLogError as exc:
        raise CondensateError(str(exc)) from exc
    if not events:
        msg = f"{path} has no thread {thread!r}."
        raise CondensateError(msg)
    return from_events(f"{path.name}:{thread}", "condensate", events)


def _at(line: Mapping[str, Any], fallback: datetime) -> datetime:
    raw = line.get("timestamp")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


def argument_of(name: str, arguments: Mapping[str, Any]) -> str:
    """What a receipt names for a call: a path, a pattern, a command (about 120 chars)."""
    if name.rsplit("__", 1)[-1].lower() == "apply_patch":
        raw = arguments.get("input") or arguments.get("patch") or ""
        named = re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", str(raw), re.M)
        return ", ".join(n.strip() for n in named)[:ARGUMENT_CHARS]
    for key in ("file_path", "path", "notebook_path", "pattern", "command", "cmd", "query", "url"):
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return value[:ARGUMENT_CHARS]
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    if isinstance(content, dict):
        return _content_text(content.get("content") or content.get("output") or "")
    return "" if content is None else json.dumps(content)


class _Calls:
    """Tool calls seen so far, by id, to name the results that answer them."""

    def __init__(self) -> None:
        self.by_id: dict[str, ToolCall] = {}

    def result(self, at: datetime, call_id: str, output: str, is_error: bool) -> ToolResult | None:
        call = self.by_id.pop(call_id, None)
        if call is None:
            return None  # a result whose call the transcript does not hold
        return ToolResult(
            at=at,
            call_id=call_id,
            tool=call.name,
            argument=argument_of(call.name, call.arguments),
            output=output,
            is_error=is_error,
        )


@dataclass
class _Reply:
    """An assistant message being assembled from a transcript's lines."""

    at: datetime
    id: str | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    def done(self, calls: _Calls) -> AssistantMessage:
        """The finished message; its calls are remembered so their results can be named."""
        for call in self.calls:
            calls.by_id[call.id] = call
        return AssistantMessage(
            at=self.at,
            text="\n".join(self.text),
            thinking=tuple(self.thinking),
            tool_calls=tuple(self.calls),
            message_id=self.id,
        )


def from_claude(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Claude Code transcript (cli-protocols §2.7): one line per content block of an
    assistant message (merged by ``message.id``), user lines with text or tool results.
    Sidechains (subagents) and API error lines are skipped."""
    events: list[Event] = []
    calls = _Calls()
    pending: _Reply | None = None
    model = ""
    first_prompt: int | None = None
    clock = _EPOCH

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            events.append(pending.done(calls))
        pending = None

    for line in lines:
        clock = _at(line, clock + timedelta(seconds=1))
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
                pending = _Reply(clock, message_id)
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
                        _content_text(block.get("content")),
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
    return Recording("claude", name, "claude", model, baseline, tuple(events))


_EXIT = re.compile(r"(?:Process exited with code|exit code:?|Exit code:?)\s*(-?\d+)", re.I)


def from_codex(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Codex rollout (cli-protocols §3.6): ``response_item`` lines as sent to the model
    (user and assistant messages, function and custom tool calls and their outputs);
    developer messages and the environment context are the baseline."""
    events: list[Event] = []
    calls = _Calls()
    pending: _Reply | None = None
    model = ""
    first_prompt: int | None = None
    clock = _EPOCH

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            events.append(pending.done(calls))
        pending = None

    def assistant() -> _Reply:
        nonlocal pending
        if pending is None:
            pending = _Reply(clock)
        return pending

    for line in lines:
        clock = _at(line, clock + timedelta(seconds=1))
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        kind, item = line.get("type"), payload.get("type")
        if kind == "turn_context":
            model = model or str(payload.get("model") or "")
        elif kind == "event_msg":
            if item == "task_started":
                flush()
                events.append(TurnStarted(at=clock))
            elif item == "task_complete":
                flush()
                events.append(TurnEnded(at=clock, outcome="completed"))
            elif item == "token_count" and first_prompt is None:
                info = payload.get("info") or {}
                last = info.get("last_token_usage") if isinstance(info, dict) else None
                if isinstance(last, dict) and last.get("input_tokens"):
                    first_prompt = int(last["input_tokens"])
        elif kind == "response_item":
            if item == "message":
                text = _content_text(payload.get("content"))
                role = payload.get("role")
                if role == "assistant":
                    if pending is not None and pending.calls:
                        flush()
                    assistant().text.append(text)
                elif role == "user":
                    flush()
                    stripped = text.lstrip()
                    if stripped.startswith(("<environment_context>", "<user_instructions>")):
                        continue
                    if text.strip():
                        events.append(UserMessage(at=clock, text=text))
            elif item in ("function_call", "custom_tool_call"):
                raw = payload.get("arguments") if item == "function_call" else None
                try:
                    arguments = json.loads(raw) if isinstance(raw, str) else {}
                except ValueError:
                    arguments = {"input": raw}
                if item == "custom_tool_call":
                    arguments = {"input": payload.get("input", "")}
                if not isinstance(arguments, dict):
                    arguments = {"input": arguments}
                call_id = str(payload.get("call_id") or payload.get("id") or "")
                assistant().calls.append(
                    ToolCall(id=call_id, name=str(payload.get("name", "")), arguments=arguments)
                )
            elif item in ("function_call_output", "custom_tool_call_output"):
                flush()
                output = _content_text(payload.get("output"))
                code = _EXIT.search(output)
                failed = code is not None and int(code[1]) != 0
                result = calls.result(clock, str(payload.get("call_id") or ""), output, failed)
                if result is not None:
                    events.append(result)
    flush()
    model = model or "gpt-5.5"
    model = model if ":" in model else f"openai:{model}"
    baseline = first_prompt_baseline(events, first_prompt)
    return Recording("codex", name, "codex", model, baseline, tuple(events))
