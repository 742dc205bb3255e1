"""Model providers: clients for the Anthropic Messages API, the OpenAI Responses API and Chat
Completions, their error classes (in ``condensate.errors``) and model windows.

A model is named ``provider:model``: ``anthropic:claude-opus-5-5``, ``openai:gpt-6.2-sol``,
``chat:qwen3-coder`` (any Chat Completions server: vLLM, Ollama, ...). Base URLs and keys come
from settings, and so do the bounds of a call (``Timeouts``: a deadline for the whole call,
retries included, and a read timeout between chunks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Protocol

import aiohttp

from condensate.core.messages import Completion, Request
from condensate.errors import ConfigError
from condensate.providers._http import CallObserver, RetryPolicy, Timeouts
from condensate.providers.anthropic import AnthropicClient
from condensate.providers.openai import ChatClient, ResponsesClient

Provider = Literal["anthropic", "openai", "chat"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "chat")


class ModelClient(Protocol):
    """One provider's client: one call in, one completion out (streamed or not)."""

    provider: str

    async def complete(self, request: Request) -> Completion: ...


@dataclass(frozen=True)
class ModelName:
    provider: Provider
    name: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"


def parse_model(model: str) -> ModelName:
    """``anthropic:claude-opus-5-5`` -> (anthropic, claude-opus-5-5). A bare Claude or GPT
    name is accepted; anything else must say its provider."""
    prefix, sep, name = model.partition(":")
    if sep:
        if prefix not in PROVIDERS:
            msg = (
                f"Unknown provider {prefix!r} in model {model!r}; use one of "
                f"{', '.join(p + ':' for p in PROVIDERS)}."
            )
            raise ConfigError(msg)
        if not name:
            msg = f"Model {model!r} names a provider but no model."
            raise ConfigError(msg)
        return ModelName(prefix, name)
    if model.startswith("claude-"):
        return ModelName("anthropic", model)
    if re.match(r"^(gpt|o\d|codex)", model):
        return ModelName("openai", model)
    msg = f"Model {model!r} needs a provider prefix, e.g. 'chat:{model}'."
    raise ConfigError(msg)


def billed_model(called: str, thread_model: str) -> str:
    """The model a thread's call is shown under, in the thread's costs, the metrics' ``model``
    label and the usage stream alike. ``called`` is what the call's ``model.usage`` holds: the
    provider's id for the model it ran (a dated snapshot, ``claude-sonnet-4-5-20250929``), a
    model named in full (the curator's, ``anthropic:claude-haiku-4-5``), or nothing (the
    thread's own). The thread's own model is named as the thread names it (``model`` in
    ``GET /threads``), whatever snapshot ran it; another model is ``provider:name``."""
    if not called:
        return thread_model
    prefix, sep, _ = called.partition(":")
    if sep and prefix in PROVIDERS:
        return called
    try:
        thread = parse_model(thread_model)
    except ConfigError:
        return called  # a log from before the model was checked: as it was called
    if called == thread.name or _snapshot_of(called, thread.name):
        return thread_model
    return f"{thread.provider}:{called}"


def _snapshot_of(called: str, name: str) -> bool:
    """``called`` is ``name`` pinned to a date, as providers answer for an alias:
    ``claude-sonnet-4-5-20250929``, ``gpt-5-2025-08-07``."""
    return re.fullmatch(re.escape(name) + r"-\d{4}-?\d{2}-?\d{2}", called) is not None


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str


@dataclass(frozen=True)
class ProviderSettings:
    anthropic: Endpoint = Endpoint("https://api.anthropic.com", "")
    openai: Endpoint = Endpoint("https://api.openai.com/v1", "")
    chat: Endpoint = Endpoint("http://127.0.0.1:8000/v1", "none")
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeouts: Timeouts = field(default_factory=Timeouts)

    def endpoint(self, provider: Provider) -> Endpoint:
        return {"anthropic": self.anthropic, "openai": self.openai, "chat": self.chat}[provider]


def make_client(
    model: str | ModelName,
    settings: ProviderSettings,
    session: aiohttp.ClientSession,
    observer: CallObserver | None = None,
) -> ModelClient:
    """The client for ``model``, on the shared ``session``; ``observer`` hears of its calls."""
    name = model if isinstance(model, ModelName) else parse_model(model)
    endpoint = settings.endpoint(name.provider)
    kinds: dict[Provider, type[AnthropicClient | ResponsesClient | ChatClient]] = {
        "anthropic": AnthropicClient,
        "openai": ResponsesClient,
        "chat": ChatClient,
    }
    return kinds[name.provider](
        endpoint.base_url,
        endpoint.api_key,
        session=session,
        retry=settings.retry,
        timeouts=settings.timeouts,
        observer=observer,
    )
