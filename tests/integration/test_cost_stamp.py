"""Each call's cost, stamped by the runtime when its count is logged, follows the provider's
billing (one-hour writes, a server-side compaction, the model's own read price, the setting's
prices); the thread's costs show the billed classes; a compaction preview prices a rewrite at
the write lifetime the thread's calls use."""

from __future__ import annotations

from pathlib import Path

import pytest

from condensate.core.prices import LIST_PRICES, Tokens
from condensate.events import ModelUsage, now_utc
from condensate.http.server import costs_answer
from condensate.runtime import asks
from condensate.testing.fake_model import FakeModelServer, Text
from tests.integration.harness import runtime_on
from tests.integration.test_runtime import idle_thread, running

OPUS = "claude-opus-5-5"


def call(**counts: int) -> ModelUsage:
    return ModelUsage(at=now_utc(), model=OPUS, **counts)


async def test_a_calls_stamp_bills_one_hour_writes_compaction_and_its_read_price(tmp_path):
    """A gateway count on Opus 5.5 with one-hour writes and a compaction is stamped at $4
    input, $5 and $8 writes, $0.20 reads, $20 output and the compaction at $4 / $20."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        counted = call(
            input=1_000,
            cache_read=50_000,
            cache_write=3_000,
            cache_write_1h=2_000,
            output=500,
            compaction_input=100_000,
            compaction_output=2_000,
        )
        await runtime.record_usage(thread.thread_id, counted)
        events = [s.event for s in await runtime.log.events(thread.thread_id)]
    (stamped,) = [e for e in events if isinstance(e, ModelUsage) and e.model == OPUS]
    expected = (
        1_000 * 4 + 50_000 * 0.20 + 1_000 * 5 + 2_000 * 8 + 500 * 20 + 100_000 * 4 + 2_000 * 20
    ) / 1_000_000
    assert stamped.usd == pytest.approx(expected)
    assert stamped.usd == round(Tokens.of(counted).cost(LIST_PRICES[OPUS]), 6)


async def test_a_model_the_setting_prices_is_stamped_at_the_settings_price(tmp_path):
    """``CONDENSATE_PRICES`` prices a model the table lacks (here through the settings the
    runtime was given)."""
    prices = {"anthropic:claude-foo-9": {"input": 1, "output": 2}}
    async with (
        FakeModelServer() as fake,
        runtime_on(tmp_path, fake, overrides={"prices": prices}) as runtime,
    ):
        fake.queue(Text("done"))
        thread = await idle_thread(runtime, tmp_path)
        counted = ModelUsage(at=now_utc(), model="claude-foo-9", input=1_000, output=100)
        await runtime.record_usage(thread.thread_id, counted)
        events = [s.event for s in await runtime.log.events(thread.thread_id)]
    (stamped,) = [e for e in events if isinstance(e, ModelUsage) and e.model == "claude-foo-9"]
    assert stamped.usd == pytest.approx((1_000 * 1 + 100 * 2) / 1_000_000)


async def test_the_threads_costs_show_one_hour_writes_and_compaction(tmp_path):
    """``GET /threads/:id``'s costs count the one-hour part of the writes and the
    compaction's tokens, in all and per session."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        counted = call(input=10, cache_write=300, cache_write_1h=200, compaction_input=7)
        await runtime.record_usage(thread.thread_id, counted.model_copy(update={"session": "s1"}))
        costs = costs_answer(thread.projection).dump()
    assert costs["tokens"]["cacheWrite1h"] == 200
    assert costs["tokens"]["compactionInput"] == 7
    (opus,) = [s for s in costs["sessions"] if s["model"] == f"anthropic:{OPUS}"]
    assert opus["tokens"]["cacheWrite1h"] == 200


async def test_a_thread_that_writes_for_an_hour_has_its_rewrites_priced_so(tmp_path: Path):
    """The preview's write price is the lifetime the thread's calls on its model mostly
    wrote: one-hour writes past half of them make a rewrite a one-hour write."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        model = thread.spec.model.partition(":")[2]
        assert not asks.pricing(runtime, thread).one_hour_writes
        # The first turn's calls wrote five-minute entries: write more than them for an hour.
        written = sum(b.cache_write for b in thread.projection.billed.values())
        hour = written + 1
        hourly = ModelUsage(
            at=now_utc(), model=model, input=0, cache_write=hour, cache_write_1h=hour
        )
        await runtime.record_usage(thread.thread_id, hourly)
        assert asks.pricing(runtime, thread).one_hour_writes
