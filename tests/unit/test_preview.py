"""The compaction preview's costs (GET /threads/:id/compact): for each tier the tokens it
frees, the cached prefix it invalidates under the provider's cache rules with the dollar cost
of writing it again, what each later call saves, the thinking it drops, what the agent would
have to fetch again, and a summary's curator call."""

from __future__ import annotations

from dataclasses import replace

import pytest

from condensate import api
from condensate.core.planner import PlannerSettings
from condensate.core.preview import Preview, Pricing, preview
from condensate.core.prices import LongContext, Price, price_of
from condensate.core.refetch import RECENT_CALLS, Refetch
from condensate.core.summary import SYSTEM_PROMPT
from condensate.core.tiers import TierSettings
from condensate.core.tokens import estimate
from condensate.events import ThinkingBlock, Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder
from tests.unit.test_planner import usage

SONNET = price_of("claude-sonnet-4-5")
HAIKU = price_of("claude-haiku-4-5")
PRICING = Pricing("anthropic:claude-sonnet-4-5", SONNET, "anthropic:claude-haiku-4-5", HAIKU, 4_000)
AFTER_READ = 3_000 + 30 + 3_000 + 30 + 100 + 50
"""The view's tokens from the first read on: the read, the make call and its result, the
small read's call and result, and the current message."""
AFTER_CALL = 30 + AFTER_READ
"""... and from the call that made it on: on Anthropic the cache is read up to the end of the
request that got that call, the last breakpoint before the read's result."""


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
    return preview(b.view, usage(b), settings or ONE_KEPT, PRICING, now=b.clock)


def test_microcompact_on_anthropic_rewrites_from_the_breakpoint_before_the_read():
    """Clearing the old read invalidates the cache from the end of the request before the
    call that made it (the breakpoint the lookback finds), not from the read: the next call
    writes the call and all after it again, less what the receipt freed, at Sonnet's
    cache-write price."""
    b = thread()
    cost = shown(b).microcompact
    assert 2_900 < cost.freed < 3_000
    assert cost.rewrite.rule == "anthropic-breakpoints"
    call, read = b.view.entries[1].seq, b.view.entries[2].seq
    assert (cost.rewrite.first_change, cost.rewrite.start) == (read, call)
    assert cost.rewrite.read == b.baseline + 100
    assert cost.invalidated == AFTER_CALL
    assert cost.rewritten == AFTER_CALL - cost.freed
    assert cost.rewrite_usd == round((AFTER_CALL - cost.freed) * 3.75 / 1_000_000, 6)
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
    assert api.cost_answer(shown(b).microcompact).thinking_dropped.blocks == 2


def test_collapse_frees_the_command_too_from_the_same_point():
    """Collapse also clears the make output: more freed, the same prefix invalidated."""
    b = thread()
    micro, collapse = shown(b).microcompact, shown(b).collapse
    assert collapse.freed > micro.freed + 2_900
    assert collapse.invalidated == AFTER_CALL
    assert collapse.rewritten == AFTER_CALL - collapse.freed


def test_an_openai_thread_rewrites_from_the_128_token_step_before_the_change():
    """OpenAI reads the prefix the next request shares with the last one, in 128-token
    steps: 2,000 + 100 + 30 tokens before the read are read as 2,048; the rest is written
    again (the brief's last 52 tokens too)."""
    b = thread()
    gpt = replace(PRICING, model="openai:gpt-6.2-sol", price=price_of("gpt-6.2-sol"))
    cost = preview(b.view, usage(b), ONE_KEPT, gpt, now=b.clock).microcompact
    assert cost.rewrite.rule == "openai-prefix"
    assert cost.rewrite.read == 2_048
    assert cost.rewrite.start == b.view.entries[0].seq
    assert cost.invalidated == 2_000 + 100 + AFTER_CALL - 2_048


def test_an_unknown_provider_keeps_the_old_rule_and_says_so():
    """A model whose provider's cache rules are not known: everything from the first change
    on is written again, and the preview names the rule it fell back to."""
    b = thread()
    local = replace(PRICING, model="chat:qwen3-coder")
    cost = preview(b.view, usage(b), ONE_KEPT, local, now=b.clock).microcompact
    assert cost.rewrite.rule == "first-change"
    assert cost.invalidated == AFTER_READ
    assert cost.rewrite.start == cost.rewrite.first_change
    assert api.cost_answer(cost).cache_rule == "first-change"


