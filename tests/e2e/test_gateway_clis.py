"""The real CLIs through the model gateway: every request the fake receives carries the
daemon's key (never the CLI's pass), and each call's count in the log is the provider's own,
logged by the gateway with its measurement beside it."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from condensate.core import prices
from condensate.engine import ThreadSpec
from condensate.events import BaselineMeasured, Engine, EngineNotice, ModelUsage
from condensate.http.server import costs_answer
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.test_runtime import running

CASES = [
    ("claude", "anthropic:claude-opus-5-5", "Bash", "messages"),
    ("codex", "openai:gpt-6.2-sol", "shell", "responses"),
]


def shell(engine: str, command: str) -> ToolCalls:
    if engine == "claude":
        return ToolCalls([Call("Bash", {"command": command})])
    return ToolCalls([Call("shell", {"command": ["bash", "-lc", command]})])


@pytest.mark.parametrize(("engine", "model", "tool", "endpoint"), CASES)
async def test_every_cli_request_reaches_the_provider_with_the_daemons_key(
    tmp_path: Path, workdir: Path, engine: Engine, model: str, tool: str, endpoint: str
) -> None:
    """The fake accepts only the daemon's key ("k"): every model request of the CLI reaches
    it through the gateway with that key and without the session's pass."""
    async with FakeModelServer(window=200_000, api_key="k") as fake:
        bare = model.split(":", 1)[1]
        fake.queue(shell(engine, "seq 1 50"), Text("counted"), model=bare)
        async with running(tmp_path / "home", fake=fake) as runtime:
            thread = await runtime.create(
                ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="count")
            )
            with anyio.fail_after(90):
                await thread.turn_done.wait()
            ended = [s.event for s in (await runtime.log.events(thread.thread_id))][-1]
        calls = [r for r in fake.requests if r.endpoint == endpoint and r.model == bare]
    assert ended.kind == "turn.ended", ended
    assert ended.outcome == "completed", ended
    assert len(calls) >= 2
    for request in calls:
        assert request.status == 200
        headers = {k.lower(): v for k, v in request.headers.items()}
        sent = headers.get("x-api-key") or headers.get("authorization", "")
        assert sent in {"k", "Bearer k"}, sent
        assert "cgw1." not in str(request.headers)


@pytest.mark.parametrize(("engine", "model", "tool", "endpoint"), CASES)
async def test_each_calls_count_is_the_providers_logged_by_the_gateway(
    tmp_path: Path,
    fake: FakeModelServer,
    workdir: Path,
    engine: Engine,
    model: str,
    tool: str,
    endpoint: str,
) -> None:
    """One model.usage per request the provider answered, equal to the fake's bill for it
    (uncached input, cache read, cache write as the API reports them), each with the
    gateway's measurement of the request; a later request's measurement is within 10 % of the
    count; the session's real baseline is logged after its first reply."""
    bare = model.split(":", 1)[1]
    fake.queue(shell(engine, "seq 1 400"), shell(engine, "seq 1 300"), Text("done"), model=bare)
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="count twice")
        )
        with anyio.fail_after(90):
            await thread.turn_done.wait()
        events = [s.event for s in (await runtime.log.events(thread.thread_id))]
    calls = [r for r in fake.requests if r.endpoint == endpoint and r.model == bare]
    usages = [e for e in events if isinstance(e, ModelUsage)]
    # Anthropic's writes and OpenAI's from GPT-5.6 on (``cache_write_tokens``) are their own
    # class; OpenAI's earlier models report none (what they write bills as input).
    billed = [
        (r.input_tokens - r.cache_read - r.cache_write, r.cache_read, r.cache_write) for r in calls
    ]
    assert [(u.input, u.cache_read, u.cache_write) for u in usages] == billed
    assert all(u.measured is not None for u in usages)
    last = usages[-1]
    assert last.measured is not None
    assert abs(last.measured - last.prompt) <= 0.1 * last.prompt, (last.measured, last.prompt)
    baselines = [e for e in events if isinstance(e, BaselineMeasured)]
    assert baselines, "no baseline measured from the first request"
    assert 0 < baselines[0].tokens < usages[0].prompt


