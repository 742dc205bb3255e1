"""The curator against the fake model server (and a small Hindsight server): the model chain,
the deadline, misses with room and forced, verbatim rules, and recall."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
import pytest
from aiohttp import web

from condensate.core.planner import Cut
from condensate.core.probes import probes_for
from condensate.core.summary import CuratorSettings, Miss, Summary, carry_out, replaced_entries
from condensate.core.tiers import VERBATIM_HEADING
from condensate.runtime.curator import Curator
from condensate.events import ThinkingBlock
from condensate.providers import Endpoint, ModelClient, ProviderSettings, make_client
from condensate.providers._http import RetryPolicy
from condensate.testing.fake_model import Fail, FakeModelServer, Slow, Text
from condensate.testing.threads import ThreadBuilder
from tests.unit.test_planner import decide

CURATOR = "anthropic:claude-haiku-4-5"
FALLBACK = "openai:gpt-5-mini"
THREAD = "anthropic:claude-sonnet-4-5"


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def curator(
    fake, session, *, deadline: float = 10.0, hindsight: str | None = None, **overrides
) -> Curator:
    providers = ProviderSettings(
        anthropic=Endpoint(fake.url, "k"),
        openai=Endpoint(fake.url + "/v1", "k"),
        retry=RetryPolicy(max_retries=0),
    )
    clients: dict[str, ModelClient] = {}

    def client_for(model: str) -> ModelClient:
        return clients.setdefault(model, make_client(model, providers, session))

    settings = CuratorSettings(
        model=overrides.get("model", CURATOR),
        fallback_model=overrides.get("fallback", FALLBACK),
        hindsight_url=hindsight,
        deadline_override=timedelta(seconds=deadline),
    )
    return Curator(settings, client_for, session)


def long_thread() -> tuple[ThreadBuilder, Cut]:
    """A thread over its line with a human steer and a failed command in the older part."""
    b = ThreadBuilder()
    b.turn("Build the parser; keep the public API stable.", 100)
    b.call(
        "shell",
        "pytest -x",
        300,
        error=True,
        output="FAILED tests/test_parse.py::test_empty - IndexError: list index out of range",
    )
    b.turn("Please do not touch the lexer.", 30)
    for _ in range(200):
        b.reply("working through the parser", 400)
    b.user("Carry on.", 10)  # the current task: kept in the view, so the steer before is summarized
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    return b, d


def passing(b: ThreadBuilder, cut: Cut, head: str) -> str:
    """A summary that starts with ``head`` and holds everything its probes look for."""
    probes = probes_for(b.view, replaced_entries(b.view, cut.keep_from))
    return "\n".join([head, *(p.needle for p in probes)])


def sent_prompt(fake: FakeModelServer) -> str:
    return json.dumps(fake.requests[-1].body)


async def test_the_curator_model_writes_the_summary_without_tools(fake, session):
    """The first model in the chain answers in one call, without tools, thinking off."""
    b, cut = long_thread()
    fake.queue(Text(passing(b, cut, "The parser is half done.")), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.model == CURATOR
    assert result.text.startswith("The parser is half done.")
    body = fake.requests[-1].body
    assert "tools" not in body
    assert body["thinking"] == {"type": "disabled"}
    assert len(fake.requests) == 1


async def test_the_curator_sends_no_signed_thinking_and_marks_no_cache(fake, session):
    """The curator's one call carries the conversation as text: no thinking block (its model
    may not read the thread model's, and one read out of its turn would be refused) even when
    the thread's turns had signed thinking, and no cache breakpoint (a one-off call)."""
    b = ThreadBuilder()
    b.turn("Build the parser.", 100)
    b.call("read", "src/p.py", 300, thinking=(ThinkingBlock(text="", signature="sigA"),))
    for _ in range(200):
        b.reply("working through the parser", 400)
    b.user("Carry on.", 10)
    cut = decide(b)
    assert isinstance(cut, Cut)
    fake.queue(Text(passing(b, cut, "Half done.")), model="claude-haiku-4-5")
    assert isinstance(await curator(fake, session).summarize(b.view, cut, THREAD), Summary)
    sent = sent_prompt(fake)
    assert '"type": "thinking"' not in sent
    assert "sigA" not in sent
    assert "cache_control" not in sent


