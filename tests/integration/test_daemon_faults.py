"""Nothing a provider sends ends the daemon (issue 11, item 1), shown on a real daemon: for
each malformed reply the fake model server can script, the faulty thread's turn fails with a
system line naming the cause, a thread running beside it finishes, and ``/health`` still
answers; arguments the model got wrong come back to it as a tool error it corrects; a broken
stream is retried."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer, Slow, Text
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for

STEADY = "anthropic:claude-sonnet-4-5"
_models = itertools.count(1)

TEXT = {"type": "text", "text": "never seen"}
FAULTS: dict[str, tuple[dict[str, Any], str, str]] = {
    # name: (reply, the system line's code, words its text must hold)
    "broken-sse": (
        {"type": "broken", "reply": TEXT, "after": 2, "line": "<html>502</html>"},
        "malformed-response",
        "not JSON",
    ),
    "html-200": (
        {"type": "html", "body": "<html>sign in</html>", "status": 200},
        "malformed-response",
        "text/html",
    ),
    "no-stop-event": (
        {"type": "unframed", "reply": TEXT, "drop": "stop"},
        "malformed-response",
        "message_stop",
    ),
    "no-start-event": (
        {"type": "unframed", "reply": TEXT, "drop": "start"},
        "malformed-response",
        "message_start",
    ),
    "wrong-shape": (
        {"type": "raw", "events": [{"type": "message_start", "message": []}]},
        "malformed-response",
        "could not be read",
    ),
    "stall": ({"type": "stall", "reply": TEXT, "seconds": 30}, "transport-failed", "2 s"),
}


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """A daemon whose provider calls give up on 2 s of silence, without retries (a cold fake
    counts its first prompt in about a second)."""
    home = tmp_path_factory.mktemp("faults")
    with running_daemon(home, fake.url, CONDENSATE_PROVIDER_READ_TIMEOUT_S="2") as process:
        yield process


def fresh_model() -> str:
    """A model name of its own, so that its scripted replies reach this test's thread only."""
    return f"claude-fault-{next(_models)}"


async def start(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path, model: str, brief: str
) -> str:
    status, body = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {"engine": "api", "model": f"anthropic:{model}", "cwd": str(cwd), "brief": brief},
    )
    assert status == 201, body
    return str(body["id"])


def ended(event: dict[str, Any]) -> bool:
    return bool(event["kind"] == "turn.ended")


async def queue(
    session: aiohttp.ClientSession, fake: FakeModelServer, model: str, *replies: Any
) -> None:
    async with session.post(
        fake.url + "/_fake/queue", json={"replies": list(replies), "model": model}
    ) as response:
        assert response.status == 200, await response.text()


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_malformed_reply_fails_its_turn_only_and_names_the_cause(
    fault: str,
    session: aiohttp.ClientSession,
    fake: FakeModelServer,
    daemon: DaemonProcess,
    tmp_path: Path,
) -> None:
    """The faulty thread's turn fails with a system line naming the cause; a thread running
    at the same time completes; the daemon still answers /health."""
    reply, code, words = FAULTS[fault]
    faulty, steady = fresh_model(), fresh_model()
    await queue(session, fake, faulty, reply)
    fake.queue(Slow(Text("steady answer"), chunk_delay=0.1, chunks=10), model=steady)
    beside = await start(session, daemon, tmp_path, steady, "keep going")
    broken = await start(session, daemon, tmp_path, faulty, f"meet {fault}")

    events = await wait_for(session, daemon, broken, ended)
    assert events[-1]["outcome"] == "failed"
    lines = [e for e in events if e["kind"] == "system.line"]
    assert [line["code"] for line in lines] == [code]
    assert words in lines[0]["text"]

    calm = await wait_for(session, daemon, beside, ended)
    assert calm[-1]["outcome"] == "completed"
    assert [e["text"] for e in calm if e["kind"] == "message.assistant"] == ["steady answer"]
    async with session.get(daemon.url + "/health") as health:
        assert health.status == 200


@pytest.mark.parametrize(
    "call_reply",
    [
        {"type": "tool_calls", "calls": [{"name": "read", "raw": "{'path': 'a.txt'}"}]},
        {
            "type": "cut",
            "keep": 9,
            "reply": {
                "type": "tool_calls",
                "calls": [{"name": "read", "arguments": {"path": "a.txt"}}],
            },
        },
    ],
    ids=["not-json", "cut-at-max-tokens"],
)
async def test_arguments_the_model_got_wrong_come_back_as_a_tool_error_it_corrects(
    call_reply: dict[str, Any],
    session: aiohttp.ClientSession,
    fake: FakeModelServer,
    daemon: DaemonProcess,
    tmp_path: Path,
) -> None:
    """A call whose arguments cannot be read is not run: its result is an error naming the
    problem, and the turn goes on to the model's corrected call."""
    (tmp_path / "a.txt").write_text("alpha\n")
    model = fresh_model()
    corrected = {"type": "tool_calls", "calls": [{"name": "read", "arguments": {"path": "a.txt"}}]}
    await queue(session, fake, model, call_reply, corrected, {"type": "text", "text": "read it"})
    thread = await start(session, daemon, tmp_path, model, "read a.txt")

    events = await wait_for(session, daemon, thread, ended)
    assert events[-1]["outcome"] == "completed"
    first, second = [e for e in events if e["kind"] == "tool.result"]
    assert first["is_error"]
    assert "arguments of read" in first["output"]
    assert "not run" in first["output"]
    assert not second["is_error"]
    assert "alpha" in second["output"]


async def test_a_broken_stream_is_retried_and_the_turn_completes(
    session: aiohttp.ClientSession, fake: FakeModelServer, tmp_path: Path
) -> None:
    """With retries allowed, a stream that broke is sent again and the second answer counts."""
    model = fresh_model()
    broken = {"type": "broken", "reply": TEXT, "after": 1, "line": "garbage"}
    await queue(session, fake, model, broken, {"type": "text", "text": "second try"})
    (tmp_path / "home").mkdir()
    with running_daemon(tmp_path / "home", fake.url, CONDENSATE_PROVIDER_RETRIES="1") as process:
        thread = await start(session, process, tmp_path, model, "try twice")
        events = await wait_for(session, process, thread, ended)
    assert events[-1]["outcome"] == "completed"
    assert [e["text"] for e in events if e["kind"] == "message.assistant"] == ["second try"]
    assert [r.reply for r in fake.requests if r.model == model] == ["broken:text", "text"]