PRICES = {
    "openai:gpt-6.2-sol": {"input": 2.0, "output": 16.0, "cache_read": 0.2, "cache_write": 2.0},
}
"""A price the setting gives over the table's (by its old name, still read)."""


@pytest.mark.parametrize(("engine", "model", "tool", "endpoint"), CASES)
async def test_a_threads_costs_match_what_the_provider_billed(
    tmp_path: Path,
    fake: FakeModelServer,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    engine: Engine,
    model: str,
    tool: str,
    endpoint: str,
) -> None:
    """The thread's costs (GET /threads/:id's ``costs``) sum, by token class, exactly what the
    fake billed for the thread's calls, priced at the list price (the table's, or
    CONDENSATE_MODEL_PRICES'), under the session the calls belong to."""
    monkeypatch.setenv("CONDENSATE_MODEL_PRICES", json.dumps(PRICES))
    bare = model.split(":", 1)[1]
    fake.queue(shell(engine, "seq 1 200"), Text("done"), model=bare)
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="count")
        )
        with anyio.fail_after(90):
            await thread.turn_done.wait()
        costs = costs_answer(thread.projection).dump()
        sessions = [
            s.event.session_id
            for s in (await runtime.log.events(thread.thread_id))
            if isinstance(s.event, EngineNotice)
        ]
    calls = [r for r in fake.requests if r.endpoint == endpoint and r.model == bare]
    price = prices.price_of(model, {k: prices.Price(**v) for k, v in PRICES.items()})
    assert price is not None
    expected = prices.Tokens()
    usd = 0.0
    for r in calls:
        assert r.usage is not None
        write = r.cache_write
        billed = prices.Tokens(
            r.input_tokens - r.cache_read - write, write, r.cache_read, r.usage["output_tokens"]
        )
        usd += billed.cost(price)
        expected = prices.Tokens(
            expected.input + billed.input,
            expected.cache_write + billed.cache_write,
            expected.cache_read + billed.cache_read,
            expected.output + billed.output,
        )
    assert costs["calls"] == len(calls)
    assert costs["tokens"] == {
        "input": expected.input,
        "cacheWrite": expected.cache_write,
        "cacheRead": expected.cache_read,
        "output": expected.output,
        # The fake reports no one-hour writes and compacts nothing on its own.
        "cacheWrite1h": 0,
        "compactionInput": 0,
        "compactionOutput": 0,
    }
    assert costs["usd"] == pytest.approx(usd, abs=1e-5)
    assert costs["usd"] > 0
    (session,) = costs["sessions"]
    assert session["session"] in sessions
    assert session["model"] == model  # as the thread names it, as the metrics do


TOKEN = "oauth-token-1"  # noqa: S105 - the fake's, for this test


async def test_a_subscription_token_reaches_the_provider_as_a_bearer(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CONDENSATE_ANTHROPIC_AUTH_TOKEN (a Claude subscription's OAuth token) the real
    Claude Code CLI, holding only its pass, works against a provider that accepts nothing but
    that bearer token; the token went out with the OAuth beta and the CLI never held it."""
    monkeypatch.setenv("CONDENSATE_ANTHROPIC_AUTH_TOKEN", TOKEN)
    async with FakeModelServer(window=200_000) as fake:
        fake.configure(bearer_token=TOKEN)
        fake.queue(Text("hello from a subscription"), model="claude-opus-5-5")
        async with running(tmp_path / "home", fake=fake) as runtime:
            thread = await runtime.create(
                ThreadSpec(
                    engine="claude",
                    model="anthropic:claude-opus-5-5",
                    cwd=str(workdir),
                    brief="say hello",
                )
            )
            with anyio.fail_after(90):
                await thread.turn_done.wait()
            events = [s.event for s in (await runtime.log.events(thread.thread_id))]
        calls = [r for r in fake.requests if r.endpoint == "messages"]
    assert events[-1].kind == "turn.ended"
    assert events[-1].outcome == "completed"
    assert calls
    for request in calls:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert request.status == 200
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert "oauth-2025-04-20" in headers["anthropic-beta"]
        assert "x-api-key" not in headers
