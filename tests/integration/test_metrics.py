"""``GET /metrics``: the daemon's metrics in the Prometheus text format, read back with the
Prometheus client's own parser. Through a real daemon on the fake model server: model calls,
tokens and cost agree with the thread's costs; windows, refusals and provider errors are
counted by class; threads by status agree with ``GET /threads``; API requests are timed by
their declared route; the route needs the token. In process: asks and their answers, and the
gateway's count of what the provider answered a CLI.

One daemon serves the module; each test uses a model of its own (so its series are its own),
or compares a scrape before and after what it does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from condensate.core.messages import Message, Request
from condensate.core.planner import Ask
from condensate.events import ModelUsage, now_utc
from condensate.http.server import ROUTES, costs_answer
from condensate.providers import Endpoint, ProviderSettings, make_client
from condensate.providers._http import RetryPolicy
from condensate.runtime import asks
from condensate.runtime.metrics import Metrics
from condensate.testing.fake_model import (
    Call,
    Fail,
    FakeModelServer,
    Html,
    Overflow,
    Slow,
    Text,
    ToolCalls,
)
from tests.integration.daemon import DaemonProcess, call, wait_for
from tests.integration.test_gateway import (
    Served,
    claude_body,
    closed_port,
    codex_body,
    post,
    serving,
    upstream_for,
    user,
)
from tests.integration.test_runtime import idle_thread, running

Scrape = dict[tuple[str, frozenset[tuple[str, str]]], float]
NATIVE = {"via": "native", "provider": "anthropic"}


def parsed(text: str) -> Scrape:
    """Every sample of an exposition, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(scrape: Scrape, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sample of that name with exactly those labels; 0 when the series does not exist
    yet (a counter not yet incremented)."""
    return scrape.get((name, frozenset((labels or {}).items())), 0.0)


async def scrape(session: aiohttp.ClientSession, daemon: DaemonProcess) -> Scrape:
    async with session.get(daemon.url + "/metrics", headers=daemon.headers) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/plain"
        return parsed(await response.text())


async def idle(session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str) -> Any:
    """The thread (``GET /threads/:id``) once no turn of it runs."""
    with anyio.fail_after(30):
        while True:
            status, body = await call(session, daemon, "GET", f"/threads/{thread}")
            assert status == 200, body
            if body["status"] == "idle":
                return body
            await anyio.sleep(0.05)


async def a_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path, model: str, brief: str
) -> tuple[str, list[dict[str, Any]]]:
    """A native thread on ``model`` (the fake scripted by the caller): its id, and its log
    once its first turn ended and the thread is idle."""
    body = {"model": f"anthropic:{model}", "cwd": str(cwd), "brief": brief}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    thread = str(created["id"])
    events = await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended")
    await idle(session, daemon, thread)
    return thread, events


# -- through a real daemon -------------------------------------------------------------------


async def test_model_calls_tokens_and_cost_agree_with_the_threads_costs(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A thread of two model calls: the calls, the tokens of each class and the cost counted
    under its engine and model are its costs as ``GET /threads/:id`` reports them, and the
    native loop's call latency histogram counted both calls."""
    # A dated snapshot's name: priced as Sonnet 4.5, with a queue of its own on the fake.
    model = "claude-sonnet-4-5-20260101"
    (tmp_path / "a.txt").write_text("hello\n")
    fake.queue(ToolCalls([Call("read", {"path": "a.txt"})]), Text("done"), model=model)
    before = await scrape(session, daemon)
    thread, _ = await a_thread(session, daemon, tmp_path, model, "Read a.txt.")
    costs = (await idle(session, daemon, thread))["costs"]
    after = await scrape(session, daemon)

    (billed,) = costs["sessions"]
    labels = {"engine": "api", "model": billed["model"]}
    assert costs["calls"] == 2
    assert value(after, "condensate_model_calls_total", labels) == 2
    for name, key in [
        ("input", "input"),
        ("cache_write", "cacheWrite"),
        ("cache_read", "cacheRead"),
        ("output", "output"),
    ]:
        counted = value(after, "condensate_model_tokens_total", {**labels, "class": name})
        assert counted == costs["tokens"][key], name
    # The native loop marks its end: the first call writes the prompt, the second reads it.
    assert costs["tokens"]["cacheWrite"] > 0
    assert costs["tokens"]["cacheRead"] > 0
    assert costs["usd"] > 0
    cost = value(after, "condensate_model_cost_usd_total", labels)
    assert cost == pytest.approx(costs["usd"], abs=1e-6)
    timed = "condensate_model_call_duration_seconds_count"
    assert value(after, timed, NATIVE) - value(before, timed, NATIVE) == 2


async def test_the_page_and_the_metrics_spell_a_threads_model_one_way(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """What the status page shows of a thread (``GET /threads/:id``: its model, and its
    costs' model) and the metrics' model label for its calls are one name: the thread's
    model as it was created, ``provider:name``."""
    model = "claude-sonnet-4-5-spelt"
    fake.queue(Text("done"), model=model)
    thread, _ = await a_thread(session, daemon, tmp_path, model, "Say done.")
    shown = await idle(session, daemon, thread)
    scraped = await scrape(session, daemon)
    (billed,) = shown["costs"]["sessions"]
    assert billed["model"] == shown["model"] == f"anthropic:{model}"
    labels = {"engine": "api", "model": shown["model"]}
    assert value(scraped, "condensate_model_calls_total", labels) == 1


async def test_a_window_is_counted_under_its_kind_and_author(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A microcompact an operator queued, taken at the next turn, adds one to the windows of
    kind microcompact under the author its event names (none: a cheap tier names none)."""
    model = "claude-sonnet-4-5-metrics-window"
    fake.queue(Text("first"), Text("second"), model=model)
    thread, _ = await a_thread(session, daemon, tmp_path, model, "Say something.")
    before = await scrape(session, daemon)
    status, queued = await call(
        session, daemon, "POST", f"/threads/{thread}/compact", {"mode": "microcompact"}
    )
    assert status == 202, queued
    status, _ = await call(session, daemon, "POST", f"/threads/{thread}/messages", {"text": "go"})
    assert status == 202
    events = await wait_for(
        session, daemon, thread, lambda e: e["kind"] == "window" and e["seq"] > queued["seq"]
    )
    (window,) = [e for e in events if e["kind"] == "window"]
    assert window["window_kind"] == "microcompact"
    labels = {"kind": "microcompact", "author": window["author"] or "none"}
    await idle(session, daemon, thread)
    after = await scrape(session, daemon)
    grown = value(after, "condensate_windows_total", labels)
    assert grown - value(before, "condensate_windows_total", labels) == 1


async def test_a_refusal_is_counted_with_its_error_and_the_window_it_forced(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """The provider refuses a prompt as too long after two reads: one refusal for the engine,
    one context-window-exceeded error on the native loop's calls, and the window the refusal
    forced (the first, large read cleared) counted under the kind and author its event
    names."""
    model = "claude-sonnet-4-5-metrics-refused"
    (tmp_path / "big.txt").write_text("a line of a large file to be read once\n" * 500)
    (tmp_path / "a.txt").write_text("hello\n")
    fake.queue(
        ToolCalls([Call("read", {"path": "big.txt"})]),
        ToolCalls([Call("read", {"path": "a.txt"})]),
        Overflow(),
        Text("done"),
        model=model,
    )
    before = await scrape(session, daemon)
    _, events = await a_thread(session, daemon, tmp_path, model, "Read them.")
    after = await scrape(session, daemon)

    def grew(name: str, labels: Mapping[str, str]) -> float:
        return value(after, name, labels) - value(before, name, labels)

    assert [e["kind"] for e in events].count("model.refused") == 1
    assert grew("condensate_model_refusals_total", {"engine": "api"}) == 1
    error = {**NATIVE, "error": "context-window-exceeded"}
    assert grew("condensate_provider_errors_total", error) == 1
    windows = [(e["window_kind"], e["author"] or "none") for e in events if e["kind"] == "window"]
    assert windows, [e["kind"] for e in events]
    for kind, author in set(windows):
        labels = {"kind": kind, "author": author}
        assert grew("condensate_windows_total", labels) == windows.count((kind, author))


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Fail(401), "authentication-failed"),
        (Fail(429), "rate-limited"),
        (Fail(500), "provider-unavailable"),
        (Fail(529), "provider-overloaded"),
        (Html(), "malformed-response"),
    ],
)
async def test_a_provider_error_on_the_native_loop_is_counted_by_its_class(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    tmp_path: Path,
    reply: Fail | Html,
    error: str,
) -> None:
    """A call the provider fails (no retries in the test daemon) ends the turn; the error is
    counted once under its class, and the failed call is timed."""
    model = f"claude-sonnet-4-5-metrics-{error}"
    fake.queue(reply, model=model)
    before = await scrape(session, daemon)
    _, events = await a_thread(session, daemon, tmp_path, model, "Fail.")
    after = await scrape(session, daemon)
    assert events[-1]["outcome"] == "failed", events[-1]
    labels = {**NATIVE, "error": error}
    assert (
        value(after, "condensate_provider_errors_total", labels)
        - value(before, "condensate_provider_errors_total", labels)
        == 1
    )
    timed = "condensate_model_call_duration_seconds_count"
    assert value(after, timed, NATIVE) - value(before, timed, NATIVE) == 1


async def test_threads_are_counted_by_status_as_get_threads_lists_them(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """While one thread's slow call runs: the gauge counts each status as many threads as
    ``GET /threads`` lists with it, one running among them; after, none runs."""
    model = "claude-sonnet-4-5-metrics-slow"
    fake.queue(Slow(Text("slowly"), chunk_delay=0.3, chunks=10), model=model)
    body = {"model": f"anthropic:{model}", "cwd": str(tmp_path), "brief": "Take your time."}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    status, listed = await call(session, daemon, "GET", "/threads")
    assert status == 200
    gauge = await scrape(session, daemon)
    statuses = [t["status"] for t in listed["threads"]]
    assert statuses.count("running") == 1
    for shown in ("running", "idle"):
        assert value(gauge, "condensate_threads", {"status": shown}) == statuses.count(shown)
    await idle(session, daemon, created["id"])
    assert value(await scrape(session, daemon), "condensate_threads", {"status": "running"}) == 0


async def test_api_requests_are_timed_by_their_declared_route(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """Three reads of a thread add three to the latency histogram of GET
    /threads/{thread_id} with status 200; a path no route serves is timed as ``unmatched``;
    no route label is ever a raw path."""
    model = "claude-sonnet-4-5-metrics-routes"
    fake.queue(Text("hi"), model=model)
    thread, _ = await a_thread(session, daemon, tmp_path, model, "Hi.")
    labels = {"method": "GET", "route": "/threads/{thread_id}", "status": "200"}
    missing = {"method": "GET", "route": "unmatched", "status": "404"}
    timed = "condensate_http_request_duration_seconds_count"
    before = await scrape(session, daemon)
    for _ in range(3):
        status, _ = await call(session, daemon, "GET", f"/threads/{thread}")
        assert status == 200
    status, _ = await call(session, daemon, "GET", f"/no/such/{thread}")
    assert status == 404
    after = await scrape(session, daemon)
    assert value(after, timed, labels) - value(before, timed, labels) == 3
    assert value(after, timed, missing) - value(before, timed, missing) == 1
    routes = {dict(labels)["route"] for name, labels in after if name == timed}
    assert routes <= {path for _, path, _ in ROUTES} | {"unmatched"}, routes
    assert "/metrics" in routes
    assert not any(thread in route for route in routes)


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token"])
async def test_metrics_need_the_daemons_token(
    session: aiohttp.ClientSession, daemon: DaemonProcess, authorization: str | None
) -> None:
    """Without the bearer token, or with another, ``GET /metrics`` is 401 unauthorized."""
    headers = {} if authorization is None else {"Authorization": authorization}
    async with session.get(daemon.url + "/metrics", headers=headers) as response:
        assert response.status == 401
        assert (await response.json())["error"] == "unauthorized"


# -- in process --------------------------------------------------------------------------------


async def test_an_ask_and_its_answer_are_counted(tmp_path: Path) -> None:
    """An ask opened on a thread and declined by the operator: one ask opened, one answer
    of mode decline by the operator."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        usage = runtime.usage(thread)
        await asks.open_ask(runtime, thread, Ask(usage, now_utc() + timedelta(minutes=5)))
        await asks.answer(runtime, thread, mode="decline", by="operator", reason="not now")
        counted = parsed(runtime.metrics.exposition().decode())
    assert value(counted, "condensate_asks_opened_total") == 1
    answered = {"mode": "decline", "by": "operator"}
    assert value(counted, "condensate_asks_answered_total", answered) == 1


async def test_a_call_the_provider_names_by_its_snapshot_is_shown_under_the_threads_model(
    tmp_path: Path,
) -> None:
    """A call the provider answered as a dated snapshot of the thread's model
    (``claude-sonnet-4-5-20250929`` for ``anthropic:claude-sonnet-4-5``) is counted, in the
    thread's costs and in the metrics alike, under the thread's model; a call on another
    model under ``provider:name``."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        for called in ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"):
            usage = ModelUsage(at=now_utc(), model=called, input=100, output=10)
            await runtime.record_usage(thread.thread_id, usage)
        costs = costs_answer(thread.projection)
        counted = parsed(runtime.metrics.exposition().decode())
    mine, other = thread.spec.model, "anthropic:claude-haiku-4-5-20251001"
    assert {s.model: s.calls for s in costs.sessions} == {mine: 2, other: 1}
    for model, calls in ((mine, 2), (other, 1)):
        labels = {"engine": "api", "model": model}
        assert value(counted, "condensate_model_calls_total", labels) == calls


async def test_each_failed_attempt_a_retry_absorbed_is_counted(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A 429 and a 529 that retries absorb before an answer: one error of each class on the
    client's calls, and one call timed, retries and all."""
    metrics = Metrics()
    settings = ProviderSettings(
        anthropic=Endpoint(fake.url, "sk-test"),
        retry=RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05),
    )
    client = make_client("anthropic:claude-retried", settings, http, metrics.calls("native"))
    fake.queue(Fail(429, retry_after=0.01), Fail(529), Text("finally"), model="claude-retried")
    reply = await client.complete(Request("claude-retried", (Message.user("hi"),)))
    assert reply.text == "finally"
    counted = parsed(metrics.exposition().decode())
    for error in ("rate-limited", "provider-overloaded"):
        labels = {**NATIVE, "error": error}
        assert value(counted, "condensate_provider_errors_total", labels) == 1, error
    assert value(counted, "condensate_model_call_duration_seconds_count", NATIVE) == 1


@pytest.fixture
async def gateway(fake: FakeModelServer) -> AsyncIterator[tuple[Served, Metrics]]:
    """A gateway on loopback in front of the fake, telling a registry of its own."""
    metrics = Metrics()
    async with serving(upstream_for(fake), observer=metrics.calls("gateway")) as served:
        yield served, metrics


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, "authentication-failed"),
        (429, "rate-limited"),
        (500, "provider-unavailable"),
        (529, "provider-overloaded"),
        (400, "malformed-request"),
    ],
)
async def test_the_gateway_counts_each_provider_error_it_relays_by_class(
    gateway: tuple[Served, Metrics],
    fake: FakeModelServer,
    http: aiohttp.ClientSession,
    status: int,
    error: str,
) -> None:
    """An error status the provider answers a CLI's model request with is relayed and
    counted once under its class, and the request is timed end to end."""
    served, metrics = gateway
    before = parsed(metrics.exposition().decode())
    body = {**claude_body([user("hi")]), "model": f"claude-gateway-{status}"}
    fake.queue(Fail(status), model=body["model"])
    answer = await post(http, served.anthropic(), body, served.key())
    assert answer.status == status
    after = parsed(metrics.exposition().decode())
    labels = {"via": "gateway", "provider": "anthropic", "error": error}
    grown = value(after, "condensate_provider_errors_total", labels) - value(
        before, "condensate_provider_errors_total", labels
    )
    assert grown == 1
    timed = "condensate_model_call_duration_seconds_count"
    endpoint = {"via": "gateway", "provider": "anthropic"}
    assert value(after, timed, endpoint) - value(before, timed, endpoint) == 1


async def test_the_gateway_counts_an_unreachable_provider_as_a_transport_failure(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A provider nobody listens for: the CLI gets 502 and the metrics one transport-failed
    error on the OpenAI side, and a timed request."""
    metrics = Metrics()
    upstream = upstream_for(fake, openai_base_url=f"http://127.0.0.1:{closed_port()}/v1")
    async with serving(upstream, observer=metrics.calls("gateway")) as served:
        answer = await post(http, served.openai(), codex_body([user("hi")]), served.bearer())
    assert answer.status == 502
    counted = parsed(metrics.exposition().decode())
    labels = {"via": "gateway", "provider": "openai", "error": "transport-failed"}
    assert value(counted, "condensate_provider_errors_total", labels) == 1
    timed = {"via": "gateway", "provider": "openai"}
    assert value(counted, "condensate_model_call_duration_seconds_count", timed) == 1
