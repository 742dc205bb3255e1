"""Clients for the OpenAI Responses API and the Chat Completions API (which also covers
vLLM, Ollama and other compatible servers). Usage is read as input (uncached) + cache read,
with the cached part split out of ``input_tokens`` where the provider counts it inside."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp

from condensate.errors import TransportFailed
from condensate.events import ToolCall
from condensate.providers import _http
from condensate.providers._http import DEFAULT_TIMEOUT, RetryPolicy
from condensate.providers.types import (
    Completion,
    Request,
    Text,
    ToolOutput,
    ToolUse,
    Usage,
)

_REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")


def _usage(raw: dict[str, Any], prompt_key: str, output_key: str, details_key: str) -> Usage:
    prompt = int(raw.get(prompt_key) or 0)
    cached = int((raw.get(details_key) or {}).get("cached_tokens") or 0)
    return Usage(input=prompt - cached, cache_read=cached, output=int(raw.get(output_key) or 0))


def _arguments(raw: str) -> dict[str, Any]:
    if not raw:
        return {}
    parsed = json.loads(raw)
    return parsed if isinstance(parsed, dict) else {"value": parsed}


class _Client(_http.JsonApiClient):
    provider = "openai"
    path = ""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        session: aiohttp.ClientSession,
        retry: RetryPolicy | None = None,
        timeout: aiohttp.ClientTimeout = DEFAULT_TIMEOUT,
    ) -> None:
        base = base_url.rstrip("/")
        url = base + self.path if base.endswith("/v1") else base + "/v1" + self.path
        headers = {"authorization": f"Bearer {api_key}"}
        super().__init__(url, headers, session=session, retry=retry, timeout=timeout)


class ResponsesClient(_Client):
    """Calls ``POST {base_url}/v1/responses``; the whole history is sent each time."""

    path = "/responses"

    @staticmethod
    def request_body(request: Request) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for message in request.messages:
            for block in message.content:
                match block:
                    case Text(text=text):
                        kind = "input_text" if message.role == "user" else "output_text"
                        items.append(
                            {
                                "type": "message",
                                "role": message.role,
                                "content": [{"type": kind, "text": text}],
                            }
                        )
                    case ToolUse(id=call_id, name=name, arguments=arguments):
                        items.append(
                            {
                                "type": "function_call",
                                "call_id": call_id,
                                "name": name,
                                "arguments": json.dumps(arguments),
                            }
                        )
                    case ToolOutput(call_id=call_id, output=output):
                        items.append(
                            {"type": "function_call_output", "call_id": call_id, "output": output}
                        )
                    case _:
                        pass  # thinking is not replayed to OpenAI
        body: dict[str, Any] = {
            "model": request.model,
            "input": items,
            "stream": request.stream,
            "store": False,
            "max_output_tokens": request.max_tokens,
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                }
                for t in request.tools
            ]
        if not request.thinking and _REASONING_MODEL.match(request.model):
            body["reasoning"] = {"effort": "minimal"}
        return body

    @staticmethod
    def completion(response: dict[str, Any]) -> Completion:
        text: list[str] = []
        calls: list[ToolCall] = []
        for item in response.get("output") or []:
            if item.get("type") == "message":
                text += [
                    c.get("text", "")
                    for c in item.get("content", [])
                    if c.get("type") == "output_text"
                ]
            elif item.get("type") == "function_call":
                calls.append(
                    ToolCall(
                        id=item.get("call_id") or item.get("id", ""),
                        name=item["name"],
                        arguments=_arguments(item.get("arguments", "")),
                    )
                )
        usage = _usage(
            response.get("usage") or {}, "input_tokens", "output_tokens", "input_tokens_details"
        )
        return Completion(
            text="".join(text),
            tool_calls=tuple(calls),
            thinking=(),
            usage=usage,
            stop_reason="tool_use" if calls else str(response.get("status", "")),
            message_id=response.get("id", ""),
            model=response.get("model", ""),
        )

    async def _once(self, request: Request) -> Completion:
        response = await self._post(self.request_body(request))
        if not request.stream:
            return self.completion(await _http.read_json(response, self.provider))
        async for event in _http.events(response, self.provider):
            data = _http.load(event.data) if event.data else {}
            kind = data.get("type", event.event)
            if kind == "response.completed":
                return self.completion(data.get("response", {}))
            if kind in ("response.failed", "response.incomplete", "error"):
                failure = data.get("response", {}).get("error") or data.get("error") or data
                raise _http.classify(self.provider, 200, {"error": failure})
        msg = "The responses stream ended without response.completed."
        raise TransportFailed(msg, provider=self.provider)


class ChatClient(_Client):
    """Calls ``POST {base_url}/v1/chat/completions`` (OpenAI, vLLM, Ollama, ...)."""

    provider = "chat"
    path = "/chat/completions"

    @staticmethod
    def request_body(request: Request) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            texts = [b.text for b in message.content if isinstance(b, Text)]
            uses = [b for b in message.content if isinstance(b, ToolUse)]
            outputs = [b for b in message.content if isinstance(b, ToolOutput)]
            messages += [
                {"role": "tool", "tool_call_id": o.call_id, "content": o.output} for o in outputs
            ]
            if message.role == "assistant" and (texts or uses):
                entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
                if uses:
                    entry["tool_calls"] = [
                        {
                            "id": u.id,
                            "type": "function",
                            "function": {"name": u.name, "arguments": json.dumps(u.arguments)},
                        }
                        for u in uses
                    ]
                messages.append(entry)
            elif texts:
                messages.append({"role": message.role, "content": "".join(texts)})
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream": request.stream,
            "max_tokens": request.max_tokens,
        }
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        return body

    @staticmethod
    def _finish(
        text: str,
        calls: list[dict[str, Any]],
        usage: dict[str, Any],
        *,
        finish: str,
        message_id: str,
        model: str,
    ) -> Completion:
        tool_calls = tuple(
            ToolCall(
                id=c.get("id", ""),
                name=c["function"]["name"],
                arguments=_arguments(c["function"].get("arguments", "")),
            )
            for c in calls
        )
        return Completion(
            text=text,
            tool_calls=tool_calls,
            thinking=(),
            usage=_usage(usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details"),
            stop_reason=finish,
            message_id=message_id,
            model=model,
        )

    async def _once(self, request: Request) -> Completion:
        response = await self._post(self.request_body(request))
        if not request.stream:
            data = await _http.read_json(response, self.provider)
            choice = (data.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            return self._finish(
                message.get("content") or "",
                message.get("tool_calls") or [],
                data.get("usage") or {},
                finish=choice.get("finish_reason") or "",
                message_id=data.get("id", ""),
                model=data.get("model", ""),
            )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: dict[str, Any] = {}
        finish, message_id, model = "", "", ""
        async for event in _http.events(response, self.provider):
            if event.data.strip() == "[DONE]":
                break
            data = _http.load(event.data) if event.data else {}
            if "error" in data:
                raise _http.classify(self.provider, 200, data)
            message_id, model = data.get("id", message_id), data.get("model", model)
            usage = data.get("usage") or usage
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                text.append(delta.get("content") or "")
                for part in delta.get("tool_calls") or []:
                    call = calls.setdefault(
                        int(part.get("index", 0)),
                        {"id": "", "function": {"name": "", "arguments": ""}},
                    )
                    call["id"] = part.get("id") or call["id"]
                    function = part.get("function") or {}
                    call["function"]["name"] += function.get("name") or ""
                    call["function"]["arguments"] += function.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        return self._finish(
            "".join(text),
            [calls[i] for i in sorted(calls)],
            usage,
            finish=finish,
            message_id=message_id,
            model=model,
        )
