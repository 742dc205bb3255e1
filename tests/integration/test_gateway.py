"""The model gateway over real loopback HTTP, in front of the fake model server: it refuses a
request without the daemon's current pass, forwards the rest with the daemon's own credential,
streams the reply back as it comes, logs the provider's count for each call with its own
measurement beside it, and passes the provider's errors back unchanged."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import anyio
import pytest
import yarl
from aiohttp import web
from multidict import CIMultiDict
from structlog.testing import capture_logs

from condensate.core.messages import Message
from condensate.engine.registry import installed
from condensate.events import ModelUsage
from condensate.gateway import Gateway, Passes, Upstream
from condensate.providers._http import CallObserver
from condensate.runtime.gateway_port import Clamps, NewestResult, Notices, ResetCut
from condensate.testing.fake_model import Fail, FakeModelServer, Slow, Stall, Text

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-5.5"
REAL_KEY = "sk-the-daemons-own-key"
OAUTH_TOKEN = "sk-ant-oat-for-tests"  # noqa: S105 - a test value
THREAD = "th_gateway"
VERSION = "2023-06-01"
BETA = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
SYSTEM = [{"type": "text", "text": "You are a careful coding agent in a large repository. " * 80}]
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command in the workspace and return what it printed. " * 8,
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line."}},
            "required": ["command"],
        },
    }
]
INSTRUCTIONS = "You are Codex, a coding agent. Follow the repository's conventions. " * 40


class Recorder:
    """A ``GatewayRecorder`` that keeps what it is given, in order; ``delay`` slows each
    record, and ``done_at`` notes when each record returned."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.usages: list[tuple[str, ModelUsage]] = []
        self.baselines: list[tuple[str, int]] = []
        self.lines: list[tuple[str, str, str]] = []
        self.failing: list[tuple[str, int, int]] = []
        self.order: list[str] = []
        self.announced_at: list[float] = []
        self.done_at: list[float] = []
        self.logged = anyio.Event()
        self.recorded = anyio.Event()

    def usage_coming(self, thread_id: str) -> None:
        self.order.append("coming")
        self.announced_at.append(time.monotonic())

    async def record_usage(
        self, thread_id: str, usage: ModelUsage, *, warned: bool = False
    ) -> None:
        await anyio.sleep(self.delay)
        self.usages.append((thread_id, usage))
        self.order.append("usage")
        self.done_at.append(time.monotonic())
        self.logged.set()
        self.recorded.set()
        self.recorded = anyio.Event()

    async def logged_at_least(self, calls: int) -> list[tuple[str, ModelUsage]]:
        with anyio.fail_after(5):
            while len(self.usages) < calls:
                await self.recorded.wait()
        return self.usages

    def streaming_to(self, thread_id: str, model: str | None) -> Any:
        return None

    async def record_baseline(self, thread_id: str, tokens: int, model: str) -> None:
        self.baselines.append((thread_id, tokens))
        self.order.append("baseline")

    async def record_line(self, thread_id: str, code: str, text: str) -> None:
        self.lines.append((thread_id, code, text))
        self.order.append("line")

    async def provider_failing(self, thread_id: str, status: int, count: int) -> None:
        self.failing.append((thread_id, status, count))


@dataclass
class Served:
    """A gateway on loopback: its routes alone in an aiohttp app."""

    gateway: Gateway
    recorder: Recorder
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def anthropic(self, tail: str = "v1/messages") -> str:
        return f"{self.gateway.url(self.url, 'anthropic')}/{tail}"

    def openai(self, tail: str = "responses") -> str:
        return f"{self.gateway.url(self.url, 'openai')}/{tail}"

    def key(self, thread_id: str = THREAD) -> dict[str, str]:
        """A new session's pass, as Claude Code sends it."""
        return {"x-api-key": self.gateway.issue(thread_id, "anthropic").credential}

    def bearer(self, thread_id: str = THREAD) -> dict[str, str]:
        """A new session's pass, as Codex sends it."""
        return {"Authorization": f"Bearer {self.gateway.issue(thread_id, 'openai').credential}"}


def upstream_for(fake: FakeModelServer, **fields: Any) -> Upstream:
    """The fake as both providers, with the daemon's key (``fields`` changed)."""
    return replace(Upstream(fake.url, REAL_KEY, f"{fake.url}/v1", REAL_KEY), **fields)


class NoRewrites:
    """The part of a ``GatewayAdmitter`` these tests leave alone: no thread resets, pages or
    is told anything, and sessions start unremarked."""

    def session_started(self, thread_id: str) -> None:
        return None

    def rewrites(self, thread_id: str) -> bool:
        return False

    async def caught_up(self, thread_id: str, newest: NewestResult | None) -> None:
        return None

    def reset_cut(self, thread_id: str) -> ResetCut | None:
        return None

    def clamp_chars(self, thread_id: str) -> int | None:
        return None

    def clamps(self, thread_id: str) -> Clamps:
        return Clamps()

    def notices(self, thread_id: str, model: str, size: int) -> Notices:
        return Notices()

    async def heard(
        self, thread_id: str, conversation: list[tuple[int, Message]], model: str = ""
    ) -> bool:
        return False

    def person_notice(self, thread_id: str) -> str | None:
        return None


@dataclass
class Cleared(NoRewrites):
    """A ``GatewayAdmitter`` whose view has cleared the results in ``cleared`` (call id ->
    receipt), and that never holds a request."""

    cleared: dict[str, str]

    def gate(self, thread_id: str) -> int | None:
        return None

    def receipts(self, thread_id: str) -> Mapping[str, str]:
        return self.cleared

    async def admit(self, thread_id: str, size: int, ids: Sequence[str]) -> Any:
        msg = "a request under no gate is never held"
        raise AssertionError(msg)

    def baseline(self, thread_id: str) -> int | None:
        return None


@dataclass
class Gated(NoRewrites):
    """A ``GatewayAdmitter`` with a fixed gate that forwards every request it is asked about,
    noting each size it was asked with."""

    at: int
    fake: FakeModelServer | None = None
    asked: list[int] = field(default_factory=list)
    measured_at: list[int] = field(default_factory=list)
    """How many requests the fake had when each request was measured."""

    def gate(self, thread_id: str) -> int | None:
        return self.at

    def receipts(self, thread_id: str) -> Mapping[str, str]:
        return {}

    async def admit(self, thread_id: str, size: int, ids: Sequence[str]) -> Any:
        self.asked.append(size)
        return Forward()

    def baseline(self, thread_id: str) -> int | None:
        # Asked by the gateway as it measures a request.
        if self.fake is not None:
            self.measured_at.append(len(self.fake.requests))
        return None


