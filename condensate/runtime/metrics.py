"""The daemon's metrics, served at ``GET /metrics`` in the Prometheus text format from a
registry of the daemon's own (one process may run several daemons: the tests do).

Most are facts of the threads' logs, folded from each event as the runtime appends it
(``fold``), so they agree with the log: model calls with their tokens by class and their cost
by engine and model, windows by kind and author, asks and their answers, refusals, turns by
outcome. The rest are observed where they happen: each provider call's duration and each
failed attempt's error class, on the daemon's own clients and in the gateway (``calls``); each
API request's duration by route (the server's middleware); threads by status, read from the
runtime when scraped.

Every label takes a bounded set of values: engines, models, providers, error codes, kinds,
routes (as declared, never a raw path), methods and statuses; no thread id. Counters start at
zero with the daemon: a restart recovers threads from the log without counting their past
again (Prometheus' ``rate`` and ``increase`` read the drop as a reset).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from condensate.api.threads import ThreadStatus
from condensate.errors import ProviderError
from condensate.events import (
    AskAnswered,
    AskOpened,
    Event,
    ModelRefused,
    ModelUsage,
    TurnEnded,
    Window,
)
from condensate.providers import billed_model

# No ``_created`` series beside each counter and histogram: the text format shows each as a
# gauge of its own, doubling the page for a time Prometheus does not read from it.
disable_created_metrics()  # type: ignore[no-untyped-call]

TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
"""The content type of the Prometheus text exposition format."""
STATUSES: tuple[str, ...] = get_args(ThreadStatus)
"""A thread's status, as ``GET /threads`` says it: every one is exposed, at 0 when none."""
MODEL_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: a short reply from a local server up to a long generation."""
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds: a read of the view up to a tail's longest long-poll (30 s)."""
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The methods a request is labelled with; any other is ``other`` (a client may send any
word as its method)."""


class Metrics:
    """One daemon's metrics and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.model_calls = Counter(
            "condensate_model_calls",
            "Model calls counted by their provider (model.usage events), side calls included.",
            ("engine", "model"),
            registry=registry,
        )
        self.model_tokens = Counter(
            "condensate_model_tokens",
            "Tokens the provider counted for those calls, by class: input (uncached), "
            "cache_write, cache_read, output.",
            ("engine", "model", "class"),
            registry=registry,
        )
        self.model_cost = Counter(
            "condensate_model_cost_usd",
            "Those calls at their model's list price, in US dollars; a call whose model has "
            "no price adds nothing.",
            ("engine", "model"),
            registry=registry,
        )
        self.thinking_dropped = Counter(
            "condensate_thinking_dropped_blocks",
            "Signed thinking blocks model calls went without: taken out by the gateway because "
            "an earlier part of the request changed since they were produced, or dropped by "
            "the provider.",
            ("engine", "model"),
            registry=registry,
        )
        self.thinking_dropped_tokens = Counter(
            "condensate_thinking_dropped_tokens",
            "Those blocks' tokens, as far as known (an omitted block's estimated from the "
            "reply that produced it).",
            ("engine", "model"),
            registry=registry,
        )
        self.windows = Counter(
            "condensate_windows",
            "Windows taken, by kind and by who wrote them (none: the planner's own).",
            ("kind", "author"),
            registry=registry,
        )
        self.asks_opened = Counter(
            "condensate_asks_opened",
            "Asks a head was given to compact its own context.",
            registry=registry,
        )
        self.asks_answered = Counter(
            "condensate_asks_answered",
            "Answers to asks, by mode and by who answered (runtime: its deadline passed).",
            ("mode", "by"),
            registry=registry,
        )
        self.refusals = Counter(
            "condensate_model_refusals",
            "Prompts the provider refused as too long for the window (model.refused events).",
            ("engine",),
            registry=registry,
        )
        self.turns = Counter(
            "condensate_turns",
            "Turns ended, by outcome.",
            ("engine", "outcome"),
            registry=registry,
        )
        self.provider_errors = Counter(
            "condensate_provider_errors",
            "Failed provider attempts by error class (the codes of condensate/errors.py), on "
            "the daemon's own clients (via native, curator; retried attempts included) and "
            "through the gateway (via gateway: what the provider answered a CLI).",
            ("via", "provider", "error"),
            registry=registry,
        )
        self.model_call_seconds = Histogram(
            "condensate_model_call_duration_seconds",
            "Model calls end to end: a daemon client's call with its retries, or a gateway "
            "request until its reply has gone out.",
            ("via", "provider"),
            buckets=MODEL_CALL_BUCKETS,
            registry=registry,
        )
        self.http_seconds = Histogram(
            "condensate_http_request_duration_seconds",
            "HTTP API requests (the gateway's are model calls), by method, route as declared "
            "(/threads/{thread_id}) and status.",
            ("method", "route", "status"),
            buckets=HTTP_BUCKETS,
            registry=registry,
        )
        self.statuses: Callable[[], Iterable[str]] = lambda: ()
        """The status of each thread the daemon runs, read at each scrape (the runtime sets
        it)."""
        registry.register(_ThreadsByStatus(self))
        ProcessCollector(registry=registry)

    def fold(self, engine: str, model: str, event: Event) -> None:
        """One event the runtime appended to a thread of ``engine`` on ``model``."""
        match event:
            case ModelUsage():
                called = billed_model(event.model, model)
                self.model_calls.labels(engine, called).inc()
                tokens = self.model_tokens
                tokens.labels(engine, called, "input").inc(max(event.input, 0))
                tokens.labels(engine, called, "cache_write").inc(max(event.cache_write, 0))
                tokens.labels(engine, called, "cache_read").inc(max(event.cache_read, 0))
                tokens.labels(engine, called, "output").inc(max(event.output, 0))
                self.model_cost.labels(engine, called).inc(max(event.usd or 0.0, 0.0))
                if event.thinking_dropped:
                    self.thinking_dropped.labels(engine, called).inc(event.thinking_dropped)
                    self.thinking_dropped_tokens.labels(engine, called).inc(
                        max(event.thinking_dropped_tokens, 0)
                    )
            case Window():
                self.windows.labels(event.window_kind, event.author or "none").inc()
            case AskOpened():
                self.asks_opened.inc()
            case AskAnswered():
                self.asks_answered.labels(event.mode, event.by).inc()
            case ModelRefused():
                self.refusals.labels(engine).inc()
            case TurnEnded():
                self.turns.labels(engine, event.outcome).inc()
            case _:
                pass

    def calls(self, via: str) -> CallMetrics:
        """The observer of model calls made ``via`` one path (``native``, ``curator``,
        ``gateway``): a provider client's or the gateway's."""
        return CallMetrics(self, via)

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """One API request answered."""
        shown = method if method in METHODS else "other"
        self.http_seconds.labels(shown, route, str(status)).observe(seconds)

    def exposition(self) -> bytes:
        """Every metric, in the Prometheus text format (``TEXT_FORMAT``)."""
        return generate_latest(self.registry)


@dataclass(frozen=True)
class CallMetrics:
    """The model calls made one way (``via``), as a provider client's ``CallObserver``."""

    metrics: Metrics
    via: str

    def failed(self, provider: str, error: ProviderError) -> None:
        self.metrics.provider_errors.labels(self.via, provider, error.code).inc()

    def ended(self, provider: str, seconds: float) -> None:
        self.metrics.model_call_seconds.labels(self.via, provider).observe(seconds)


@dataclass(frozen=True)
class _ThreadsByStatus:
    """``condensate_threads{status}``, counted from the runtime's threads when scraped."""

    metrics: Metrics

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        tally = Tally(self.metrics.statuses())
        for status in sorted({*STATUSES, *tally}):
            family.add_metric([status], tally[status])
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "condensate_threads", "Threads this daemon runs, by status.", labels=["status"]
        )
