"""Clients for the OpenAI Responses API and the Chat Completions API (which also covers
vLLM, Ollama and other compatible servers). Usage is read as input (uncached) + cache read +
cache write, with the cached and written parts split out of ``input_tokens`` where the
provider counts them inside."""

from __future__ import annotations

import json
import re
from contextlib import aclosing
from typing import Any

import aiohttp

from condensate.core.messages import (
    Completion,
    Request,
    Text,
    ToolOutput,
    ToolUse,
    Usage,
)
from condensate.events import ToolCall
from condensate.providers import _http, _parse
from condensate.providers._http import CallObserver, RetryPolicy, Timeouts

_REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")


def _usage(raw: dict[str, Any], prompt_key: str, output_key: str, details_key: str) -> Usage:
    """The prompt's count holds the cached and (GPT-5.6 and later) the written parts:
    ``input`` is the rest."""
    prompt = int(raw.get(prompt_key) or 0)
    details = raw.get(details_key) or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    return Usage(
        input=prompt - cached - written,
        cache_read=cached,
        cache_write=written,
        output=int(raw.get(output_key) or 0),
    )


def _calls(
    provider: str, raw_calls: list[tuple[str, Any, Any]], *, cut: bool
) -> tuple[tuple[ToolCall, ...], dict[str, str]]:
    """Tool calls from (id, name, arguments text); a call without a name is MalformedResponse,
    arguments that cannot be read are listed by call id with the reason, the call left
    with ``{}``."""
    calls: list[ToolCall] = []
    invalid: dict[str, str] = {}
    for call_id, name, raw in raw_calls:
        if not name or not isinstance(name, str):
            msg = f"a tool call has no name (id {call_id!r})."
            raise _parse.malformed(provider, msg)
        text = raw if isinstance(raw, str) else json.dumps(raw)
        arguments = _parse.arguments(name, text, cut=cut)
        calls.append(ToolCall(id=str(call_id or ""), name=name, arguments=arguments.value))
        if arguments.problem is not None:
            invalid[str(call_id or "")] = arguments.problem
    return tuple(calls), invalid


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
        timeouts: Timeouts | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        url = base + self.path if base.endswith("/v1") else base + "/v1" + self.path
        headers = {"authorization": f"Bearer {api_key}"}
        super().__init__(
            url, headers, session=session, retry=retry, timeouts=timeouts, observer=observer
        )


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
        if request.notice is not None:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": request.notice}],
                }
            )
        body: dict[str, Any] = {
            "model": request.model,
            "input": items,
            "stream": request.stream,
            "store": False,
            "max_output_tokens": request.max_tokens,
        }
        if request.cache_key is not None:
            body["prompt_cache_key"] = request.cache_key
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
        """A finished (or incomplete) response as a Completion. One cut at its output limit
        stops with ``max_tokens``, and its last call's arguments may be cut off."""
        with _parse.shaped("openai", "the response"):
            return _responses_completion(response)

    async def _once(self, request: Request) -> Completion:
        response = await self._post(self.request_body(request))
        if not request.stream:
            return self.completion(await self._json(response))
        async with aclosing(self._events(response)) as stream:
            async for event in stream:
                if not event.data:
                    continue
                data = _parse.event_data(self.provider, event.data)
                self._told(request, data)
                kind = data.get("type", event.event)
                if kind in ("response.completed", "response.incomplete"):
                    what = f"the {kind} event"
                    return self.completion(
                        _parse.need(self.provider, data.get("response"), dict, what)
                    )
                if kind in ("response.failed", "error"):
                    with _parse.shaped(self.provider, f"the {kind} event"):
                        failure = (
                            (data.get("response") or {}).get("error") or data.get("error") or data
                        )
                    raise _http.classify(self.provider, 200, {"error": failure})
        msg = "the stream ended without response.completed."
        raise _parse.malformed(self.provider, msg)


