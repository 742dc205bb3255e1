"""Codex app-server items as Condensate log events; pure (no process, no I/O).

A model response shows up as items (its text as an ``agentMessage``, its tool calls as
``commandExecution``, ``fileChange``, ``mcpToolCall`` … items, which Codex starts running at
once) and ends with one ``thread/tokenUsage/updated`` carrying that response's count in
``last``. ``Responses`` gathers the items between two counts and gives, at the count, one
``model.usage`` followed by the ``message.assistant`` with the calls, then the results that
have arrived; a result arriving later is given when it completes, after its call. The engine
appends what it is given, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from condensate.core.receipts import argument_of
from condensate.events import (
    AskAnswered,
    AskOpened,
    AssistantMessage,
    EngineNotice,
    Event,
    ModelUsage,
    ToolCall,
    ToolResult,
)
from condensate.gateway.wire import HELD_MARK

Clock = Callable[[], datetime]
CALL_ITEMS = frozenset(
    {"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch"}
)
FAILED = frozenset({"failed", "declined"})


@dataclass
class _Gathered:
    """What one response has produced so far."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)


def usage_of(params: dict[str, Any]) -> dict[str, int] | None:
    """A token update's count of its own response (``last``); None for the updates that count
    no request: the synthetic one that marks the window full after an overflow, and the one
    after a compaction (both with no input)."""
    usage = (params.get("tokenUsage") or {}).get("last") or {}
    if not int(usage.get("inputTokens") or 0):
        return None
    return {k: int(v or 0) for k, v in usage.items()}


def is_overflow(error: dict[str, Any] | None) -> bool:
    """A turn error that says the prompt did not fit the model's window."""
    return bool(error) and (error or {}).get("codexErrorInfo") == "contextWindowExceeded"


def http_status(error: dict[str, Any] | None) -> int | None:
    """The HTTP status a turn error names, if any: Codex 0.171.0 sends
    ``{"codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 401}}, ...}``
    while it retries and ``{"httpConnectionFailed": {"httpStatusCode": 401}}`` when it gives
    up."""
    info = (error or {}).get("codexErrorInfo")
    if not isinstance(info, dict):
        return None
    for value in info.values():
        if isinstance(value, dict) and isinstance(value.get("httpStatusCode"), int):
            return int(value["httpStatusCode"])
    return None


def retry_detail(params: dict[str, Any]) -> str | None:
    """An ``error`` notification Codex will retry after (``willRetry``) as a notice's detail;
    None for one that ends the turn."""
    if not params.get("willRetry"):
        return None
    error = params.get("error") or {}
    status = http_status(error)
    detail = f"Codex retries a failed API call: {error.get('message') or 'an error'}"
    if status is not None:
        detail += f", HTTP {status}"
    more = str(error.get("additionalDetails") or "")
    return f"{detail} ({more[:300]})" if more else detail


def call_of(item: dict[str, Any]) -> ToolCall | None:
    """The tool call a started item stands for; None for an item that is not a call."""
    kind = item.get("type")
    if kind not in CALL_ITEMS:
        return None
    ident = str(item.get("id") or "")
    match kind:
        case "commandExecution":
            return ToolCall(
                id=ident,
                name="shell",
                arguments={"command": _command(item), "cwd": str(item.get("cwd") or "")},
            )
        case "fileChange":
            changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
            paths = [str(c.get("path") or "") for c in changes]
            return ToolCall(
                id=ident,
                name="apply_patch",
                arguments={
                    "path": paths[0] if paths else "",
                    "paths": paths,
                    "patch": "\n".join(str(c.get("diff") or "") for c in changes),
                },
            )
        case "mcpToolCall" | "dynamicToolCall":
            prefix = item.get("server") or item.get("namespace") or "dynamic"
            raw = item.get("arguments")
            arguments = raw if isinstance(raw, dict) else {"input": raw}
            return ToolCall(
                id=ident, name=f"mcp__{prefix}__{item.get('tool')}", arguments=arguments
            )
        case _:
            return ToolCall(id=ident, name="web_search", arguments={"query": item.get("query")})


def result_of(item: dict[str, Any], call: ToolCall, now: Clock) -> ToolResult:
    """A completed item as its call's result: the output the model was given, as near as the
    item shows it, and whether the call failed."""
    kind = item.get("type")
    status = str(item.get("status") or "completed")
    failed = status in FAILED
    match kind:
        case "commandExecution":
            output = str(item.get("aggregatedOutput") or "")
            code = item.get("exitCode")
            if code not in (None, 0):
                failed = True
                output = f"{output}\n[exit code {code}]" if output else f"[exit code {code}]"
            elif status == "declined":
                output = "The command was declined."
        case "fileChange":
            changed = [
                f"{(c.get('kind') or {}).get('type', 'update')} {c.get('path')}"
                for c in item.get("changes") or []
                if isinstance(c, dict)
            ]
            output = f"{status}: " + ", ".join(changed)
        case "mcpToolCall" | "dynamicToolCall":
            output, failed = _mcp_output(item, failed)
        case _:
            output = json.dumps(item.get("action") or item.get("results") or "")
    return ToolResult(
        at=now(),
        call_id=call.id,
        tool=call.name,
        argument=argument_of(call.name, call.arguments),
        output=output,
        is_error=failed,
    )


