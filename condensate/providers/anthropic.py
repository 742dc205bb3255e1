"""A client for the Anthropic Messages API: JSON and streamed replies, text, tool use and
thinking, usage read as input + cache read + cache write. The wire format is the one
../shared/cli-protocols.md §1.1 records."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from condensate.events import ThinkingBlock, ToolCall
from condensate.providers import _http
from condensate.providers._http import DEFAULT_TIMEOUT, RetryPolicy
from condensate.providers.types import (
    Completion,
    Message,
    Request,
    Text,
    Thinking,
    ToolOutput,
    ToolUse,
    Usage,
)

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


def request_body(request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m) for m in request.messages],
        "stream": request.stream,
    }
    if request.system:
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
    return Usage(
        input=int(raw.get("input_tokens") or 0),
        cache_read=int(raw.get("cache_read_input_tokens") or 0),
        cache_write=int(raw.get("cache_creation_input_tokens") or 0),
        output=int(output if output is not None else raw.get("output_tokens") or 0),
    )


def completion_from_json(body: dict[str, Any]) -> Completion:
    text: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for block in body.get("content", []):
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(id=block["id"], name=block["name"], arguments=block.get("input") or {})
            )
        elif block.get("type") == "thinking":
            thinking.append(
                ThinkingBlock(text=block.get("thinking", ""), signature=block.get("signature", ""))
            )
    return Completion(
        text="".join(text),
        tool_calls=tuple(calls),
        thinking=tuple(thinking),
        usage=_usage(body.get("usage") or {}),
        stop_reason=body.get("stop_reason") or "",
        message_id=body.get("id", ""),
        model=body.get("model", ""),
    )


class _StreamState:
    """Folds Messages API stream events into a Completion."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason = ""
        self.output: int | None = None

    def feed(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start":
            self.message = data.get("message", {})
        elif kind == "content_block_start":
            block = dict(data.get("content_block", {}))
            block["_json"] = ""
            self.blocks[int(data.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(int(data.get("index", 0)), {"type": "text", "_json": ""})
            delta = data.get("delta", {})
            match delta.get("type"):
                case "text_delta":
                    block["text"] = block.get("text", "") + delta.get("text", "")
                case "input_json_delta":
                    block["_json"] += delta.get("partial_json", "")
                case "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
                case "signature_delta":
                    block["signature"] = delta.get("signature", "")
        elif kind == "message_delta":
            self.stop_reason = data.get("delta", {}).get("stop_reason") or self.stop_reason
            usage = data.get("usage") or {}
            if "output_tokens" in usage:
                self.output = int(usage["output_tokens"])

    def completion(self) -> Completion:
        content = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            raw = block.pop("_json")
            if block.get("type") == "tool_use" and raw:
                block["input"] = json.loads(raw)
            content.append(block)
        body = {**self.message, "content": content, "stop_reason": self.stop_reason}
        done = completion_from_json(body)
        usage = _usage(self.message.get("usage") or {}, self.output)
        return Completion(
            done.text,
            done.tool_calls,
            done.thinking,
            usage,
            done.stop_reason,
            done.message_id,
            done.model,
        )


class AnthropicClient(_http.JsonApiClient):
    """Calls ``POST {base_url}/v1/messages``.

    >>> async with aiohttp.ClientSession() as s:
    ...     client = AnthropicClient("https://api.anthropic.com", key, session=s)
    ...     reply = await client.complete(Request("claude-sonnet-4-5", (Message.user("hi"),)))
    """

    provider = "anthropic"

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        session: aiohttp.ClientSession,
        retry: RetryPolicy | None = None,
        timeout: aiohttp.ClientTimeout = DEFAULT_TIMEOUT,
    ) -> None:
        headers = {"x-api-key": api_key, "anthropic-version": API_VERSION}
        url = base_url.rstrip("/") + "/v1/messages"
        super().__init__(url, headers, session=session, retry=retry, timeout=timeout)

    async def _once(self, request: Request) -> Completion:
        response = await self._post(request_body(request))
        if not request.stream:
            return completion_from_json(await _http.read_json(response, self.provider))
        state = _StreamState()
        async for event in _http.events(response, self.provider):
            data = _http.load(event.data) if event.data else {}
            if data.get("type") == "error" or event.event == "error":
                raise _http.classify(self.provider, 200, data)
            state.feed(data)
        return state.completion()
