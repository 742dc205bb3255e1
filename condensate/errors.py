"""Condensate's errors. Callers catch the branches, so the tree stays small:

CondensateError
├── ConfigError            a CONDENSATE_* setting is unusable; the message names it
├── TemporaryFailure       what the daemon needs is held or missing for now (its port, its
│                          state directory): no setting is wrong, and it may start later
├── EventLogError          the SQLite log refused or failed an operation
│   ├── UnknownEventVersion   a stored event this version cannot read
│   ├── EventNotFound
│   └── ThreadOwnedElsewhere  another daemon of the fleet holds the thread's lease
├── Refused                a request the runtime turns down (.code; its status is the edge's)
└── ProviderError          a model API call failed; ``retryable`` says if trying again may help
    │                      (``.should_retry``, ``.retry_after``: what the provider said)
    ├── ContextWindowExceeded  the provider refused the prompt as too long (.tokens, .limit)
    ├── AuthenticationFailed   401/403: a missing or wrong key
    ├── RateLimited            429
    ├── ProviderUnavailable    5xx
    │   └── ProviderOverloaded    529, or an error body of type overloaded_error
    ├── TransportFailed        connection refused or reset, a read timeout, the call deadline
    ├── MalformedResponse      a reply that cannot be read: a non-JSON line or body, a stream
    │                          without its start or end, JSON of the wrong shape (retryable)
    └── MalformedRequest       any other 4xx: a broken history, an unknown model

Tool arguments that cannot be read are no error: the completion lists them in
``invalid_arguments`` and the model is told, so it can correct them.

Only ContextWindowExceeded ever triggers a window; the others never count as a refusal.

Programming mistakes stay ValueError and TypeError.
"""

from __future__ import annotations


class CondensateError(Exception):
    """The root of every error Condensate raises on purpose."""

    code = "condensate-error"


class ConfigError(CondensateError):
    """A setting that cannot work as it is: ``condensate serve`` exits 78 (EX_CONFIG), which
    the systemd unit does not restart."""

    code = "config-error"


class TemporaryFailure(CondensateError):
    """Something outside Condensate stands in the daemon's way for now (another process holds
    its port or its state directory, its address is not up yet): ``condensate serve`` exits 75
    (EX_TEMPFAIL), and the systemd unit tries again."""

    code = "temporary-failure"


class EventLogError(CondensateError):
    code = "event-log-error"


class UnknownEventVersion(EventLogError):
    code = "unknown-event-version"


class EventNotFound(EventLogError):
    code = "event-not-found"


class ThreadOwnedElsewhere(EventLogError):
    """An append to a thread another daemon of the fleet holds (``fleet``)."""

    code = "thread-owned-elsewhere"

    def __init__(self, thread_id: str, owner: str, url: str) -> None:
        where = f" at {url}" if url else ""
        super().__init__(
            f"Thread {thread_id!r} is owned by daemon {owner}{where}; only its owner writes to it."
        )
        self.thread_id = thread_id
        self.owner = owner
        self.url = url


class Refused(CondensateError):
    """A request the runtime turns down: an unknown thread, nothing pending, a thread another
    daemon owns. ``code`` names it; the HTTP edge alone knows the status a code answers
    (``condensate.http.middleware.STATUS``)."""

    def __init__(self, *, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class ProviderError(CondensateError):
    code = "provider-error"
    retryable = False
    retry_after: float | None = None
    """Seconds the provider asked for before a retry (``retry-after-ms``, ``retry-after``)."""
    should_retry: bool | None = None
    """The provider's own word on retrying (``x-should-retry``), over ``retryable``."""

    def __init__(self, message: str, *, status: int | None = None, provider: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.provider = provider


class ContextWindowExceeded(ProviderError):
    code = "context-window-exceeded"

    def __init__(
        self,
        message: str,
        *,
        tokens: int | None = None,
        limit: int | None = None,
        status: int | None = None,
        provider: str = "",
    ) -> None:
        super().__init__(message, status=status, provider=provider)
        self.tokens = tokens
        self.limit = limit


class AuthenticationFailed(ProviderError):
    code = "authentication-failed"


class RateLimited(ProviderError):
    code = "rate-limited"
    retryable = True


class ProviderUnavailable(ProviderError):
    code = "provider-unavailable"
    retryable = True


class ProviderOverloaded(ProviderUnavailable):
    """The provider is up but turns calls away for load (Anthropic's 529): told apart from
    an outage where failures are counted, retried the same."""

    code = "provider-overloaded"


class TransportFailed(ProviderError):
    code = "transport-failed"
    retryable = True


class MalformedResponse(ProviderError):
    """The provider answered, but not in its API's shape: the stream broke or the reply is
    garbage, so trying again may help."""

    code = "malformed-response"
    retryable = True


class MalformedRequest(ProviderError):
    code = "malformed-request"