def test_a_breakpoint_older_than_five_minutes_is_not_read():
    """Ten minutes went by after the read's step: the entry at the request end before it
    expired (an entry lives five minutes after its last read), so only the system prompt is
    read; a thread that writes for an hour still reads it."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    b.call("shell", "make", 3_000)
    b.tick(600)
    b.call("read", "src/b.py", 100)
    b.user("now", 50)
    assert shown(b).microcompact.rewrite.read == b.baseline
    hourly = replace(PRICING, one_hour_writes=True)
    cost = preview(b.view, usage(b), ONE_KEPT, hourly, now=b.clock).microcompact
    assert cost.rewrite.read == b.baseline + 100


def test_requests_before_the_last_window_count_as_not_cached():
    """A window changed the view after the make: the log does not say which of the entries
    the requests before it wrote the provider still holds, so a cut reads only what the
    requests since then cached (none before the old read: the system prompt)."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    _, make = b.call("shell", "make", 3_000)
    trigger = WindowTrigger(used=0, line=0, ceiling=0, window=0, freed=0, reason="test")
    b.add(
        Window(at=b.tick(), window_kind="collapse", cut=b.seq, cleared=(make.seq,), trigger=trigger)
    )
    b.call("read", "src/c.py", 3_000)
    b.call("read", "src/d.py", 3_000)
    b.user("next", 50)
    cost = shown(b).microcompact
    assert cost.rewrite.first_change == b.view.entries[2].seq
    assert cost.rewrite.read == b.baseline


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
    assert (summary.rewrite.rule, summary.rewrite.read) == ("new-session", 0)


def test_an_unpriced_model_shows_no_dollars():
    """A model without a known price costs tokens, not dollars."""
    b = thread()
    unpriced = Pricing("chat:local", None, "chat:local", None, 4_000)
    cost = preview(b.view, usage(b), ONE_KEPT, unpriced, now=b.clock)
    assert cost.microcompact.rewrite_usd is None
    assert cost.microcompact.break_even_calls is None
    assert cost.summary is not None
    assert cost.summary.curator is not None
    assert cost.summary.curator.usd is None
    assert cost.microcompact.rewritten > 0


@pytest.mark.parametrize("tier", ["microcompact", "collapse", "summary"])
def test_the_json_names_every_figure(tier: str):
    """The API shows each tier's cost under ``cost``, numbers and all."""
    data = api.preview_answer(shown(thread())).dump()[tier]
    cost = data["cost"]
    assert cost["freed"] == data["freed"]
    assert cost["rewrittenTokens"] == max(cost["invalidatedTokens"] - cost["freed"], 0)
    assert cost["rewriteUsd"] == round(cost["rewrittenTokens"] * 3.75 / 1_000_000, 6)
    assert cost["savedPerCallUsd"] == round(cost["freed"] * 0.30 / 1_000_000, 6)
    assert ("curator" in cost) == (tier == "summary")
    assert cost["cacheRule"] == "anthropic-breakpoints"
    assert cost["readTokens"] == 2_000 + 100
    assert cost["rewriteFromSeq"] <= cost["firstChangeSeq"]
    assert set(cost["thinkingDropped"]) == {"blocks", "tokens"}
    assert cost["fetchAgain"] == {"results": 0, "tokens": 0, "items": []}


def test_an_openai_model_without_a_write_price_rewrites_at_its_input_price():
    """Before GPT-5.6 OpenAI bills no cache writes: the prefix written again after a cut is
    ordinary input (gpt-5.5: $5 a million), not "no price"."""
    b = thread()
    gpt = Pricing("openai:gpt-5.5", price_of("gpt-5.5"), "openai:gpt-5.5", None, 4_000)
    cost = preview(b.view, usage(b), ONE_KEPT, gpt, now=b.clock).microcompact
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
    cost = preview(b.view, usage(b), ONE_KEPT, pricing, now=b.clock).microcompact
    assert cost.rewrite_usd == round(cost.rewritten * 1.25 / 1_000_000, 6)
    assert cost.saved_per_call_usd == round(cost.freed * 0.2 / 1_000_000, 6)


