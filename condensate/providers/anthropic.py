"""A client for the Anthropic Messages API: JSON and streamed replies, text, tool use and
thinking, usage read as input + cache read + cache write. The wire format is the one
../shared/cli-protocols.md §1.1 records."""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from typing import Any

import aiohttp

from condensate.core.messages import (
    Completion,
    Message,
    Request,
    Text,
    Thinking,
    ToolOutput,
    ToolUse,
    Usage,
)
from condensate.events import ThinkingBlock, ToolCall
from condensate.providers import _http, _parse
from condensate.providers._http import CallObserver, RetryPolicy, Timeouts

PROVIDER = "anthropic"
API_VERSION = "2023-06-01"
THINKING_BUDGET = 4_096


def _block(block: Text | ToolUse | ToolOutput | Thinking) -> dict[str, Any]:
    match block:
        case Text(text=text):
            return {"type": "text", "text": text}
        case ToolUse(id=call_id, name=name, arguments=arguments):
            return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        case ToolOutput(call_id=call_id, output=output, is_error=is_error):
            return {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": output,
                "is_error": is_error,
            }
        case Thinking(text=text, signature=signature):
            return {"type": "thinking", "thinking": text, "signature": signature}


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [_block(b) for b in message.content]}


CACHED = {"type": "ephemeral"}
"""A five-minute prompt-cache breakpoint: the API caches only prefixes that end at one
(platform.claude.com/docs/en/build-with-claude/prompt-caching)."""


def _breakpoints(messages: list[dict[str, Any]], through: int | None) -> None:
    """Marks where the prompt is cached: the end of this request, and where the last one's
    cached prefix ends in it (``through``; by default the user message before the last
    reply), which the API finds again exactly however many blocks came after it (its lookback
    reaches only 20 blocks, so a request changed in its middle would read nothing more)."""
    if not messages:
        return
    if through is None:
        users = [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"]]
        through = users[-2] if len(users) > 1 else None
    for index in {len(messages) - 1, *(() if through is None else (through,))}:
        if not 0 <= index < len(messages) or not messages[index]["content"]:
            continue
        last = messages[index]["content"][-1]
        if last.get("type") not in ("thinking", "redacted_thinking"):
            messages[index]["content"][-1] = {**last, "cache_control": CACHED}


def request_body(request: Request) -> dict[str, Any]:
    messages = [_message(m) for m in request.messages]
    if request.cached:
        _breakpoints(messages, request.cached_through)
    if request.notice is not None:
        note = {"type": "text", "text": request.notice}
        if messages and messages[-1]["role"] == "user":
            messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], note]}
        else:
            messages.append({"role": "user", "content": [note]})
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": request.stream,
    }
    if request.system and request.cached:
        # The tools and the system prompt, cached together (tools come first in the prefix).
        body["system"] = [{"type": "text", "text": request.system, "cache_control": CACHED}]
    elif request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if request.thinking:
        budget = min(THINKING_BUDGET, max(request.max_tokens - 1, 1024))
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    else:
        body["thinking"] = {"type": "disabled"}
    return body


def _usage(raw: dict[str, Any], output: int | None = None) -> Usage:
    """The reply's ``usage``: the one-hour part of the writes from ``cache_creation``, and a
    server-side compaction from ``iterations`` (the top-level counts leave it out)."""
    creation = raw.get("cache_creation") or {}
    compactions = [
        i
        for i in raw.get("iterations") or []
        if isinstance(i, dict) and i.get("type") == "compaction"
    ]
    return Usage(
        input=int(raw.get("input_tokens") or 0),
        cache_read=int(raw.get("cache_read_input_tokens") or 0),
        cache_write=int(raw.get("cache_creation_input_tokens") or 0),
        output=int(output if output is not None else raw.get("output_tokens") or 0),
        cache_write_1h=int(creation.get("ephemeral_1h_input_tokens") or 0),
        compaction_input=sum(int(i.get("input_tokens") or 0) for i in compactions),
        compaction_output=sum(int(i.get("output_tokens") or 0) for i in compactions),
    )


def completion_from_json(body: dict[str, Any]) -> Completion:
    """A Messages API reply as a Completion; a reply of the wrong shape is MalformedResponse.
    A tool_use block may carry ``_raw``, its streamed input text, read here so that input cut
    off at max_tokens or not JSON becomes an ``invalid_arguments`` entry."""
    with _parse.shaped(PROVIDER, "the message"):
        return _completion(body)


