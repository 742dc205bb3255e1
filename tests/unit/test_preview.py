"""The compaction preview's costs (GET /threads/:id/compact): for each tier the tokens it
frees, the cached prefix it invalidates with the dollar cost of writing it again, what each
later call saves, and a summary's curator call."""

from __future__ import annotations

from dataclasses import replace

import pytest

from condensate.curator import SYSTEM_PROMPT
from condensate.events import ThinkingBlock
from condensate.planner import PlannerSettings
from condensate.preview import Preview, Pricing, preview
from condensate.prices import LongContext, Price, price_of
from condensate.testing.threads import ThreadBuilder
from condensate.tiers import TierSettings
from condensate.tokens import estimate
from tests.unit.test_planner import usage

SONNET = price_of("claude-sonnet-4-5")
HAIKU = price_of("claude-haiku-4-5")
PRICING = Pricing("anthropic:claude-sonnet-4-5", SONNET, "anthropic:claude-haiku-4-5", HAIKU, 4_000)
AFTER_READ = 3_000 + 30 + 3_000 + 30 + 100 + 50
"""The view's tokens from the first read on: the read, the make call and its result, the
small read's call and result, and the current message."""


def thread() -> ThreadBuilder:
    """brief 100 | read 3,000 | make 3,000 | a small read of 100 | the current message 50."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    b.call("shell", "make", 3_000)
    b.call("read", "src/b.py", 100)
    b.user("now", 50)
    return b


ONE_KEPT = PlannerSettings(tiers=TierSettings(keep_pairs=1))
"""The thread above is three results long: cheap tiers that keep only the newest clear the
two before it."""


def shown(b: ThreadBuilder, settings: PlannerSettings | None = None) -> Preview:
    return preview(b.view, usage(b), settings or ONE_KEPT, PRICING)


def test_microcompact_rewrites_everything_after_the_read_it_clears():
    """Clearing the old read invalidates the cache from it on; the next call writes that
    part again, less what the receipt freed, at Sonnet's cache-write price."""
    cost = shown(thread()).microcompact
    assert 2_900 < cost.freed < 3_000
    assert cost.invalidated == AFTER_READ
    assert cost.rewritten == AFTER_READ - cost.freed
    assert cost.rewrite_usd == round((AFTER_READ - cost.freed) * 3.75 / 1_000_000, 6)
    assert cost.saved_per_call_usd == round(cost.freed * 0.30 / 1_000_000, 6)
    assert cost.break_even_calls == -(-cost.rewrite_usd // cost.saved_per_call_usd)
    assert cost.curator is None


def test_a_cut_names_the_signed_thinking_after_its_first_change():
    """Thinking bound to what came before it is taken out after the first change: clearing
    the first read costs the two turns after it their thinking (the read's own turn, before
    the change, keeps its); an unchanged view costs none."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000, thinking=(ThinkingBlock(text="", signature="s1"),))
    b.call("shell", "make", 3_000, thinking=(ThinkingBlock(text="why make", signature="s2"),))
    b.call("read", "src/b.py", 100, thinking=(ThinkingBlock(text="", signature="s3"),))
    b.user("now", 50)
    micro = shown(b).microcompact.thinking
    assert (micro.blocks, micro.tokens) == (2, estimate("why make"))
    assert shown(thread()).microcompact.thinking.blocks == 0
    assert shown(b).microcompact.as_answer().thinking_dropped.blocks == 2


def test_collapse_frees_the_command_too_from_the_same_point():
    """Collapse also clears the make output: more freed, the same prefix invalidated."""
    b = thread()
    micro, collapse = shown(b).microcompact, shown(b).collapse
    assert collapse.freed > micro.freed + 2_900
    assert collapse.invalidated == AFTER_READ
    assert collapse.rewritten == AFTER_READ - collapse.freed


def test_a_tier_that_clears_nothing_costs_nothing():
    """Nothing cleared: nothing invalidated, nothing to pay off."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.user("now", 50)
    cost = shown(b).microcompact
    assert (cost.freed, cost.invalidated, cost.rewritten, cost.rewrite_usd) == (0, 0, 0, 0.0)
    assert cost.break_even_calls is None


def test_a_summary_invalidates_from_the_first_entry_it_replaces_and_costs_a_curator_call():
    """The brief stays cached; from the first replaced entry on everything is written again;
    the curator reads its system prompt and the summary prompt, and may write its budget."""
    result = shown(thread())
    summary = result.summary
    assert summary is not None
    assert result.summary_possible
    assert summary.invalidated == 30 + AFTER_READ
    assert summary.rewritten == max(30 + AFTER_READ - summary.freed, 0)
    curator = summary.curator
    assert curator is not None
    assert curator.model == "anthropic:claude-haiku-4-5"
    assert curator.input > estimate(SYSTEM_PROMPT) + 50
    assert curator.output == 4_000
    assert curator.usd == round((curator.input * 1.0 + 4_000 * 5.0) / 1_000_000, 6)


def test_a_restarting_engine_s_summary_rewrites_the_whole_prompt():
    """On an engine that restarts its session for a summary nothing stays cached, the
    baseline included."""
    b = thread()
    restarting = replace(PlannerSettings(), restarts=True)
    summary = shown(b, restarting).summary
    assert summary is not None
    measured = usage(b).measured
    assert summary.invalidated == measured
    assert summary.rewritten == measured - summary.freed


def test_an_unpriced_model_shows_no_dollars():
    """A model without a known price costs tokens, not dollars."""
    b = thread()
    unpriced = Pricing("chat:local", None, "chat:local", None, 4_000)
    cost = preview(b.view, usage(b), ONE_KEPT, unpriced)
    assert cost.microcompact.rewrite_usd is None
    assert cost.microcompact.break_even_calls is None
    assert cost.summary is not None
    assert cost.summary.curator is not None
    assert cost.summary.curator.usd is None
    assert cost.microcompact.rewritten > 0


@pytest.mark.parametrize("tier", ["microcompact", "collapse", "summary"])
def test_the_json_names_every_figure(tier: str):
    """The API shows each tier's cost under ``cost``, numbers and all."""
    data = shown(thread()).as_answer().dump()[tier]
    cost = data["cost"]
    assert cost["freed"] == data["freed"]
    assert cost["rewrittenTokens"] == max(cost["invalidatedTokens"] - cost["freed"], 0)
    assert cost["rewriteUsd"] == round(cost["rewrittenTokens"] * 3.75 / 1_000_000, 6)
    assert cost["savedPerCallUsd"] == round(cost["freed"] * 0.30 / 1_000_000, 6)
    assert ("curator" in cost) == (tier == "summary")


def test_an_openai_model_without_a_write_price_rewrites_at_its_input_price():
    """Before GPT-5.6 OpenAI bills no cache writes: the prefix written again after a cut is
    ordinary input (gpt-5.5: $5 a million), not "no price"."""
    b = thread()
    gpt = Pricing("openai:gpt-5.5", price_of("gpt-5.5"), "openai:gpt-5.5", None, 4_000)
    cost = preview(b.view, usage(b), PlannerSettings(), gpt).microcompact
    assert cost.rewrite_usd == round(cost.rewritten * 5 / 1_000_000, 6)


def test_a_cut_below_a_long_context_tier_prices_the_rewrite_at_the_short_rates():
    """The next call's prompt (now less what the cut frees) decides the rewrite's rates;
    what each later call saves is read at the rates the prompt pays now."""
    b = thread()
    now = usage(b).measured
    tiered = Price(
        input=1,
        output=1,
        cache_read=0.1,
        cache_write=1.25,
        long_context=LongContext(above=now - 1, input=2, output=1),
    )
    pricing = Pricing("m", tiered, "m", tiered, 4_000)
    cost = preview(b.view, usage(b), PlannerSettings(), pricing).microcompact
    assert cost.rewrite_usd == round(cost.rewritten * 1.25 / 1_000_000, 6)
    assert cost.saved_per_call_usd == round(cost.freed * 0.2 / 1_000_000, 6)


def test_a_thread_that_writes_for_an_hour_rewrites_at_the_one_hour_price():
    """Anthropic bills a one-hour write at 2x input: a thread whose calls write for an hour
    pays Sonnet 4.5's $6, not $3.75, to write the prefix again."""
    b = thread()
    hourly = replace(PRICING, one_hour_writes=True)
    cost = preview(b.view, usage(b), PlannerSettings(), hourly).microcompact
    assert cost.rewrite_usd == round(cost.rewritten * 6.0 / 1_000_000, 6)