def test_a_thread_that_writes_for_an_hour_rewrites_at_the_one_hour_price():
    """Anthropic bills a one-hour write at 2x input: a thread whose calls write for an hour
    pays Sonnet 4.5's $6, not $3.75, to write the prefix again."""
    b = thread()
    hourly = replace(PRICING, one_hour_writes=True)
    cost = preview(b.view, usage(b), ONE_KEPT, hourly, now=b.clock).microcompact
    assert cost.rewrite_usd == round(cost.rewritten * 6.0 / 1_000_000, 6)


# -- what the agent would have to fetch again ------------------------------------------------


def working() -> ThreadBuilder:
    """brief | read src/a.py 3,000 | make 3,000 | edit src/a.py | read src/b.py | now: the
    agent edits the file it read two calls before."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    b.call("shell", "make", 3_000)
    b.call("edit", "src/a.py", 50)
    b.call("read", "src/b.py", 100)
    b.user("now", 50)
    return b


def test_a_cleared_read_of_a_file_the_agent_edits_later_is_fetched_again():
    """Collapse clears the read of src/a.py and the make output; the agent edited src/a.py
    two calls after the read, so the read is to fetch again (named by the edit's call); the
    make output, which no later call names, is not."""
    b = working()
    read, edit = b.view.entries[2], b.view.entries[5]
    cost = shown(b).collapse
    assert cost.freed > 5_900
    assert cost.refetch == (Refetch(read.seq, "read", "src/a.py", 3_000, edit.seq),)
    again = api.cost_answer(cost).fetch_again
    assert (again.results, again.tokens, again.items[0].named_by) == (1, 3_000, edit.seq)


def test_a_summary_counts_the_results_it_replaces():
    """The summary replaces the read of src/a.py, which the later edit names."""
    b = working()
    summary = shown(b).summary
    assert summary is not None
    assert [r.target for r in summary.refetch] == ["src/a.py"]


def test_a_file_the_agent_read_again_and_still_holds_is_not_fetched_again():
    """The old read of src/a.py is cleared as superseded, but the later read of it stays
    shown: the agent holds the file, nothing to fetch again."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    b.call("shell", "make", 3_000)
    b.call("read", "src/a.py", 3_000)
    b.call("edit", "src/a.py", 50)
    b.user("now", 50)
    cost = shown(b, PlannerSettings()).microcompact
    assert cost.freed > 2_900
    assert cost.refetch == ()


def test_several_cleared_reads_of_one_file_are_fetched_once_as_the_latest():
    """Both reads of src/a.py go; the later edit names it: one result to fetch again, the
    newer read."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    _, newer = b.call("read", "src/a.py", 3_000)
    b.call("shell", "make", 3_000)
    b.call("edit", "src/a.py", 50)
    b.user("now", 50)
    cost = shown(b).microcompact
    assert [r.seq for r in cost.refetch] == [newer.seq]


@pytest.mark.parametrize(("since", "fetched"), [(RECENT_CALLS - 1, 1), (RECENT_CALLS, 0)])
def test_only_the_last_12_calls_count_as_the_agent_s_current_work(since: int, fetched: int):
    """The edit that names src/a.py is within the last 12 model calls: the read is to fetch
    again; one call earlier, it is history."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    b.call("read", "src/a.py", 3_000)
    b.call("edit", "src/a.py", 50)
    for i in range(since):
        b.call("read", f"src/other{i}.py", 100)
    b.user("now", 50)
    assert RECENT_CALLS == 12
    assert len(shown(b).collapse.refetch) == fetched


def test_a_result_a_later_message_cites_by_seq_is_fetched_again():
    """The agent wrote "the make output at seq N": clearing that output costs a fetch."""
    b = ThreadBuilder()
    b.turn("Fix the build.", 100)
    _, make = b.call("shell", "make", 3_000)
    cites, _ = b.call("read", "src/b.py", 100, text=f"As the make output at seq {make.seq} says")
    b.call("read", "src/c.py", 100)
    b.user("now", 50)
    (again,) = shown(b).collapse.refetch
    assert (again.seq, again.named_by) == (make.seq, cites.seq)
