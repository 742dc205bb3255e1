"""A Codex rollout (``$CODEX_HOME/sessions/…/rollout-….jsonl``) read as a recording, for
``condensate replay``; registered as a transcript format (``condensate.transcripts``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from condensate.events import Event, ToolCall, TurnEnded, TurnStarted, UserMessage
from condensate.replay.recording import EPOCH, Recording, first_prompt_baseline
from condensate.replay.transcripts import Calls, Reply, TranscriptFormat, at_of, content_text

ENGINE_NAME = "codex"
ROLLOUT_LINES = frozenset(
    {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
)


_EXIT = re.compile(r"(?:Process exited with code|exit code:?|Exit code:?)\s*(-?\d+)", re.I)


def from_codex(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Codex rollout (cli-protocols §3.6): ``response_item`` lines as sent to the model
    (user and assistant messages, function and custom tool calls and their outputs);
    developer messages and the environment context are the baseline."""
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

    def assistant() -> Reply:
        nonlocal pending
        if pending is None:
            pending = Reply(clock)
        return pending

    for line in lines:
        clock = at_of(line, clock + timedelta(seconds=1))
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
                text = content_text(payload.get("content"))
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
                output = content_text(payload.get("output"))
                code = _EXIT.search(output)
                failed = code is not None and int(code[1]) != 0
                result = calls.result(clock, str(payload.get("call_id") or ""), output, failed)
                if result is not None:
                    events.append(result)
    flush()
    model = model or "gpt-5.5"
    model = model if ":" in model else f"openai:{model}"
    baseline = first_prompt_baseline(events, first_prompt)
    return Recording("codex", name, ENGINE_NAME, model, baseline, tuple(events))


def _recognizes(first: Mapping[str, Any]) -> bool:
    return "payload" in first and first.get("type") in ROLLOUT_LINES


FORMAT = TranscriptFormat("a Codex rollout", _recognizes, from_codex)