def compacted(ask: AskOpened | None, codex_thread: str, now: Clock) -> list[Event]:
    """Codex compacted on its own (a ``contextCompaction`` item): a notice, for the log stays
    the record; and an ask still open is dropped, for Codex's context is small again."""
    events: list[Event] = [
        EngineNotice(
            at=now(),
            engine="codex",
            notice="codex-compacted",
            detail="Codex replaced its history with its own summary (a contextCompaction "
            "item); the log keeps every event",
            seat="main",
            session_id=codex_thread or None,
        )
    ]
    if ask is not None:
        events.append(
            AskAnswered(
                at=now(),
                ask_id=ask.ask_id,
                mode="decline",
                by="runtime",
                reason="Codex compacted its own context; the ask is dropped",
                seat="main",
            )
        )
    return events


class Responses:
    """The items of a Codex thread's responses, gathered between token counts."""

    def __init__(self, *, counts: bool = True) -> None:
        self.held = False
        """The gateway ended the current turn with its own reply (reset at each turn)."""
        self.counts = counts
        """Codex's token updates are the responses' counts; off when the gateway logs them
        (an update then only says that a response is complete)."""
        self.gathered = _Gathered()
        self.started: dict[str, ToolCall] = {}
        """Calls started and not yet logged (their response's count has not come)."""
        self.logged: dict[str, ToolCall] = {}
        """Calls logged and still waiting for their result."""
        self.running: set[str] = set()
        """Calls started and not completed: commands still running."""

    def item_started(self, item: dict[str, Any]) -> None:
        call = call_of(item)
        if call is not None and call.id not in self.started and call.id not in self.logged:
            self.started[call.id] = call
            self.running.add(call.id)
            self.gathered.calls.append(call)

    def item_completed(self, item: dict[str, Any], now: Clock) -> list[Event]:
        """A finished item: an answer's text is gathered; a call's result is given now when its
        call is logged, else kept for the count. Nothing else is logged."""
        kind = item.get("type")
        if kind == "agentMessage":
            text = str(item.get("text") or "")
            if text.startswith(HELD_MARK):  # the gateway's own reply: not logged
                self.held = True
            elif text:
                self.gathered.text.append(text)
            return []
        call = call_of(item)
        if call is None:
            return []
        self.running.discard(call.id)
        if call.id in self.logged:
            return [result_of(item, self.logged.pop(call.id), now)]
        if call.id not in self.started:  # completed without a start: log both at the count
            self.started[call.id] = call
            self.gathered.calls.append(call)
        self.gathered.results.append(result_of(item, self.started[call.id], now))
        return []

    def counted(self, usage: dict[str, int], model: str, now: Clock) -> list[Event]:
        """A response's count: its usage, then its reply and the results that have arrived."""
        if not self.counts:
            return self.unmeasured(now)
        cached = usage.get("cachedInputTokens", 0)
        written = usage.get("cacheWriteInputTokens", 0)
        head: list[Event] = [
            ModelUsage(
                at=now(),
                input=max(usage.get("inputTokens", 0) - cached - written, 0),
                cache_read=cached,
                cache_write=written,
                output=usage.get("outputTokens", 0),
                model=model,
            )
        ]
        return head + self.unmeasured(now)

    def unmeasured(self, now: Clock) -> list[Event]:
        """The reply gathered so far without a count (a response cut off by an interrupt):
        its text and calls, and the results that have arrived."""
        gathered, self.gathered = self.gathered, _Gathered()
        events: list[Event] = []
        if gathered.text or gathered.calls:
            events.append(
                AssistantMessage(
                    at=now(), text="\n\n".join(gathered.text), tool_calls=tuple(gathered.calls)
                )
            )
        finished = {r.call_id for r in gathered.results}
        for call in gathered.calls:
            self.started.pop(call.id, None)
            if call.id not in finished:
                self.logged[call.id] = call
        events.extend(gathered.results)
        return events

    def forget(self) -> None:
        """Drop everything gathered and every open call: the app-server that ran them was
        killed, and the runtime closes the calls the log shows open."""
        self.gathered = _Gathered()
        self.started.clear()
        self.logged.clear()
        self.running.clear()

    def interrupted(self, why: str, now: Clock) -> list[Event]:
        """The gathered reply, and an error result for every logged call still open (the turn
        was cut off or the process died before they finished)."""
        events = self.unmeasured(now)
        calls, self.logged = self.logged, {}
        self.running.clear()
        events.extend(
            ToolResult(
                at=now(),
                call_id=call.id,
                tool=call.name,
                argument=argument_of(call.name, call.arguments),
                output=f"Interrupted: {why} before this call finished; it may have run "
                "in part. Check its effect before relying on it.",
                is_error=True,
            )
            for call in calls.values()
        )
        return events


def _command(item: dict[str, Any]) -> str:
    """The command as the model wrote it (Codex wraps it in ``bash -lc``)."""
    actions = [a for a in item.get("commandActions") or [] if isinstance(a, dict)]
    if len(actions) == 1 and actions[0].get("command"):
        return str(actions[0]["command"])
    return str(item.get("command") or "")


def _mcp_output(item: dict[str, Any], failed: bool) -> tuple[str, bool]:
    error = item.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"]), True
    result = item.get("result") or {}
    blocks = result.get("content") if isinstance(result, dict) else None
    blocks = blocks if isinstance(blocks, list) else item.get("contentItems") or []
    parts = [
        str(b.get("text") or "") if b.get("type") in ("text", "inputText") else f"[{b.get('type')}]"
        for b in blocks
        if isinstance(b, dict)
    ]
    if item.get("success") is False:
        failed = True
    return "\n".join(parts), failed