async def test_first_model_times_out_and_the_fallback_answers(fake, session):
    """A curator model that does not answer in its share of the deadline hands on."""
    b, cut = long_thread()
    fake.queue(Slow(Text("too late"), chunk_delay=1.0, chunks=10), model="claude-haiku-4-5")
    fake.queue(Text(passing(b, cut, "fallback summary")), model="gpt-5-mini")
    started = time.monotonic()
    result = await curator(fake, session, deadline=3.0).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.model == FALLBACK
    assert [a.outcome for a in result.attempts] == ["timeout", "ok"]
    assert time.monotonic() - started < 3.0


async def test_both_curators_fail_and_the_thread_model_answers(fake, session):
    """When the curator and its fallback both fail, the thread's own model writes it."""
    b, cut = long_thread()
    fake.queue(Fail(500), model="claude-haiku-4-5")
    fake.queue(Fail(401), model="gpt-5-mini")
    fake.queue(Text(passing(b, cut, "written by the thread's model")), model="claude-sonnet-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.model == THREAD
    assert [a.outcome for a in result.attempts] == ["failed", "failed", "ok"]


async def test_all_fail_with_room_the_cut_waits(fake, session):
    """Every model failing is a miss; with room the cut waits (no window)."""
    b, cut = long_thread()
    fake.queue(Fail(500), model="claude-haiku-4-5")
    fake.queue(Fail(500), model="gpt-5-mini")
    fake.queue(Fail(500), model="claude-sonnet-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Miss)
    assert "claude-haiku-4-5" in result.reason
    assert carry_out(cut, result, b.seq, b.clock) is None


async def test_all_fail_when_forced_the_system_drops(fake, session):
    """A forced summary that misses becomes a drop without a summary, author system."""
    b, _ = long_thread()
    b.refused()
    forced = decide(b)
    assert isinstance(forced, Cut)
    assert forced.forced
    for model in ("claude-haiku-4-5", "gpt-5-mini", "claude-sonnet-4-5"):
        fake.queue(Fail(500), model=model)
    result = await curator(fake, session).summarize(b.view, forced, THREAD)
    window = carry_out(forced, result, b.seq, b.clock)
    assert window is not None
    assert (window.window_kind, window.author, window.summary) == ("drop", "system", None)


async def test_a_missed_deadline_is_a_miss(fake, session):
    """No model answering before the whole deadline is a miss, on time."""
    b, cut = long_thread()
    for model in ("claude-haiku-4-5", "gpt-5-mini", "claude-sonnet-4-5"):
        fake.queue(Slow(Text("late"), chunk_delay=1.0, chunks=5), model=model)
    started = time.monotonic()
    result = await curator(fake, session, deadline=1.5).summarize(b.view, cut, THREAD)
    assert isinstance(result, Miss)
    assert time.monotonic() - started < 2.5


async def test_prompt_carries_failed_calls_and_human_messages_verbatim(fake, session):
    """What the curator model received holds each human message and each failed call's error
    text word for word, and marks earlier summaries as history."""
    b, cut = long_thread()
    fake.queue(Text("ok"), model="claude-haiku-4-5")
    await curator(fake, session).summarize(b.view, cut, THREAD)
    prompt = json.loads(sent_prompt(fake))["messages"][0]["content"]
    text = prompt if isinstance(prompt, str) else prompt[0]["text"]
    assert "Please do not touch the lexer." in text
    assert "IndexError: list index out of range" in text
    assert "keep this error verbatim" in text
    system = fake.requests[-1].body["system"]
    assert "not something a human" in json.dumps(system)


async def test_what_the_model_left_out_is_appended_verbatim(fake, session):
    """A summary that drops a human message or an error gets them appended word for word."""
    b, cut = long_thread()
    fake.queue(Text("Short summary that forgets things."), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert VERBATIM_HEADING in result.text
    assert "Please do not touch the lexer." in result.text
    assert "IndexError: list index out of range" in result.text


async def test_a_thread_summary_is_used_as_written(fake, session):
    """A summary the thread wrote itself needs no curator: the window carries it as is."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.request("summary", summary="my notes")
    cut = decide(b)
    assert isinstance(cut, Cut)
    assert not cut.needs_curator
    window = carry_out(cut, None, b.seq, b.clock)
    assert window is not None
    assert (window.summary, window.author) == ("my notes", "thread")
    assert fake.requests == []


class Hindsight:
    """A real HTTP stand-in for the Hindsight memory service, slow or failing on demand."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.queries: list[str] = []

    async def recall(self, request: web.Request) -> web.Response:
        self.queries.append((await request.json())["query"])
        if self.mode == "slow":
            await anyio.sleep(5)
        if self.mode == "failing":
            return web.json_response({"detail": "boom"}, status=500)
        return web.json_response({"results": [{"text": "Team rule: never edit the lexer."}]})


@pytest.fixture
async def hindsight(request) -> AsyncIterator[tuple[Hindsight, str]]:
    service = Hindsight(request.param)
    app = web.Application()
    app.router.add_post("/v1/default/banks/condensate/memories/recall", service.recall)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield service, f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.parametrize("hindsight", ["ok"], indirect=True)
async def test_hindsight_notes_reach_the_curator(fake, session, hindsight):
    """With a memory service, its reference notes are in the curator's prompt."""
    service, url = hindsight
    b, cut = long_thread()
    fake.queue(Text("ok"), model="claude-haiku-4-5")
    result = await curator(fake, session, hindsight=url).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.notes == 1
    assert "never edit the lexer" in sent_prompt(fake)
    assert "Build the parser" in service.queries[0]


@pytest.mark.parametrize("hindsight", ["slow", "failing"], indirect=True)
async def test_slow_or_failing_recall_costs_the_summary_nothing(fake, session, hindsight):
    """A slow (past 1.5 s) or failing memory service is skipped; the summary is written."""
    _, url = hindsight
    b, cut = long_thread()
    fake.queue(Text("written anyway"), model="claude-haiku-4-5")
    started = time.monotonic()
    result = await curator(fake, session, hindsight=url).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.notes == 0
    assert time.monotonic() - started < 3.0
    assert "Reference notes" not in sent_prompt(fake)


async def test_absent_memory_service_is_not_called(fake, session):
    """Without CONDENSATE_HINDSIGHT_URL no recall is attempted."""
    b, cut = long_thread()
    fake.queue(Text("ok"), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.notes == 0


# -- probes: checked before the window is committed -----------------------------------------


def retry_text(fake: FakeModelServer) -> str:
    """What the curator's last call said to the model last: the retry's request."""
    content = fake.requests[-1].body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[0]["text"]


async def test_a_summary_that_misses_is_retried_once_naming_what_it_missed(fake, session):
    """The first answer forgets the steer and the error: the same model is asked once more,
    told each missed item; a retry that holds everything is taken as written."""
    b, cut = long_thread()
    fake.queue(Text("The parser is half done."), model="claude-haiku-4-5")
    fake.queue(Text(passing(b, cut, "The parser is half done, retold.")), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert len(fake.requests) == 2
    asked = retry_text(fake)
    assert '"Please do not touch the lexer."' in asked
    assert "IndexError: list index out of range" in asked
    assert result.text.startswith("The parser is half done, retold.")
    assert VERBATIM_HEADING not in result.text
    probes = result.probes
    assert probes is not None
    assert probes.retried
    assert [m.split(" ", 2)[2] for m in probes.missed] == [
        "failed shell(pytest -x)",
        "human message",
        "unfinished instruction",
    ]
    assert probes.missed_after_retry == ()
    assert probes.repaired == ()
    assert probes.failing == ()
    assert [a.outcome for a in result.attempts] == ["ok", "ok"]


async def test_a_retry_that_still_misses_is_repaired_verbatim_and_recorded(fake, session):
    """What the retry still misses is appended word for word; the report names both the
    misses and the repair, and nothing fails once repaired."""
    b, cut = long_thread()
    fake.queue(Text("First try."), model="claude-haiku-4-5")
    fake.queue(Text('Second try: "Please do not touch the lexer."'), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.text.startswith("Second try")
    assert "IndexError: list index out of range" in result.text
    probes = result.probes
    assert probes is not None
    assert len(probes.missed) > len(probes.missed_after_retry) > 0
    assert probes.repaired == probes.missed_after_retry
    assert probes.failing == ()
    assert result.usage.output > 0


async def test_a_retry_that_misses_more_keeps_the_first_answer(fake, session):
    """A retry worse than the answer it retries is billed but not taken."""
    b, cut = long_thread()
    first = "Half: Please do not touch the lexer."
    fake.queue(Text(first), model="claude-haiku-4-5")
    fake.queue(Text("Nothing useful."), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    assert isinstance(result, Summary)
    assert result.text.startswith(first)
    assert result.probes is not None
    assert result.probes.missed_after_retry == result.probes.missed


async def test_a_retry_past_the_deadline_leaves_the_first_answer_repaired(fake, session):
    """The retry has only what is left of the deadline; when it misses it, the first answer
    is repaired and committed, the retry's timeout among the attempts."""
    b, cut = long_thread()
    fake.queue(Text("First try."), model="claude-haiku-4-5")
    fake.queue(Slow(Text("late"), chunk_delay=1.0, chunks=10), model="claude-haiku-4-5")
    started = time.monotonic()
    result = await curator(fake, session, deadline=2.0).summarize(b.view, cut, THREAD)
    assert time.monotonic() - started < 3.0
    assert isinstance(result, Summary)
    assert result.text.startswith("First try.")
    assert "Please do not touch the lexer." in result.text
    assert [a.outcome for a in result.attempts] == ["ok", "timeout"]
    assert result.probes is not None
    assert result.probes.failing == ()


async def test_the_window_records_what_the_probes_found(fake, session):
    """The committed window carries the probe report of the summary it holds."""
    b, cut = long_thread()
    fake.queue(Text("First try."), model="claude-haiku-4-5")
    fake.queue(Text("Second try."), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    window = carry_out(cut, result, b.seq, b.clock)
    assert window is not None
    assert isinstance(result, Summary)
    assert window.probes == result.probes
    assert window.probes is not None
    assert window.probes.missed


async def test_open_items_are_in_the_prompt_to_be_stated(fake, session):
    """An unjoined child is listed in the curator's prompt as still open, and probed."""
    b = ThreadBuilder()
    b.turn("Build the parser.", 100)
    b.spawn("child-9")
    for _ in range(200):
        b.reply("working through the parser", 400)
    b.user("Carry on.", 10)
    cut = Cut(decide(b).usage, "summary", "test", 1, forced=True)
    fake.queue(Text("Summary; child-9 is still running."), model="claude-haiku-4-5")
    result = await curator(fake, session).summarize(b.view, cut, THREAD)
    prompt = json.loads(sent_prompt(fake))["messages"][0]["content"]
    text = prompt if isinstance(prompt, str) else prompt[0]["text"]
    assert "Still open at this point" in text
    assert "- child child-9 not yet joined: child-9" in text
    assert isinstance(result, Summary)
    assert result.probes is not None
    assert result.probes.checked["open"] == 1
    assert "child child-9 not yet joined" not in result.probes.missed
