"""Helpers for tests that drive the fake model server over loopback HTTP: a JSON POST, an SSE
body parsed into events, message builders and the Anthropic usage sum."""

from __future__ import annotations

import json
from typing import Any

import aiohttp


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, **headers: str
) -> tuple[int, Any, aiohttp.ClientResponse]:
    """POSTs ``body`` as JSON; returns the status, the decoded JSON (else the text) and the
    response."""
    async with http.post(url, json=body, headers=headers) as response:
        text = await response.text()
        is_json = response.content_type == "application/json"
        return response.status, json.loads(text) if is_json else text, response


def events(text: str) -> list[tuple[str | None, Any]]:
    """Parses an SSE body into (event name, decoded data) pairs."""
    parsed = []
    for chunk in text.strip().split("\n\n"):
        name, data = None, None
        for line in chunk.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                raw = line[6:]
                data = raw if raw == "[DONE]" else json.loads(raw)
        parsed.append((name, data))
    return parsed


def user(text: str, **block: Any) -> dict[str, Any]:
    """A user message with one text block (extra keys, e.g. ``cache_control``, on the block)."""
    return {"role": "user", "content": [{"type": "text", "text": text, **block}]}


def usage_sum(usage: dict[str, Any]) -> int:
    """The whole prompt an Anthropic usage object bills: input, cache writes and reads."""
    return int(
        usage["input_tokens"]
        + usage["cache_creation_input_tokens"]
        + usage["cache_read_input_tokens"]
    )
