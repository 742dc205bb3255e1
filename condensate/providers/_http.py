"""What every client shares: error classification from real error bodies, bounded retries
with backoff inside a deadline for the whole call, read timeouts, reading a body or a stream
of server events (what cannot be read is MalformedResponse), and telling an observer (the
daemon's metrics) of each failed attempt and each call's duration. The I/O edge of
providers."""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import random
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import aiohttp
import anyio
import structlog

from condensate.core.messages import Completion, Request
from condensate.errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    MalformedRequest,
    ProviderError,
    ProviderOverloaded,
    ProviderUnavailable,
    RateLimited,
    TransportFailed,
)
from condensate.providers import _parse
from condensate.providers.sse import ServerEvent, SSEParser, text_delta

log = structlog.get_logger()
T = TypeVar("T")

CALL_SETTING = "CONDENSATE_PROVIDER_TIMEOUT_S"
READ_SETTING = "CONDENSATE_PROVIDER_READ_TIMEOUT_S"


@dataclass(frozen=True)
class Timeouts:
    """How long one provider call may take, in seconds.

    ``call`` bounds the whole call: every attempt and every wait between retries. ``read``
    bounds each silence: the wait for the response's headers and the gap between two chunks
    of its body. ``connect`` bounds opening a connection. A non-streaming call sends nothing
    until it is done, so ``read`` bounds its whole generation too.

    >>> Timeouts(call=600, read=120)          # the defaults
    >>> Timeouts(call=5, read=0.2)            # a stall is cut fast in tests
    """

    call: float = 600.0
    read: float = 120.0
    connect: float = 10.0

    def client_timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None, sock_connect=self.connect, sock_read=self.read)


class CallObserver(Protocol):
    """Who hears of the calls a client makes (the daemon's metrics). Called on the call's
    path: each must return at once."""

    def failed(self, provider: str, error: ProviderError) -> None:
        """One attempt failed with ``error`` (a retried one too)."""
        ...

    def ended(self, provider: str, seconds: float) -> None:
        """A call ended, answered or failed, after ``seconds`` (its retries included)."""
        ...


_ANTHROPIC_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)", re.I)
_OPENAI_MAX_CONTEXT = re.compile(
    r"maximum context length is (\d+) tokens.*?resulted in (\d+) tokens", re.I | re.S
)
_CONTEXT_CODES = {"context_length_exceeded", "request_too_large"}


MAX_RETRY_AFTER = 60.0
"""The longest wait a provider's retry-after is obeyed for (anthropic-sdk-python and
openai-python, ``_calculate_retry_timeout``); a longer one falls back to the backoff."""


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
        """The wait before retry ``attempt``: what the provider asked for when it is a
        reasonable wait (over 0, at most a minute: the official SDKs' rule), else a jittered
        backoff."""
        if retry_after is not None and 0 < retry_after <= MAX_RETRY_AFTER:
            return retry_after
        backoff = min(self.base_delay * 2**attempt, self.max_delay)
        return float(backoff * (0.5 + random.random() / 2))  # noqa: S311 - jitter, not security