@dataclass(frozen=True)
class Forward:
    forward: bool = True
    text: str = ""


@asynccontextmanager
async def serving(
    upstream: Upstream,
    recorder: Recorder | None = None,
    admitter: Any = None,
    observer: CallObserver | None = None,
) -> AsyncIterator[Served]:
    recorder = recorder or Recorder()
    async with aiohttp.ClientSession() as session:
        gateway = Gateway(upstream, recorder, session, admitter=admitter, observer=observer)
        app = web.Application()
        gateway.add_routes(app)
        runner = web.AppRunner(app, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            yield Served(gateway, recorder, runner.addresses[0][1])
        finally:
            await runner.cleanup()


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    """A fake that accepts only the daemon's own key."""
    async with FakeModelServer(window=200_000, api_key=REAL_KEY) as server:
        yield server


@pytest.fixture
async def served(fake: FakeModelServer) -> AsyncIterator[Served]:
    async with serving(upstream_for(fake)) as gateway:
        yield gateway


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def cached(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with a cache breakpoint on its last block, as Claude Code places one."""
    *rest, last = message["content"]
    return {**message, "content": [*rest, {**last, "cache_control": {"type": "ephemeral"}}]}


def claude_body(messages: list[dict[str, Any]], *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": CLAUDE,
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
        "stream": stream,
    }


def codex_body(items: list[dict[str, Any]], *, stream: bool = True) -> dict[str, Any]:
    return {"model": GPT, "instructions": INSTRUCTIONS, "input": items, "stream": stream}


def long_text() -> str:
    """A few thousand tokens of code-like text, as a tool result brings."""
    return "\n".join(
        f"def step_{i}(value: int) -> int:\n    return value * {i} + {i * i} - len('{i:x}')"
        for i in range(220)
    )


def sse(text: str) -> list[tuple[str | None, Any]]:
    """(event name, decoded data) for each event of an SSE body."""
    out: list[tuple[str | None, Any]] = []
    for chunk in text.replace("\r\n", "\n").strip().split("\n\n"):
        name, data = None, None
        for line in chunk.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        out.append((name, data))
    return out


@dataclass
class Answer:
    status: int
    headers: CIMultiDict[str]
    text: str
    events: list[tuple[str | None, Any]] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.text)

    def reply_id(self) -> str:
        """The id of the message (or response) the reply carries, streamed or not."""
        if not self.events:
            return str(self.json()["id"])
        for _, data in self.events:
            if data.get("type") == "message_start":
                return str(data["message"]["id"])
            if data.get("type") == "response.completed":
                return str(data["response"]["id"])
        msg = f"No message id in {self.events!r}."
        raise AssertionError(msg)


async def post(http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]) -> Answer:
    async with http.post(url, json=body, headers=headers) as response:
        text = await response.text()
        streamed = response.content_type == "text/event-stream"
        return Answer(
            response.status, CIMultiDict(response.headers), text, sse(text) if streamed else []
        )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- refusals -----------------------------------------------------------------------------------


def refused_pass(served: Served, case: str) -> tuple[str | None, str]:
    """The credential a client sends in ``case`` (None: none at all) and the code it gets."""
    if case == "missing":
        return None, "no-gateway-pass"
    if case == "provider-key":
        return REAL_KEY, "no-gateway-pass"
    if case == "forged":
        return Passes().issue(THREAD, "anthropic").credential, "invalid-gateway-pass"
    retired = served.gateway.issue(THREAD, "anthropic").credential
    served.gateway.issue(THREAD, "anthropic")
    return retired, "stale-session"


CASES = ["missing", "provider-key", "forged", "retired"]


@pytest.mark.parametrize("case", CASES)
async def test_anthropic_requests_without_a_current_pass_are_refused_in_anthropics_shape(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, case: str
) -> None:
    """A Messages request with no pass, a key that is not a pass, another daemon's pass or a
    retired session's pass gets 401 ``authentication_error`` in Anthropic's error body, naming
    why, and is never forwarded."""
    credential, code = refused_pass(served, case)
    headers = {} if credential is None else {"x-api-key": credential}
    answer = await post(http, served.anthropic(), claude_body([user("hi")]), headers)

    body = answer.json()
    assert answer.status == 401
    assert set(body) == {"type", "error"}
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    assert body["error"]["message"]
    assert code in json.dumps(body["error"]), (
        f"The Anthropic-shaped refusal does not name its code {code!r}: {body}"
    )
    assert fake.requests == []
    assert served.recorder.usages == []


@pytest.mark.parametrize("case", CASES)
async def test_openai_requests_without_a_current_pass_are_refused_in_openais_shape(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, case: str
) -> None:
    """A Responses request with no pass, a key that is not a pass, another daemon's pass or
    a retired session's pass gets 401 in OpenAI's error body with the code, and is never
    forwarded."""
    credential, code = refused_pass(served, case)
    headers = {} if credential is None else {"Authorization": f"Bearer {credential}"}
    answer = await post(http, served.openai(), codex_body([user("hi")]), headers)

    body = answer.json()
    assert answer.status == 401
    assert body == {
        "error": {
            "message": body["error"]["message"],
            "type": "invalid_request_error",
            "param": None,
            "code": code,
        }
    }
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert fake.requests == []


# -- forwarding ---------------------------------------------------------------------------------


async def test_a_request_naming_an_older_engine_session_is_refused(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """Once a thread's engine has named its session, a request naming another one in the
    header that engine declares (Claude Code's x-claude-code-session-id) is refused
    stale-session and never forwarded; a request naming the current one goes on."""
    header = installed()["claude"].session_header
    assert header is not None
    access = served.gateway.access(served.url, THREAD, "anthropic", header)
    credential = access.issue()
    access.session("s-current")
    body = claude_body([user("hi")], stream=False)
    stale = await post(http, served.anthropic(), body, {"x-api-key": credential, header: "s-old"})
    assert stale.status == 401
    assert "stale-session" in stale.text
    assert fake.requests == []
    fake.queue(Text("Current."))
    current = {"x-api-key": credential, header: "s-current"}
    answer = await post(http, served.anthropic(), body, current)
    assert answer.status == 200
    assert len(fake.requests) == 1


async def test_a_streamed_messages_request_reaches_the_provider_with_the_daemons_key(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A current pass's streamed Messages request is forwarded, query included, with the
    daemon's key in place of the pass and the client's ``anthropic-version`` and
    ``anthropic-beta`` as they were sent."""
    fake.queue(Text("Hello through the gateway."))
    grant = served.key()
    headers = {**grant, "anthropic-version": VERSION, "anthropic-beta": BETA}
    answer = await post(
        http, served.anthropic("v1/messages?beta=true"), claude_body([user("hi")]), headers
    )

    [seen] = fake.requests
    assert answer.status == 200
    assert seen.status == 200
    assert seen.path == "/v1/messages?beta=true"
    assert seen.headers["x-api-key"] == REAL_KEY
    assert "authorization" not in seen.headers
    assert grant["x-api-key"] not in json.dumps(seen.headers)
    assert seen.headers["anthropic-version"] == VERSION
    assert seen.headers["anthropic-beta"] == BETA
    assert seen.body == claude_body([user("hi")])


async def test_a_streamed_reply_reaches_the_client_as_the_provider_sent_it(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The client receives the same SSE events, in the same order and with the same text,
    as a client that asks the provider directly."""
    fake.queue(Text("Same words either way."), Text("Same words either way."))
    body = claude_body([user("hi")])
    direct = await post(
        http, f"{fake.url}/v1/messages", body, {"x-api-key": REAL_KEY, "anthropic-version": VERSION}
    )
    relayed = await post(
        http, served.anthropic(), body, {**served.key(), "anthropic-version": VERSION}
    )

    def shape(answer: Answer) -> list[tuple[str | None, Any]]:
        return [(name, data["type"]) for name, data in answer.events]

    def text(answer: Answer) -> str:
        deltas = [d["delta"] for _, d in answer.events if d["type"] == "content_block_delta"]
        return "".join(d.get("text", "") for d in deltas)

    assert relayed.status == direct.status == 200
    assert relayed.headers["Content-Type"].startswith("text/event-stream")
    assert len(direct.events) >= 6
    assert shape(relayed) == shape(direct)
    assert text(relayed) == text(direct) == "Same words either way."
    assert relayed.headers["request-id"].startswith("req_fake")


async def test_a_stream_is_relayed_as_it_comes_not_when_it_ends(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The first events of a slow stream reach the client while the provider is still
    sending the rest."""
    fake.queue(Slow(Text("word " * 40), chunk_delay=0.25, chunks=8))
    started = time.monotonic()
    async with http.post(
        served.anthropic(), json=claude_body([user("hi")]), headers=served.key()
    ) as r:
        first = await r.content.readuntil(b"\n\n")
        waited = time.monotonic() - started
        provider_busy = fake.idle_seconds() == 0.0
        rest = await r.content.read()
    assert b"message_start" in first
    assert provider_busy
    assert waited < 1.0
    assert b"message_stop" in rest


async def test_a_whole_messages_request_is_forwarded_and_answered(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A non-streaming Messages request comes back as the provider's JSON body."""
    fake.queue(Text("A whole answer."))
    answer = await post(
        http, served.anthropic(), claude_body([user("hi")], stream=False), served.key()
    )

    [seen] = fake.requests
    body = answer.json()
    assert answer.status == 200
    assert seen.headers["x-api-key"] == REAL_KEY
    assert body["type"] == "message"
    assert body["content"] == [{"type": "text", "text": "A whole answer."}]
    assert body["usage"] == seen.usage


async def test_a_request_with_receipts_goes_on_exactly_as_sent_but_for_them(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A cleared result is replaced by its receipt, and nothing else changes: an integer past
    64 bits in a tool's input reaches the provider exactly (orjson, which measures the
    request, would read it as a float)."""
    big = 123456789012345678901234567890
    messages = [
        user("count"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"n": big}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": long_text()}],
        },
    ]
    fake.queue(Text("counted"))
    admitter = Cleared({"toolu_1": "[receipt seq 7]"})
    async with serving(upstream_for(fake), admitter=admitter) as served:
        answer = await post(http, served.anthropic(), claude_body(messages), served.key())
    assert answer.status == 200
    [seen] = fake.requests
    sent = seen.body["messages"]
    assert sent[1]["content"][0]["input"]["n"] == big
    assert isinstance(sent[1]["content"][0]["input"]["n"], int)
    assert sent[2]["content"][0]["content"] == "[receipt seq 7]"
    assert sent[0] == messages[0]


@dataclass
class Lagging(Cleared):
    """``Cleared``, clamping texts past ``chars``, whose log holds the newest result only
    once the gateway waited for it (``caught_up``): the CLI's request outran its log."""

    chars: int = 0
    logged: dict[str, str] = field(default_factory=dict)
    """What the view shows once the log caught up."""
    asked: list[NewestResult] = field(default_factory=list)

    @property
    def waited(self) -> list[str]:
        return [n.call_id for n in self.asked]

    def clamp_chars(self, thread_id: str) -> int | None:
        return self.chars

    async def caught_up(self, thread_id: str, newest: NewestResult | None) -> None:
        if newest is not None:
            self.asked.append(newest)
            await anyio.sleep(0.05)
            self.cleared.update(self.logged)


def ran(output: str, command: str = "", more: int = 0) -> list[dict[str, Any]]:
    """A conversation whose newest block is the result of a Bash call of ``command``: its
    ``output``, after ``more`` short calls and results."""
    messages = [user("count")]
    for i in range(more + 1):
        last = i == more
        call = {"command": command if last else "true"}
        use = {"type": "tool_use", "id": f"toolu_{i + 1}", "name": "Bash", "input": call}
        result = {
            "type": "tool_result",
            "tool_use_id": use["id"],
            "content": output if last else "ok",
        }
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return messages


async def test_a_result_past_the_clamp_waits_for_the_log_and_goes_on_clamped(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A thread whose requests are otherwise left as sent: a request whose newest result is
    longer than the clamp waits for the log to hold it, and carries it as the view then
    shows it; the provider never sees the whole output first."""
    fake.queue(Text("counted"))
    admitter = Lagging({}, chars=1_000, logged={"toolu_1": "head [clamped] tail"})
    async with serving(upstream_for(fake), admitter=admitter) as served:
        answer = await post(http, served.anthropic(), claude_body(ran("x" * 5_000)), served.key())
    assert answer.status == 200
    [seen] = fake.requests
    assert seen.body["messages"][2]["content"][0]["content"] == "head [clamped] tail"
    assert admitter.waited == ["toolu_1"]


async def test_a_request_that_adds_less_than_the_clamp_goes_on_without_waiting(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The session's first request is read for its newest result (nothing to compare it
    with); the next, which adds fewer bytes than the clamp has characters to the one the
    provider counted, holds nothing new the view clamps: it goes on at once."""
    fake.queue(Text("one"), Text("two"))
    admitter = Lagging({}, chars=1_000)
    async with serving(upstream_for(fake), admitter=admitter) as served:
        key = served.key()
        for more in (0, 1):
            answer = await post(http, served.anthropic(), claude_body(ran("ok", more=more)), key)
            assert answer.status == 200
    assert len(fake.requests) == 2
    assert admitter.waited == ["toolu_1"]


async def test_a_call_whose_argument_is_past_the_clamp_waits_for_the_log(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A short result whose call carries an argument longer than the clamp (a file written
    whole): the request says how much arrived with it, so the log is waited for before the
    call is shown as the view clamps it."""
    fake.queue(Text("one"), Text("two"))
    admitter = Lagging({}, chars=1_000)
    async with serving(upstream_for(fake), admitter=admitter) as served:
        key = served.key()
        await post(http, served.anthropic(), claude_body(ran("ok", more=0)), key)
        body = claude_body(ran("written", command="cat > f <<EOF\n" + "x" * 3_000, more=1))
        answer = await post(http, served.anthropic(), body, key)
    assert answer.status == 200
    assert admitter.waited == ["toolu_1", "toolu_2"]
    assert admitter.asked[-1].chars == len("written")
    assert admitter.asked[-1].arrived > 3_000


async def test_a_request_shorter_than_the_clamp_goes_on_without_waiting(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A request of fewer bytes than the clamp's characters holds nothing the view clamps:
    it is not read for its newest result, and goes on at once."""
    fake.queue(Text("counted"))
    admitter = Lagging({}, chars=100_000, logged={"toolu_1": "never shown"})
    async with serving(upstream_for(fake), admitter=admitter) as served:
        answer = await post(http, served.anthropic(), claude_body(ran("x" * 5_000)), served.key())
    assert answer.status == 200
    [seen] = fake.requests
    assert seen.body["messages"][2]["content"][0]["content"] == "x" * 5_000
    assert admitter.waited == []


@dataclass
class Clearing(Cleared):
    """``Cleared``, whose cleared results a test may add to between requests."""


async def test_a_request_with_a_new_receipt_still_reads_the_cache_before_it(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """Claude Code marks only its system prompt and its last block; the provider looks for a
    hit at a breakpoint and up to 20 blocks before it (platform.claude.com/docs/en/
    build-with-claude/prompt-caching). When the gateway shows an earlier result as a receipt,
    it marks the message before that result too, so the request reads the cached prefix up to
    it instead of writing it all again; without the mark only the system prompt would be read."""
    step = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}],
        }
        for i in range(30)
    ]
    results = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": long_text()}],
        }
        for i in range(30)
    ]
    messages: list[dict[str, Any]] = [user("count")]
    for i in range(30):
        messages += [step[i], results[i]]
    admitter = Clearing({})
    fake.queue(*[Text("go on")] * 3)
    async with serving(upstream_for(fake), admitter=admitter) as served:
        key = served.key()
        # The sixth result was the newest when its request was sent: its prefix is cached,
        # far more than 20 blocks before the end of the request that clears the seventh.
        at = 1 + 2 * 6
        for upto in (at, len(messages)):
            sent = [*messages[: upto - 1], cached(messages[upto - 1])]
            answer = await post(http, served.anthropic(), claude_body(sent), key)
            assert answer.status == 200
        admitter.cleared["t6"] = "[receipt seq 7]"
        answer = await post(
            http, served.anthropic(), claude_body([*messages[:-1], cached(messages[-1])]), key
        )
        assert answer.status == 200
    first, _, after = fake.requests
    marked = [
        i for i, m in enumerate(after.body["messages"]) if "cache_control" in m["content"][-1]
    ]
    assert marked == [at - 1 + 1, len(messages) - 1]
    # The cache is read up to the receipt's call: the prefix the first request wrote.
    assert after.cache_read >= first.cache_read + first.cache_write - 10


async def test_a_binding_refusal_is_said_and_sent_again_without_the_refused_thinking(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A 400 "bound to a different conversation" that reaches the gateway all the same (here
    the CLI itself changed an earlier message) is logged as what it is, a system line, never an
    overflow, and the request goes again once without the thinking from the refused block on,
    the documented fix ("Remove the block"); the call's usage counts the block it lost."""
    opus = "claude-opus-5-5"
    thinking = {"type": "adaptive", "display": "omitted"}
    first = [user("count")]
    fake.queue(Text("one"), Text("two"))
    recorder = Recorder()
    async with serving(upstream_for(fake), recorder=recorder, admitter=Cleared({})) as served:
        key = served.key()
        body = {**claude_body(first, stream=False), "model": opus, "thinking": thinking}
        answer = await post(http, served.anthropic(), body, key)
        reply = json.loads(answer.text)
        assert reply["content"][0]["type"] == "thinking"
        history = [
            user("count, please"),  # the CLI changed what came before the signed block
            {"role": "assistant", "content": reply["content"]},
            user("go on"),
        ]
        answer = await post(http, served.anthropic(), {**body, "messages": history}, key)
        await recorder.logged_at_least(2)
    assert answer.status == 200, answer.text
    refused, retried = fake.requests[1:]
    assert refused.status == 400
    assert refused.thinking is not None
    assert refused.thinking.refused
    assert retried.status == 200
    assert not [b for b in retried.body["messages"][1]["content"] if b["type"] == "thinking"]
    ((_, code, text),) = recorder.lines
    assert code == "thinking-refused"
    assert "messages.1.content.0" in text
    assert recorder.usages[-1][1].thinking_dropped == 1


async def test_count_tokens_is_forwarded_and_logs_no_usage(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """``v1/messages/count_tokens`` reaches the provider and its answer comes back, but it is
    not a model call: no usage and no baseline are logged."""
    body = {"model": CLAUDE, "system": SYSTEM, "messages": [user("how big is this?")]}
    answer = await post(http, served.anthropic("v1/messages/count_tokens"), body, served.key())

    [seen] = fake.requests
    assert answer.status == 200
    assert seen.endpoint == "count_tokens"
    assert seen.headers["x-api-key"] == REAL_KEY
    assert answer.json() == {"input_tokens": seen.input_tokens}
    assert seen.input_tokens > 0
    assert served.recorder.usages == []
    assert served.recorder.baselines == []


async def test_other_endpoints_pass_through_with_the_daemons_key(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A request to an endpoint that is not a model call (``GET v1/models``) is forwarded
    with the daemon's key and answered as the provider answers it; it logs no usage."""
    headers = {**served.key(), "anthropic-version": VERSION}
    async with http.get(served.anthropic("v1/models"), headers=headers) as response:
        status, listing = response.status, await response.json()

    [seen] = fake.requests
    assert status == 200
    assert (seen.method, seen.endpoint) == ("GET", "models")
    assert seen.headers["x-api-key"] == REAL_KEY
    assert CLAUDE in [model["id"] for model in listing["data"]]
    assert listing["data"][0]["type"] == "model"
    assert served.recorder.usages == []


@pytest.mark.parametrize("stream", [True, False])
async def test_a_responses_request_reaches_the_provider_with_the_daemons_bearer_key(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, stream: bool
) -> None:
    """A Responses request under ``/gateway/openai/responses`` is forwarded to the provider's
    ``/v1/responses`` with ``Authorization: Bearer <the daemon's key>`` and answered."""
    fake.queue(Text("Codex hears you."))
    grant = served.bearer()
    answer = await post(http, served.openai(), codex_body([user("hi")], stream=stream), grant)

    [seen] = fake.requests
    assert answer.status == 200
    assert seen.path == "/v1/responses"
    assert seen.headers["authorization"] == f"Bearer {REAL_KEY}"
    assert "x-api-key" not in seen.headers
    assert grant["Authorization"] not in json.dumps(seen.headers)
    if stream:
        assert answer.events[-1][0] == "response.completed"
        output = answer.events[-1][1]["response"]["output"]
    else:
        output = answer.json()["output"]
    assert output[-1]["content"][0]["text"] == "Codex hears you."


# -- usage --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_each_messages_calls_usage_is_the_providers_count(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, stream: bool
) -> None:
    """Each model call logs one usage for its thread equal to what the provider billed:
    uncached input, cache read, cache write and output, with the reply's message id. (Each
    request puts a cache breakpoint on its last block, past the model's minimum cacheable
    length, so the provider reads the first from the cache.)"""
    grant = served.key()
    first = [cached(user(f"List the files.\n{long_text()}"))]
    one = await post(http, served.anthropic(), claude_body(first, stream=stream), grant)
    grown = [
        user(f"List the files.\n{long_text()}"),
        {"role": "assistant", "content": "a.py b.py"},
        cached(user("Read a.py.")),
    ]
    two = await post(http, served.anthropic(), claude_body(grown, stream=stream), grant)

    assert one.status == two.status == 200
    assert [thread for thread, _ in served.recorder.usages] == [THREAD, THREAD]
    assert fake.requests[1].cache_read > 0
    for (_, usage), seen, answer in zip(
        served.recorder.usages, fake.requests, [one, two], strict=True
    ):
        assert seen.usage is not None
        assert usage.input == seen.usage["input_tokens"]
        assert usage.input == seen.input_tokens - seen.cache_read - seen.cache_write
        assert usage.cache_read == seen.cache_read
        assert usage.cache_write == seen.cache_write
        assert usage.output == seen.usage["output_tokens"]
        assert usage.prompt == seen.input_tokens
        assert usage.model == CLAUDE
        assert usage.message_id == answer.reply_id()
        assert usage.measured is not None


@pytest.mark.parametrize("stream", [True, False])
async def test_each_responses_calls_usage_is_the_providers_count(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, stream: bool
) -> None:
    """A Responses call logs one usage whose input is the uncached part of the provider's
    ``input_tokens`` and whose cache read is its ``cached_tokens``. (The prompt is past the
    1,024 tokens OpenAI caches from.)"""
    grant = served.bearer()
    first = [user(f"List the files.\n{long_text()}")]
    one = await post(http, served.openai(), codex_body(first, stream=stream), grant)
    grown = [
        *first,
        {"role": "assistant", "content": [{"type": "output_text", "text": "a.py b.py"}]},
        user("Read a.py."),
    ]
    two = await post(http, served.openai(), codex_body(grown, stream=stream), grant)

    assert one.status == two.status == 200
    assert len(served.recorder.usages) == 2
    assert fake.requests[1].cache_read > 0
    for (_, usage), seen, answer in zip(
        served.recorder.usages, fake.requests, [one, two], strict=True
    ):
        assert seen.usage is not None
        cached = seen.usage["input_tokens_details"]["cached_tokens"]
        assert usage.input == seen.usage["input_tokens"] - cached
        assert usage.cache_read == cached == seen.cache_read
        assert usage.cache_write == 0
        assert usage.output == seen.usage["output_tokens"]
        assert usage.prompt == seen.input_tokens
        assert usage.model == GPT
        assert usage.message_id == answer.reply_id()


async def test_a_calls_count_is_announced_before_its_reply_ends_and_logged_off_its_path(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The recorder is told a count is coming before the client receives the event that
    carries it (``message_delta``), and the count is logged after the reply has gone out: a
    slow log does not hold the reply back."""
    fake.queue(Slow(Text("word " * 20), chunk_delay=0.05, chunks=4))
    recorder = Recorder(delay=0.4)
    async with serving(upstream_for(fake), recorder) as served:
        seen_at: dict[str, float] = {}
        async with http.post(
            served.anthropic(), json=claude_body([user("hi")]), headers=served.key()
        ) as response:
            async for line in response.content:
                if line.startswith(b"event: "):
                    seen_at.setdefault(line[7:].strip().decode(), time.monotonic())
        with anyio.fail_after(5):
            await recorder.logged.wait()
    [announced] = recorder.announced_at
    [done] = recorder.done_at
    assert seen_at["message_start"] < announced <= seen_at["message_delta"]
    assert seen_at["message_stop"] < done
    assert recorder.order[:2] == ["coming", "usage"]


async def test_a_whole_replys_count_is_announced_before_it_is_sent(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A reply that is not streamed: the count is announced, the reply sent, then logged."""
    fake.queue(Text("whole"))
    recorder = served.recorder
    recorder.delay = 0.4
    started = time.monotonic()
    answer = await post(
        http, served.anthropic(), claude_body([user("hi")], stream=False), served.key()
    )
    answered = time.monotonic()
    assert answer.status == 200
    with anyio.fail_after(5):
        await recorder.logged.wait()
    assert answered - started < 0.4
    assert recorder.order[:2] == ["coming", "usage"]
    [(_, usage)] = recorder.usages
    assert usage.message_id == answer.reply_id()


async def test_a_later_request_is_measured_within_ten_percent_of_the_providers_count(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A request that extends the session's last one is measured as the provider's count for
    the last one plus the appended messages: within 10 % of the provider's count for it."""
    grant = served.key()
    first = [user("Summarise the module.")]
    reply = (await post(http, served.anthropic(), claude_body(first, stream=False), grant)).json()
    grown = [*first, {"role": "assistant", "content": reply["content"]}, user(long_text())]
    await post(http, served.anthropic(), claude_body(grown, stream=False), grant)

    _, second = served.recorder.usages[1]
    counted = fake.requests[1]
    assert counted.input_tokens - fake.requests[0].input_tokens > 2000
    assert second.measured is not None
    assert abs(second.measured - counted.input_tokens) <= 0.1 * counted.input_tokens


async def grown_session(
    http: aiohttp.ClientSession, served: Served, results: int
) -> list[tuple[str, ModelUsage]]:
    """A session's first request, then one with ``results`` long tool results more."""
    grant = served.key()
    first = [user("Summarise the module.")]
    await post(http, served.anthropic(), claude_body(first), grant)
    grown = list(first)
    for _ in range(results):
        grown += [{"role": "assistant", "content": [{"type": "text", "text": "Reading."}]}]
        grown += [user(long_text())]
    await post(http, served.anthropic(), claude_body(grown), grant)
    return await served.recorder.logged_at_least(2)


async def test_a_request_its_bytes_keep_under_the_gate_goes_on_before_it_is_measured(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The session's second request adds a few thousand tokens to one the provider counted,
    far under the gate: it is not held for a decision, and is still measured (once its
    reply has gone out) and logged with its measurement."""
    fake.queue(Text("first"), Text("second"))
    gated = Gated(at=150_000, fake=fake)
    async with serving(upstream_for(fake), admitter=gated) as served:
        usages = await grown_session(http, served, results=1)
    assert gated.asked == []
    # The first (no count to stand on yet) before the provider had it, the second after.
    assert gated.measured_at == [0, 2]
    _, second = usages[1]
    assert second.measured is not None
    assert abs(second.measured - fake.requests[1].input_tokens) <= 0.1 * second.measured


async def test_a_request_its_bytes_may_take_past_the_gate_is_measured_before_it_goes_on(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A request whose bytes could hold more than the gate is measured before it goes on,
    and asked about with that size when it passes the gate."""
    fake.queue(Text("first"), Text("second"))
    async with serving(upstream_for(fake), admitter=Gated(at=0)) as probe:
        await grown_session(http, probe, results=0)
    first_count = fake.requests[0].input_tokens
    fake.queue(Text("first"), Text("second"))
    gated = Gated(at=first_count + 1_000, fake=fake)
    before = len(fake.requests)
    async with serving(upstream_for(fake), admitter=gated) as served:
        usages = await grown_session(http, served, results=3)
    assert gated.measured_at == [before, before + 1]  # each before the provider had it
    _, second = usages[1]
    assert second.measured is not None
    assert second.measured > gated.at
    assert gated.asked == [second.measured]


async def test_the_sessions_baseline_is_logged_once_after_its_first_reply(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """After a session's first reply the gateway logs its baseline once: the provider's
    count less the conversation, i.e. about the system prompt and tools."""
    grant = served.key()
    first = [user("Summarise the module.")]
    reply = (await post(http, served.anthropic(), claude_body(first, stream=False), grant)).json()
    grown = [*first, {"role": "assistant", "content": reply["content"]}, user("And the tests?")]
    await post(http, served.anthropic(), claude_body(grown, stream=False), grant)

    async with http.post(
        f"{fake.url}/v1/messages/count_tokens",
        json={"model": CLAUDE, "messages": first},
        headers={"x-api-key": REAL_KEY},
    ) as counted:
        message = (await counted.json())["input_tokens"]
    fixed = fake.requests[0].input_tokens - message  # the system prompt and tools
    [(thread, baseline)] = served.recorder.baselines
    assert served.recorder.order == ["coming", "usage", "baseline", "coming", "usage"]
    assert thread == THREAD
    assert 0 < baseline < fake.requests[0].input_tokens
    assert fixed > 1000
    assert abs(baseline - fixed) <= 0.05 * fixed


async def test_a_new_session_of_the_thread_logs_its_own_baseline(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A thread's next session starts a new meter: its first reply logs a baseline again."""
    body = claude_body([user("hi")], stream=False)
    await post(http, served.anthropic(), body, served.key())
    await post(http, served.anthropic(), body, served.key())

    assert [r.status for r in fake.requests] == [200, 200]
    assert served.recorder.order == ["coming", "usage", "baseline", "coming", "usage", "baseline"]


# -- upstream faults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "stream"),
    [(429, "rate_limit_error", True), (529, "overloaded_error", False)],
)
async def test_a_messages_error_comes_back_unchanged_and_logs_nothing(
    served: Served,
    fake: FakeModelServer,
    http: aiohttp.ClientSession,
    status: int,
    kind: str,
    stream: bool,
) -> None:
    """An Anthropic error reply reaches the client with its status, body and ``retry-after``
    as the provider sent them; no usage and no baseline are logged."""
    fake.queue(Fail(status, message="Come back later.", retry_after=3))
    body = claude_body([user("hi")], stream=stream)
    answer = await post(http, served.anthropic(), body, served.key())

    sent = {
        "type": "error",
        "error": {"type": kind, "message": "Come back later."},
        "request_id": answer.headers["request-id"],
    }
    assert fake.requests[0].status == status
    assert answer.status == status
    assert answer.text == json.dumps(sent)
    assert answer.headers["retry-after"] == "3"
    assert served.recorder.usages == []
    assert served.recorder.baselines == []


async def test_a_responses_error_comes_back_unchanged_and_logs_nothing(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """An OpenAI error reply reaches the client with its status, body and ``retry-after`` as
    the provider sent them; no usage is logged."""
    fake.queue(Fail(429, message="Rate limit reached.", retry_after=2))
    answer = await post(http, served.openai(), codex_body([user("hi")]), served.bearer())

    sent = {
        "error": {
            "message": "Rate limit reached.",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert answer.status == 429
    assert answer.json() == sent
    assert answer.headers["retry-after"] == "2"
    assert served.recorder.usages == []


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_an_unreachable_provider_is_a_502_naming_its_url(
    http: aiohttp.ClientSession, api: str
) -> None:
    """When the provider cannot be reached the client gets 502 in the provider's shape,
    naming the URL the gateway tried."""
    base = f"http://127.0.0.1:{closed_port()}"
    upstream = Upstream(base, REAL_KEY, f"{base}/v1", REAL_KEY)
    async with serving(upstream) as served:
        if api == "anthropic":
            answer = await post(http, served.anthropic(), claude_body([user("hi")]), served.key())
            url = f"{base}/v1/messages"
        else:
            answer = await post(http, served.openai(), codex_body([user("hi")]), served.bearer())
            url = f"{base}/v1/responses"

    body = answer.json()
    assert answer.status == 502
    if api == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "api_error"
    else:
        assert body["error"]["type"] == "server_error"
        assert body["error"]["code"] == "upstream-unreachable"
    assert url in body["error"]["message"]
    assert served.recorder.usages == []


async def test_a_provider_that_stalls_mid_stream_ends_the_clients_stream(
    fake: FakeModelServer,
) -> None:
    """When the provider goes quiet past the read timeout after its stream has begun, the
    client's stream ends there, with what arrived so far: its 200 response is the only one
    on the connection (the 502 the gateway gives an unreachable provider cannot follow it)."""
    fake.queue(Stall(Text("Too late."), seconds=3.0, after=2))
    async with serving(upstream_for(fake, read_timeout_s=0.3)) as served:
        body = json.dumps(claude_body([user("hi")])).encode()
        head = (
            "POST /gateway/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"x-api-key: {served.key()['x-api-key']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        received = b""
        async with await anyio.connect_tcp("127.0.0.1", served.port) as tcp:
            await tcp.send(head.encode() + body)
            with anyio.move_on_after(5):
                try:
                    while True:
                        received += await tcp.receive()
                except anyio.EndOfStream:
                    pass

    assert received.startswith(b"HTTP/1.1 200")
    assert b"event: message_start" in received
    assert b"Too late." not in received
    assert received.count(b"HTTP/1.1 ") == 1, (
        f"A second HTTP response was written into the stream: {received.decode()!r}"
    )


# -- a subscription's login ---------------------------------------------------------------------


async def test_the_fake_can_accept_only_a_bearer_token(http: aiohttp.ClientSession) -> None:
    """(The fake this module relies on.) With ``bearer_token`` set through ``_fake/config``
    only that bearer token passes; an ``x-api-key``, even the right value, and a wrong token
    get Anthropic's 401."""
    async with FakeModelServer(api_key=REAL_KEY) as fake:
        async with http.post(f"{fake.url}/_fake/config", json={"bearer_token": OAUTH_TOKEN}) as r:
            config = await r.json()
        body = claude_body([user("hi")], stream=False)
        url = f"{fake.url}/v1/messages"
        keyed = await post(http, url, body, {"x-api-key": OAUTH_TOKEN})
        wrong = await post(http, url, body, {"Authorization": "Bearer nope"})
        both = await post(
            http, url, body, {"Authorization": f"Bearer {OAUTH_TOKEN}", "x-api-key": OAUTH_TOKEN}
        )
        right = await post(http, url, body, {"Authorization": f"Bearer {OAUTH_TOKEN}"})
        fake.configure(bearer_token=None)
        keyed_again = await post(http, url, body, {"x-api-key": REAL_KEY})

    assert config["bearer_token"] == OAUTH_TOKEN
    assert [keyed.status, wrong.status, both.status] == [401, 401, 401]
    assert keyed.json()["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    assert right.status == 200
    assert keyed_again.status == 200
    assert [r.reply for r in fake.requests][:3] == ["unauthorized"] * 3


async def test_a_subscription_token_is_sent_as_a_bearer_with_the_oauth_beta(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """With a Claude subscription's token the gateway sends ``Authorization: Bearer`` and
    adds ``oauth-2025-04-20`` to the client's ``anthropic-beta``; no ``x-api-key`` goes out."""
    fake.configure(api_key=None, bearer_token=OAUTH_TOKEN)
    upstream = upstream_for(fake, anthropic_auth_token=OAUTH_TOKEN, anthropic_api_key="")
    async with serving(upstream) as served:
        headers = {**served.key(), "anthropic-beta": BETA}
        answer = await post(http, served.anthropic(), claude_body([user("hi")]), headers)

    [seen] = fake.requests
    assert answer.status == 200
    assert seen.status == 200
    assert seen.headers["authorization"] == f"Bearer {OAUTH_TOKEN}"
    assert "x-api-key" not in seen.headers
    betas = [b.strip() for b in seen.headers["anthropic-beta"].split(",")]
    assert betas == [*BETA.split(","), "oauth-2025-04-20"]
    assert len(served.recorder.usages) == 1


async def test_an_api_key_refused_by_a_bearer_only_provider_comes_back_unchanged(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """With only an API key against a provider that wants the bearer token, the provider's
    401 reaches the client as it was sent."""
    fake.configure(api_key=None, bearer_token=OAUTH_TOKEN)
    async with serving(upstream_for(fake, anthropic_api_key=OAUTH_TOKEN)) as served:
        answer = await post(http, served.anthropic(), claude_body([user("hi")]), served.key())

    [seen] = fake.requests
    assert seen.reply == "unauthorized"
    assert seen.headers["x-api-key"] == OAUTH_TOKEN
    assert answer.status == 401
    assert answer.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": answer.headers["request-id"],
    }
    assert served.recorder.usages == []


# -- a client that leaves -----------------------------------------------------------------------


async def test_a_client_that_leaves_mid_stream_does_not_stop_the_gateway(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A client that hangs up in the middle of a stream leaves the gateway serving: the
    next request is answered."""
    fake.queue(Slow(Text("word " * 200), chunk_delay=0.05, chunks=40), Text("Still here."))
    grant = served.key()
    async with http.post(
        served.anthropic(), json=claude_body([user("hi")]), headers=grant
    ) as response:
        assert response.status == 200
        await response.content.readuntil(b"content_block_delta")
        response.close()
    await anyio.sleep(0.3)
    answer = await post(http, served.anthropic(), claude_body([user("again")], stream=False), grant)

    assert answer.status == 200
    assert answer.json()["content"] == [{"type": "text", "text": "Still here."}]


async def test_a_reply_cut_short_by_the_client_is_still_logged_once(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A stream the client hangs up on was still counted and billed: its usage (from
    ``message_start``) is logged once."""
    fake.queue(Slow(Text("word " * 200), chunk_delay=0.05, chunks=40))
    async with http.post(
        served.anthropic(), json=claude_body([user("hi")]), headers=served.key()
    ) as response:
        await response.content.readuntil(b"content_block_delta")
        response.close()
    with anyio.fail_after(5):
        await served.recorder.logged.wait()
    await anyio.sleep(0.3)

    [seen] = fake.requests
    [(_, usage)] = served.recorder.usages
    assert seen.usage is not None
    assert usage.input == seen.usage["input_tokens"]
    assert usage.cache_write == seen.cache_write


async def test_a_client_that_leaves_is_logged_as_gone_not_as_an_unreachable_provider(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A client hanging up mid-stream is logged as ``gateway_client_left``; the provider,
    which was there all along, is not reported as unreachable."""
    fake.queue(Slow(Text("word " * 200), chunk_delay=0.05, chunks=40))
    with capture_logs() as logs:
        async with http.post(
            served.anthropic(), json=claude_body([user("hi")]), headers=served.key()
        ) as response:
            await response.content.readuntil(b"content_block_delta")
            response.close()
        with anyio.fail_after(5):
            await served.recorder.logged.wait()
        await anyio.sleep(0.3)

    logged = [entry["event"] for entry in logs]
    assert "gateway_client_left" in logged
    assert "gateway_upstream_failed" not in logged, f"A client's leaving was logged as {logs}"


# -- a pass's reach -------------------------------------------------------------------------------


async def test_a_claude_sessions_pass_cannot_spend_the_openai_key(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """A pass issued for a Claude Code session (the Messages API) sent to the Responses API,
    or to its models list, is refused 401 wrong-api and never reaches the OpenAI upstream."""
    credential = served.gateway.issue(THREAD, "anthropic").credential
    bearer = {"Authorization": f"Bearer {credential}"}
    call = await post(http, served.openai(), codex_body([user("hi")]), bearer)
    async with http.get(served.openai("models"), headers=bearer) as response:
        listing = response.status, await response.json()

    assert (call.status, call.json()["error"]["code"]) == (401, "wrong-api")
    assert (listing[0], listing[1]["error"]["code"]) == (401, "wrong-api")
    assert fake.requests == []


async def test_a_codex_sessions_pass_cannot_spend_the_anthropic_key(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The same the other way: a Codex session's pass on the Messages API is refused."""
    credential = served.gateway.issue(THREAD, "openai").credential
    answer = await post(
        http, served.anthropic(), claude_body([user("hi")]), {"x-api-key": credential}
    )

    assert answer.status == 401
    assert "wrong-api" in answer.json()["error"]["message"]
    assert fake.requests == []


@pytest.mark.parametrize(
    ("method", "tail"),
    [
        ("GET", "files"),
        ("DELETE", "files/file-abc"),
        ("GET", "organization/admin_api_keys"),
        ("DELETE", "responses"),
        ("GET", "responses"),
        ("GET", "%2e%2e/%2e%2e/escape"),
        ("GET", "models/%2e%2e"),
    ],
)
async def test_a_pass_reaches_only_the_endpoints_its_cli_uses(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, method: str, tail: str
) -> None:
    """A current Codex pass on any path but Responses and the models list (files, admin
    keys, another method, a dot-dot segment) is 404 not-an-endpoint, and nothing is
    forwarded with the real key."""
    url = f"{served.gateway.url(served.url, 'openai')}/{tail}"
    async with http.request(method, yarl.URL(url, encoded=True), headers=served.bearer()) as got:
        status, body = got.status, await got.json()

    assert (status, body["error"]["code"]) == (404, "not-an-endpoint")
    assert fake.requests == []


@pytest.mark.parametrize(("method", "tail"), [("GET", "v1/files"), ("POST", "v1/models")])
async def test_a_claude_pass_reaches_only_messages_count_tokens_and_models(
    served: Served, fake: FakeModelServer, http: aiohttp.ClientSession, method: str, tail: str
) -> None:
    """On the Messages side too: any endpoint but messages, count_tokens and the models
    list is 404 not-an-endpoint and never forwarded."""
    async with http.request(method, served.anthropic(tail), headers=served.key()) as got:
        status, body = got.status, await got.json()

    assert status == 404
    assert "not-an-endpoint" in body["error"]["message"]
    assert fake.requests == []


async def test_refused_passes_are_logged_once_a_minute_not_once_each(
    served: Served, http: aiohttp.ClientSession
) -> None:
    """Anyone on the machine can send requests without a pass: 200 of them leave one
    warning line (saying how many it stands for), not 200."""
    with capture_logs() as logs:
        for _ in range(200):
            answer = await post(http, served.anthropic(), claude_body([user("hi")]), {})
            assert answer.status == 401
    refused = [entry for entry in logs if entry["event"] == "gateway_refused"]
    assert len(refused) == 1
    assert refused[0]["times"] == 1


async def test_errors_the_cli_retries_are_told_once_at_the_third_in_a_row(
    fake: FakeModelServer, http: aiohttp.ClientSession
) -> None:
    """The provider answers 529 again and again: the recorder hears of it once, at the third
    in a row (the CLI goes on retrying on its own); a success starts the count again."""
    fake.queue(Fail(529), Fail(529), Fail(529), Fail(529), Text("up"), Fail(529), Fail(529))
    async with serving(upstream_for(fake)) as served:
        key = served.key()
        statuses = []
        for _ in range(7):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [user("hi")]}
            async with http.post(served.anthropic(), json=body, headers=key) as answer:
                statuses.append(answer.status)
                await answer.read()
        failing = served.recorder.failing
    assert statuses == [529, 529, 529, 529, 200, 529, 529]
    assert failing == [(THREAD, 529, 3)]
