"""What every client shares: error classification from real error bodies, bounded retries
with backoff, and reading a streamed body into server events. The I/O edge of providers."""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import anyio
import structlog

from condensate.errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    MalformedRequest,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    TransportFailed,
)
from condensate.providers.sse import ServerEvent, SSEParser
from condensate.providers.types import Completion, Request

log = structlog.get_logger()
T = TypeVar("T")

DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)

_ANTHROPIC_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)", re.I)
_OPENAI_MAX_CONTEXT = re.compile(
    r"maximum context length is (\d+) tokens.*?resulted in (\d+) tokens", re.I | re.S
)
_CONTEXT_CODES = {"context_length_exceeded", "request_too_large"}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before trying a failed call again.

    >>> RetryPolicy(max_retries=0)            # never retry
    >>> RetryPolicy(base_delay=0.01)          # fast retries in tests
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        backoff = min(self.base_delay * 2**attempt, self.max_delay)
        return float(backoff * (0.5 + random.random() / 2))  # noqa: S311 - jitter, not security


def error_message(body: Any) -> tuple[str, str]:
    """(type or code, message) from an Anthropic or OpenAI error body."""
    if not isinstance(body, dict):
        return "", str(body)[:500]
    error = body.get("error", body)
    if isinstance(error, dict):
        kind = str(error.get("code") or error.get("type") or "")
        return kind, str(error.get("message", ""))
    return "", str(error)


def classify(
    provider: str, status: int, body: Any, headers: dict[str, str] | None = None
) -> ProviderError:
    """The error class a failed call belongs to, from its status and its real error body."""
    kind, message = error_message(body)
    detail = f"{provider} answered {status}: {message or kind or 'no detail'}"
    too_long = _ANTHROPIC_TOO_LONG.search(message)
    if too_long:
        return ContextWindowExceeded(
            detail,
            tokens=int(too_long[1]),
            limit=int(too_long[2]),
            status=status,
            provider=provider,
        )
    if status == 413 or kind in _CONTEXT_CODES:
        numbers = _OPENAI_MAX_CONTEXT.search(message)
        return ContextWindowExceeded(
            detail,
            tokens=int(numbers[2]) if numbers else None,
            limit=int(numbers[1]) if numbers else None,
            status=status,
            provider=provider,
        )
    if status in (401, 403):
        return AuthenticationFailed(detail, status=status, provider=provider)
    if status == 429:
        return RateLimited(
            detail, retry_after=_retry_after(headers or {}), status=status, provider=provider
        )
    if status >= 500 or kind in ("overloaded_error", "api_error", "server_error"):
        return ProviderUnavailable(detail, status=status, provider=provider)
    return MalformedRequest(detail, status=status, provider=provider)


def _retry_after(headers: dict[str, str]) -> float | None:
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def with_retries(
    provider: str, policy: RetryPolicy, attempt: Callable[[], Awaitable[T]]
) -> T:
    """Run ``attempt``; retry it on retryable errors up to ``policy.max_retries`` times."""
    for number in range(policy.max_retries + 1):
        try:
            return await attempt()
        except ProviderError as exc:
            if not exc.retryable or number == policy.max_retries:
                raise
            wait = policy.delay(number, getattr(exc, "retry_after", None))
            log.info(
                "provider_retry", provider=provider, attempt=number + 1, wait=wait, error=exc.code
            )
            await anyio.sleep(wait)
    msg = "unreachable: the retry loop always returns or raises"
    raise AssertionError(msg)


async def post(
    session: aiohttp.ClientSession,
    provider: str,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    *,
    limits: aiohttp.ClientTimeout,
) -> aiohttp.ClientResponse:
    """POST a JSON body; any status but 200 becomes the provider error it is."""
    try:
        response = await session.post(url, json=body, headers=headers, timeout=limits)
    except (aiohttp.ClientError, TimeoutError) as exc:
        msg = f"Could not reach {provider} at {url}: {_describe(exc)}"
        raise TransportFailed(msg, provider=provider) from exc
    if response.status != 200:
        async with response:
            raw = await response.read()
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        raise classify(provider, response.status, parsed, dict(response.headers))
    return response


async def events(response: aiohttp.ClientResponse, provider: str) -> AsyncIterator[ServerEvent]:
    """The server events of a streamed response; a broken stream is a transport failure."""
    parser = SSEParser()
    try:
        async with response:
            async for chunk in response.content.iter_any():
                for event in parser.feed(chunk):
                    yield event
            for event in parser.close():
                yield event
    except (aiohttp.ClientError, TimeoutError) as exc:
        msg = f"The {provider} stream broke off: {_describe(exc)}"
        raise TransportFailed(msg, provider=provider) from exc


async def read_json(response: aiohttp.ClientResponse, provider: str) -> Any:
    try:
        async with response:
            return await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as exc:
        msg = f"The {provider} response broke off: {_describe(exc)}"
        raise TransportFailed(msg, provider=provider) from exc
    except ValueError as exc:
        msg = f"{provider} answered 200 with a body that is not JSON."
        raise ProviderUnavailable(msg, provider=provider) from exc


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def load(data: str) -> dict[str, Any]:
    parsed = json.loads(data)
    return parsed if isinstance(parsed, dict) else {}


class JsonApiClient:
    """What the clients share: an endpoint URL, its headers, a session, retries. Subclasses
    build the URL and headers and implement ``_once`` (one attempt)."""

    provider = ""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        session: aiohttp.ClientSession,
        retry: RetryPolicy | None = None,
        timeout: aiohttp.ClientTimeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.url = url
        self.headers = {**headers, "content-type": "application/json"}
        self.session = session
        self.retry = retry or RetryPolicy()
        self.timeout = timeout

    async def complete(self, request: Request) -> Completion:
        """One call, retried on retryable errors within the policy."""
        return await with_retries(self.provider, self.retry, lambda: self._once(request))

    async def _post(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        return await post(
            self.session, self.provider, self.url, self.headers, body, limits=self.timeout
        )

    async def _once(self, request: Request) -> Completion:
        raise NotImplementedError