CREDENTIAL_SETTINGS = {
    "anthropic": "CONDENSATE_ANTHROPIC_API_KEY",
    "openai": "CONDENSATE_OPENAI_API_KEY",
    "chat": "CONDENSATE_CHAT_API_KEY",
}
"""The setting that holds each provider's key, named when the provider refuses it."""


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
        # The key is the daemon's: say which setting holds it, and how to see where it is set.
        setting = CREDENTIAL_SETTINGS.get(provider)
        if setting is not None:
            detail += f" (the daemon's {setting}: condensate config shows where it is set)"
        return AuthenticationFailed(detail, status=status, provider=provider)
    error: ProviderError
    if status == 429:
        error = RateLimited(detail, status=status, provider=provider)
    elif status == 529 or kind == "overloaded_error":
        error = ProviderOverloaded(detail, status=status, provider=provider)
    elif status >= 500 or kind in ("api_error", "server_error"):
        error = ProviderUnavailable(detail, status=status, provider=provider)
    else:
        error = MalformedRequest(detail, status=status, provider=provider)
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    error.retry_after = retry_after(lowered)
    error.should_retry = {"true": True, "false": False}.get(lowered.get("x-should-retry", ""))
    return error


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds a reply asks to wait before a retry, as the official SDKs read it:
    ``retry-after-ms`` (milliseconds), else ``retry-after`` as seconds or as an HTTP date
    (``headers``: lower-case names); None when it says nothing."""
    with contextlib.suppress(KeyError, ValueError):
        return float(headers["retry-after-ms"]) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return float(value)
    when = email.utils.parsedate_tz(value)
    return None if when is None else float(email.utils.mktime_tz(when) - time.time())


def may_retry(error: ProviderError) -> bool:
    """The provider's ``x-should-retry`` when it sent one, else the error's kind."""
    return error.retryable if error.should_retry is None else error.should_retry


async def with_retries(
    provider: str,
    policy: RetryPolicy,
    attempt: Callable[[], Awaitable[T]],
    *,
    deadline: float | None = None,
    failed: Callable[[ProviderError], None] | None = None,
) -> T:
    """Run ``attempt``; retry it on retryable errors up to ``policy.max_retries`` times.

    With a ``deadline`` (seconds) the whole loop ends by then, waits included: an attempt
    gets what is left of it, and a retry whose wait would reach it is not made (the last
    error is raised). An attempt cut by the deadline is a TransportFailed naming it.
    ``failed`` hears of every attempt's error, retried or raised.
    """
    end = anyio.current_time() + (deadline if deadline is not None else math.inf)
    for number in range(policy.max_retries + 1):
        try:
            with anyio.move_on_after(end - anyio.current_time()):
                return await attempt()
        except ProviderError as exc:
            if failed is not None:
                failed(exc)
            if not may_retry(exc) or number == policy.max_retries:
                raise
            wait = policy.delay(number, exc.retry_after)
            if anyio.current_time() + wait >= end:
                log.info("provider_retry_skipped", provider=provider, error=exc.code, wait=wait)
                raise
            log.info(
                "provider_retry", provider=provider, attempt=number + 1, wait=wait, error=exc.code
            )
            await anyio.sleep(wait)
            continue
        msg = (
            f"{provider} gave no complete answer within {deadline:g} s, the deadline for a "
            f"whole call ({CALL_SETTING}), after {number + 1} attempt(s)."
        )
        late = TransportFailed(msg, provider=provider)
        if failed is not None:
            failed(late)
        raise late
    msg = "unreachable: the retry loop always returns or raises"
    raise AssertionError(msg)


def _transport_failed(
    provider: str, exc: BaseException, what: str, read_timeout: float
) -> TransportFailed:
    """A broken connection, named; a read timeout names its limit and the setting."""
    if isinstance(exc, aiohttp.SocketTimeoutError):
        msg = (
            f"{what}: {provider} sent nothing for {read_timeout:g} s, the read timeout "
            f"({READ_SETTING})."
        )
    else:
        msg = f"{what}: {_describe(exc)}"
    return TransportFailed(msg, provider=provider)


async def post(
    session: aiohttp.ClientSession,
    provider: str,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    *,
    timeouts: Timeouts,
) -> aiohttp.ClientResponse:
    """POST a JSON body; any status but 200 becomes the provider error it is."""
    try:
        response = await session.post(
            url, json=body, headers=headers, timeout=timeouts.client_timeout()
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        what = f"No answer from {provider} at {url}"
        raise _transport_failed(provider, exc, what, timeouts.read) from exc
    if response.status != 200:
        try:
            async with response:
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            what = f"The {provider} error response broke off"
            raise _transport_failed(provider, exc, what, timeouts.read) from exc
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        raise classify(provider, response.status, parsed, dict(response.headers))
    return response


_NOT_A_STREAM = frozenset({"text/html", "application/json"})
"""Content types no event stream is sent with; other odd ones are still parsed as events."""


async def events(
    response: aiohttp.ClientResponse, provider: str, read_timeout: float
) -> AsyncGenerator[ServerEvent, None]:
    """The server events of a streamed response; a broken or stalled stream is a transport
    failure. A body that is plainly no event stream (HTML, JSON) is read whole: an error
    body is the error it names, anything else MalformedResponse."""
    if response.content_type in _NOT_A_STREAM:
        body = await read_json(response, provider, read_timeout)
        if "error" in body:
            raise classify(provider, 200, body)
        msg = f"it answered a streaming request with one JSON body: {_parse.quote(str(body))}."
        raise _parse.malformed(provider, msg)
    parser = SSEParser()
    try:
        async with response:
            async for chunk in response.content.iter_any():
                for event in parser.feed(chunk):
                    yield event
            for event in parser.close():
                yield event
    except (aiohttp.ClientError, TimeoutError) as exc:
        what = f"The {provider} stream broke off"
        raise _transport_failed(provider, exc, what, read_timeout) from exc


async def read_json(
    response: aiohttp.ClientResponse, provider: str, read_timeout: float
) -> dict[str, Any]:
    """A whole reply's JSON object; anything else is MalformedResponse."""
    try:
        async with response:
            raw = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        what = f"The {provider} response broke off"
        raise _transport_failed(provider, exc, what, read_timeout) from exc
    return _parse.body(provider, raw, response.headers.get("content-type", ""))


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class JsonApiClient:
    """What the clients share: an endpoint URL, its headers, a session, retries, an observer.
    Subclasses build the URL and headers and implement ``_once`` (one attempt)."""

    provider = ""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        session: aiohttp.ClientSession,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        self.url = url
        self.headers = {**headers, "content-type": "application/json"}
        self.session = session
        self.retry = retry or RetryPolicy()
        self.timeouts = timeouts or Timeouts()
        self.observer = observer

    async def complete(self, request: Request) -> Completion:
        """One call, retried on retryable errors within the policy and the call deadline; the
        observer hears of each failed attempt and of the call's duration (not of a call
        cancelled before it ended)."""
        observer = self.observer
        failed = None if observer is None else partial(observer.failed, self.provider)
        started = time.perf_counter()
        try:
            reply = await with_retries(
                self.provider,
                self.retry,
                lambda: self._once(request),
                deadline=self.timeouts.call,
                failed=failed,
            )
        except ProviderError:
            if observer is not None:
                observer.ended(self.provider, time.perf_counter() - started)
            raise
        if observer is not None:
            observer.ended(self.provider, time.perf_counter() - started)
        return reply

    async def _post(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        return await post(
            self.session, self.provider, self.url, self.headers, body, timeouts=self.timeouts
        )

    @staticmethod
    def _told(request: Request, data: Any) -> None:
        """Pass a streamed event's reply text on to whoever follows the call."""
        if request.on_text is not None and (text := text_delta(data)):
            request.on_text(text)

    def _events(self, response: aiohttp.ClientResponse) -> AsyncGenerator[ServerEvent, None]:
        """The stream's events; read it under ``contextlib.aclosing`` so that leaving early
        releases the connection at once."""
        return events(response, self.provider, self.timeouts.read)

    async def _json(self, response: aiohttp.ClientResponse) -> dict[str, Any]:
        return await read_json(response, self.provider, self.timeouts.read)

    async def _once(self, request: Request) -> Completion:
        raise NotImplementedError