def _responses_completion(response: dict[str, Any]) -> Completion:
    provider = "openai"
    if response.get("status") == "failed":
        raise _http.classify(provider, 200, {"error": response.get("error") or response})
    text: list[str] = []
    raw_calls: list[tuple[str, Any, Any]] = []
    for item in _parse.need(provider, response.get("output"), list, "the response's output"):
        _parse.need(provider, item, dict, "an output item")
        if item.get("type") == "message":
            text += [
                str(c.get("text") or "")
                for c in item.get("content") or []
                if c.get("type") == "output_text"
            ]
        elif item.get("type") == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            raw_calls.append((call_id, item.get("name"), item.get("arguments") or ""))
    status = str(response.get("status") or "")
    reason = str((response.get("incomplete_details") or {}).get("reason") or "")
    cut = status == "incomplete" and reason == "max_output_tokens"
    calls, invalid = _calls(provider, raw_calls, cut=cut)
    usage = _usage(
        response.get("usage") or {}, "input_tokens", "output_tokens", "input_tokens_details"
    )
    if cut:
        stop = "max_tokens"
    elif calls:
        stop = "tool_use"
    else:
        stop = reason or status
    return Completion(
        text="".join(text),
        tool_calls=calls,
        thinking=(),
        usage=usage,
        stop_reason=stop,
        message_id=str(response.get("id") or ""),
        model=str(response.get("model") or ""),
        invalid_arguments=invalid,
    )


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
        if request.notice is not None:
            messages.append({"role": "user", "content": request.notice})
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
        raw_calls = [
            (c.get("id") or "", (c.get("function") or {}).get("name"), _function_arguments(c))
            for c in calls
        ]
        tool_calls, invalid = _calls("chat", raw_calls, cut=finish == "length")
        return Completion(
            text=text,
            tool_calls=tool_calls,
            thinking=(),
            usage=_usage(usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details"),
            stop_reason=finish,
            message_id=message_id,
            model=model,
            invalid_arguments=invalid,
        )

    async def _once(self, request: Request) -> Completion:
        response = await self._post(self.request_body(request))
        if not request.stream:
            data = await self._json(response)
            if "error" in data:
                raise _http.classify(self.provider, 200, data)
            with _parse.shaped(self.provider, "the completion"):
                return self._whole(data)
        chunks = _ChatChunks()
        async with aclosing(self._events(response)) as stream:
            async for event in stream:
                if event.data.strip() == "[DONE]":
                    chunks.done = True
                    break
                if not event.data:
                    continue
                data = _parse.event_data(self.provider, event.data)
                self._told(request, data)
                if "error" in data:
                    raise _http.classify(self.provider, 200, data)
                with _parse.shaped(self.provider, "a chunk"):
                    chunks.feed(data)
        if not chunks.seen:
            raise _parse.malformed(self.provider, "the stream carried no chunks.")
        if not (chunks.done or chunks.finish):
            msg = "the stream ended before a finish_reason or [DONE]."
            raise _parse.malformed(self.provider, msg)
        with _parse.shaped(self.provider, "the streamed completion"):
            return self._finish(
                "".join(chunks.text),
                [chunks.calls[i] for i in sorted(chunks.calls)],
                chunks.usage,
                finish=chunks.finish,
                message_id=chunks.message_id,
                model=chunks.model,
            )

    def _whole(self, data: dict[str, Any]) -> Completion:
        choices = _parse.need(self.provider, data.get("choices"), list, "the choices")
        if not choices:
            raise _parse.malformed(self.provider, "the completion has no choices.")
        choice = _parse.need(self.provider, choices[0], dict, "the first choice")
        message = _parse.need(self.provider, choice.get("message"), dict, "the choice's message")
        return self._finish(
            str(message.get("content") or ""),
            message.get("tool_calls") or [],
            data.get("usage") or {},
            finish=str(choice.get("finish_reason") or ""),
            message_id=str(data.get("id") or ""),
            model=str(data.get("model") or ""),
        )


def _function_arguments(call: dict[str, Any]) -> Any:
    return (call.get("function") or {}).get("arguments") or ""


class _ChatChunks:
    """Folds Chat Completions chunks: text, tool calls by index, usage, the finish reason."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.finish = ""
        self.message_id = ""
        self.model = ""
        self.seen = False
        self.done = False

    def feed(self, data: dict[str, Any]) -> None:
        self.seen = True
        self.message_id = str(data.get("id") or self.message_id)
        self.model = str(data.get("model") or self.model)
        self.usage = data.get("usage") or self.usage
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            self.text.append(str(delta.get("content") or ""))
            for part in delta.get("tool_calls") or []:
                call = self.calls.setdefault(
                    int(part.get("index") or 0),
                    {"id": "", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["function"]["name"] += str(function.get("name") or "")
                call["function"]["arguments"] += str(function.get("arguments") or "")
            self.finish = str(choice.get("finish_reason") or self.finish)