def _completion(body: dict[str, Any]) -> Completion:
    text: list[str] = []
    calls: list[ToolCall] = []
    invalid: dict[str, str] = {}
    thinking: list[ThinkingBlock] = []
    stop_reason = str(body.get("stop_reason") or "")
    for block in _parse.need(PROVIDER, body.get("content"), list, "the message's content"):
        _parse.need(PROVIDER, block, dict, "a content block")
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not name or not isinstance(name, str) or not call_id or not isinstance(call_id, str):
                msg = f"a tool_use block lacks its name or id: {_parse.quote(repr(block))}."
                raise _parse.malformed(PROVIDER, msg)
            raw = block.get("_raw")
            cut = stop_reason == "max_tokens"
            arguments = (
                _parse.arguments(name, raw, cut=cut)
                if raw
                else _parse.input_object(name, block.get("input"), cut=cut)
            )
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments.value))
            if arguments.problem is not None:
                invalid[call_id] = arguments.problem
        elif kind == "thinking":
            thinking.append(
                ThinkingBlock(
                    text=str(block.get("thinking") or ""),
                    signature=str(block.get("signature") or ""),
                )
            )
    return Completion(
        text="".join(text),
        tool_calls=tuple(calls),
        thinking=tuple(thinking),
        usage=_usage(body.get("usage") or {}),
        stop_reason=stop_reason,
        message_id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        invalid_arguments=invalid,
    )


class _StreamState:
    """Folds Messages API stream events into a Completion; a stream without its
    message_start or its message_stop is MalformedResponse, never an empty success."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason = ""
        self.output: int | None = None
        self.iterations: list[Any] | None = None
        """``message_delta``'s ``usage.iterations``: a compaction's count comes at the end."""
        self.stopped = False

    def feed(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start":
            self.message = _parse.need(PROVIDER, data.get("message"), dict, "message_start")
        elif kind == "content_block_start":
            block = dict(_parse.need(PROVIDER, data.get("content_block"), dict, "a block start"))
            block["_raw"] = ""
            self.blocks[int(data.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(int(data.get("index", 0)), {"type": "text", "_raw": ""})
            delta = data.get("delta") or {}
            match delta.get("type"):
                case "text_delta":
                    block["text"] = block.get("text", "") + str(delta.get("text") or "")
                case "input_json_delta":
                    block["_raw"] += str(delta.get("partial_json") or "")
                case "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + str(delta.get("thinking") or "")
                case "signature_delta":
                    block["signature"] = str(delta.get("signature") or "")
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            usage = data.get("usage") or {}
            if "output_tokens" in usage:
                self.output = int(usage["output_tokens"])
            if isinstance(usage.get("iterations"), list):
                self.iterations = usage["iterations"]
        elif kind == "message_stop":
            self.stopped = True

    def completion(self) -> Completion:
        if self.message is None:
            raise _parse.malformed(PROVIDER, "the stream had no message_start event.")
        if not self.stopped:
            raise _parse.malformed(PROVIDER, "the stream ended before its message_stop event.")
        content = [self.blocks[index] for index in sorted(self.blocks)]
        body = {**self.message, "content": content, "stop_reason": self.stop_reason}
        done = completion_from_json(body)
        counted = dict(self.message.get("usage") or {})
        if self.iterations is not None:
            counted["iterations"] = self.iterations
        with _parse.shaped(PROVIDER, "message_start's usage"):
            usage = _usage(counted, self.output)
        return replace(done, usage=usage)


class AnthropicClient(_http.JsonApiClient):
    """Calls ``POST {base_url}/v1/messages``.

    >>> async with aiohttp.ClientSession() as s:
    ...     client = AnthropicClient("https://api.anthropic.com", key, session=s)
    ...     reply = await client.complete(Request("claude-opus-5-5", (Message.user("hi"),)))
    """

    provider = PROVIDER

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        session: aiohttp.ClientSession,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        headers = {"x-api-key": api_key, "anthropic-version": API_VERSION}
        url = base_url.rstrip("/") + "/v1/messages"
        super().__init__(
            url, headers, session=session, retry=retry, timeouts=timeouts, observer=observer
        )

    async def _once(self, request: Request) -> Completion:
        response = await self._post(request_body(request))
        if not request.stream:
            return completion_from_json(await self._json(response))
        state = _StreamState()
        async with aclosing(self._events(response)) as stream:
            async for event in stream:
                if not event.data:
                    continue
                data = _parse.event_data(self.provider, event.data)
                self._told(request, data)
                if data.get("type") == "error" or event.event == "error":
                    raise _http.classify(self.provider, 200, data)
                with _parse.shaped(self.provider, f"a {event.event} event"):
                    state.feed(data)
        return state.completion()
