"""A model's context window: an explicit setting, then the server's own model listing (vLLM's
``max_model_len``), then a built-in table of current models, then a fallback that says it is
a guess."""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from condensate.core.meter import ModelWindow
from condensate.providers import Endpoint, ModelName

FALLBACK = 128_000

# Longest prefix wins. Each figure is what the provider's API accepts as a prompt, not what
# a CLI's own catalog says: Codex 0.171.0's bundled catalog gives gpt-6.2-sol a 500,000-token
# window (at most 872,000) and gpt-5.5 272,000, and Condensate replaces that catalog for the
# threads it runs, so that Codex never compacts on its own.
TABLE: tuple[tuple[str, int], ...] = (
    # Anthropic's model overview pages: every 5.x model (Opus, Sonnet, Haiku, Fable,
    # Mythos) has a 1,000,000-token window.
    ("claude-opus-5", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-haiku-5", 1_000_000),
    ("claude-fable-5", 1_000_000),
    ("claude-mythos-5", 1_000_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3", 200_000),
    # OpenAI's model pages: a 1,050,000-token context of which at most 128,000 are output,
    # so a prompt may hold 922,000 (gpt-6.2-sol, gpt-6-sol; the other GPT-6.x and GPT-5.6
    # pages give 1,050,000 and 128,000; gpt-5.5's figures are secondary).
    ("gpt-6", 922_000),
    ("gpt-5.6", 922_000),
    ("gpt-5.5", 922_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("codex-mini", 200_000),
)

_LISTING_KEYS = ("max_model_len", "context_window", "context_length", "max_context_length")


def from_table(model: str) -> int | None:
    matches = [(len(p), w) for p, w in TABLE if model.startswith(p)]
    return max(matches)[1] if matches else None


def from_listing(listing: Any, model: str) -> int | None:
    """The window a ``/v1/models`` listing gives for ``model``, if it gives one."""
    entries = listing.get("data", []) if isinstance(listing, dict) else []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            for key in _LISTING_KEYS:
                value = entry.get(key)
                if isinstance(value, int) and value > 0:
                    return value
    return None


def resolve(model: ModelName, explicit: dict[str, int], listing: Any = None) -> ModelWindow:
    """The first source that knows ``model``'s window, most specific first."""
    for key in (str(model), model.name):
        if key in explicit:
            return ModelWindow(explicit[key], resolved=True)
    listed = from_listing(listing, model.name)
    if listed is not None:
        return ModelWindow(listed, resolved=True)
    known = from_table(re.sub(r"^.*/", "", model.name))
    if known is not None:
        return ModelWindow(known, resolved=True)
    return ModelWindow(FALLBACK, resolved=False)


async def fetch_listing(
    session: aiohttp.ClientSession, model: ModelName, endpoint: Endpoint
) -> Any:
    """The server's model listing, or None when it has none or cannot be read quickly."""
    base = endpoint.base_url.rstrip("/")
    url = base + "/models" if base.endswith("/v1") else base + "/v1/models"
    headers = (
        {"x-api-key": endpoint.api_key, "anthropic-version": "2023-06-01"}
        if model.provider == "anthropic"
        else {"authorization": f"Bearer {endpoint.api_key}"}
    )
    try:
        async with session.get(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=5)
        ) as response:
            if response.status != 200:
                return None
            return await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def resolve_window(
    session: aiohttp.ClientSession,
    model: ModelName,
    endpoint: Endpoint,
    explicit: dict[str, int],
) -> ModelWindow:
    """``resolve`` with the listing fetched only when no setting names the model."""
    if str(model) in explicit or model.name in explicit:
        return resolve(model, explicit)
    return resolve(model, explicit, await fetch_listing(session, model, endpoint))
