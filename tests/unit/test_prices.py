"""List prices: which entry a model name finds, what the setting adds, and what a call costs
under the providers' billing rules (one-hour writes, per-model read prices, long-context
tiers, OpenAI cache writes, server-side compaction)."""

from __future__ import annotations

import json

import pytest

from condensate.core.prices import LIST_PRICES, LongContext, Price, Tokens, cost, no_price, price_of
from condensate.errors import ConfigError
from condensate.events import ModelUsage, now_utc
from condensate.settings import load_settings

MILLION = 1_000_000


def test_a_dated_model_name_finds_its_snapshot_entry():
    """``claude-sonnet-4-5-20250929`` is priced as claude-sonnet-4-5 and OpenAI's
    ``gpt-4.1-2025-04-14`` as gpt-4.1; the ``provider:`` part of a name is ignored."""
    assert price_of("claude-sonnet-4-5-20250929") == LIST_PRICES["claude-sonnet-4-5"]
    assert price_of("anthropic:claude-opus-4-5") == LIST_PRICES["claude-opus-4-5"]
    assert price_of("claude-opus-4-20250514") == LIST_PRICES["claude-opus-4"]
    assert price_of("gpt-4.1-2025-04-14") == LIST_PRICES["gpt-4.1"]


def test_a_model_the_table_does_not_know_has_no_price():
    """No entry: None (shown as "no price"), never a neighbour's price: ``claude-opus-5-7``
    is not Opus 5, ``gpt-5.6-nova`` not gpt-5.6, ``gpt-5.7`` not gpt-5."""
    for unknown in ("claude-opus-5-7", "gpt-5.6-nova", "openai:gpt-5.7", "chat:qwen3-coder"):
        assert price_of(unknown) is None, unknown
    assert cost("gpt-5.7", Tokens(1_000, 0, 0, 100)) is None


def test_every_model_the_pinned_clis_use_or_list_has_a_price():
    """Claude Code's default and the current Claude models, and every model Codex 0.171.0
    lists (its bundled catalog), are in the table; ``gpt-5.6`` is gpt-5.6-sol's alias."""
    listed = [
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
        "claude-fable-5-1",
        "claude-fable-5-2",
        "gpt-5.5",
        "gpt-5.6-sol",
        "gpt-5.6-terra",
        "gpt-5.6-luna",
        "gpt-6-sol",
        "gpt-6-astra",
        "gpt-6-luna",
        "gpt-6.1-sol",
        "gpt-6.1-terra",
        "gpt-6.2-sol",
        "gpt-6.2-astra",
    ]
    assert [m for m in listed if price_of(m) is None] == []
    assert price_of("gpt-5.6") == LIST_PRICES["gpt-5.6-sol"]


def test_the_setting_adds_and_overrides_prices():
    """``CONDENSATE_PRICES`` entries (with or without a provider) price models the table
    lacks and take precedence over it."""
    extra = {
        "openai:gpt-7": Price(input=2, output=16, cache_read=0.2),
        "claude-sonnet-4-5": Price(input=1, output=1, cache_read=1, cache_write=1),
    }
    assert price_of("gpt-7", extra) == extra["openai:gpt-7"]
    assert price_of("claude-sonnet-4-5", extra) == extra["claude-sonnet-4-5"]


def test_a_price_given_only_input_and_output_bills_every_cache_class_as_input():
    """A price without cache prices: a read and a write of either lifetime cost what an
    uncached input token costs (the provider bills them as ordinary input)."""
    plain = Price(input=2, output=8)
    tokens = Tokens(
        input=MILLION, cache_write=2 * MILLION, cache_read=MILLION, cache_write_1h=MILLION
    )
    assert tokens.cost(plain) == pytest.approx(2 * 4)


def test_a_one_hour_write_price_left_out_is_the_five_minute_one():
    """``cache_write_1h`` defaults to ``cache_write``: a setting that names only one write
    price bills both lifetimes at it."""
    rates = Price(input=2, output=8, cache_write=2.5).rates(0)
    assert rates.cache_write_1h == rates.cache_write == 2.5


def test_one_hour_writes_cost_twice_the_input_price_on_anthropic():
    """Of the written tokens, those written for an hour cost 2x input and the rest 1.25x
    (Anthropic's pricing page): on Opus 5.5, $8 and $5 a million."""
    tokens = Tokens(cache_write=3 * MILLION, cache_write_1h=MILLION)
    assert cost("claude-opus-5-5", tokens) == pytest.approx(2 * 5 + 8)


def test_cache_reads_cost_the_models_own_price_not_a_tenth():
    """Opus 5.5 reads at $0.20 (0.05x), Fable 5.1 at $0.25 (0.025x), Opus 5 at 0.1x
    (Anthropic's pricing page)."""
    read = Tokens(cache_read=MILLION)
    assert cost("claude-opus-5-5", read) == pytest.approx(0.20)
    assert cost("claude-fable-5-1", read) == pytest.approx(0.25)
    assert cost("claude-opus-5", read) == pytest.approx(0.50)


def test_a_haiku_5_5_prompt_over_100k_tokens_pays_five_times_for_the_whole_call():
    """Haiku 5.5's overview page: prompts over 100,000 tokens (cache reads and writes
    counted) pay $0.50 input and $2.50 output instead of $0.10 and $0.50, on every token."""
    short = Tokens(input=60_000, cache_read=40_000, output=1_000)
    long = Tokens(input=60_000, cache_read=40_001, output=1_000)
    haiku = LIST_PRICES["claude-haiku-5-5"]
    assert short.cost(haiku) * MILLION == pytest.approx(60_000 * 0.10 + 40_000 * 0.01 + 500)
    assert long.cost(haiku) * MILLION == pytest.approx(60_000 * 0.50 + 40_001 * 0.05 + 2_500)


def test_an_openai_request_over_272k_input_tokens_doubles_input_and_cache_and_output_1_5x():
    """gpt-6.2-sol's model page: over 272K input tokens, input and cache rates double and
    output costs 1.5x, for the full request."""
    tokens = Tokens(input=100_000, cache_read=172_001, cache_write=1_000, output=10_000)
    assert tokens.prompt == 273_001
    expected = (100_000 * 4 + 172_001 * 0.20 + 1_000 * 5 + 10_000 * 15) / MILLION
    assert tokens.cost(LIST_PRICES["gpt-6.2-sol"]) == pytest.approx(expected)


def test_gpt_5_6_and_later_bill_cache_writes_at_1_25x_input():
    """OpenAI's prompt-caching guide: from GPT-5.6 on, writes cost 1.25x the uncached input
    rate (gpt-6.2-sol: $2.50 for $2 input)."""
    written = Tokens(cache_write=100_000)
    assert cost("gpt-6.2-sol", written) == pytest.approx(100_000 * 2.50 / MILLION)
    assert cost("gpt-5.6-luna", written) == pytest.approx(100_000 * 0.25 / MILLION)


def test_openai_models_before_gpt_5_6_have_no_write_price():
    """The same guide: writes have no fee before GPT-5.6, so a written token on gpt-5.5 is
    an ordinary input token."""
    assert LIST_PRICES["gpt-5.5"].cache_write is None
    assert cost("gpt-5.5", Tokens(cache_write=MILLION)) == cost("gpt-5.5", Tokens(input=MILLION))


def test_server_side_compaction_is_billed_at_the_models_input_and_output_prices():
    """Anthropic's compaction pages: the ``compaction`` iteration is billed like a call,
    beside the reply's own tokens (Opus 5.5: $4 in, $20 out)."""
    tokens = Tokens(input=1_000, output=100, compaction_input=180_000, compaction_output=3_500)
    assert tokens.cost(LIST_PRICES["claude-opus-5-5"]) * MILLION == pytest.approx(
        1_000 * 4 + 100 * 20 + 180_000 * 4 + 3_500 * 20
    )


def test_a_compaction_is_tiered_on_its_own_prompt():
    """The summarizing call is a call of its own: a short reply after a long compaction
    pays the long-context rates only for the compaction's tokens."""
    price = Price(input=1, output=2, long_context=LongContext(above=100, input=2, output=3))
    tokens = Tokens(input=10, output=1, compaction_input=200, compaction_output=5)
    assert tokens.cost(price) * MILLION == pytest.approx(10 * 1 + 1 * 2 + 200 * 2 + 5 * 6)


def test_tokens_of_a_logged_call_carry_every_billed_class():
    """``Tokens.of`` reads a ``model.usage`` whole: one-hour writes and compaction too."""
    usage = ModelUsage(
        at=now_utc(),
        input=1,
        cache_read=2,
        cache_write=3,
        output=4,
        cache_write_1h=2,
        compaction_input=5,
        compaction_output=6,
    )
    assert Tokens.of(usage) == Tokens(1, 3, 2, 4, 2, 5, 6)


def test_tokens_cost_each_class_at_its_price():
    """A million tokens of each class cost that class's price; the sum is rounded to
    micro-dollars."""
    tokens = Tokens(input=MILLION, cache_write=MILLION, cache_read=MILLION, output=MILLION)
    assert cost("claude-sonnet-4-5", tokens) == pytest.approx(3 + 3.75 + 0.3 + 15)
    assert cost("claude-haiku-4-5", Tokens(input=123)) == pytest.approx(0.000123)


def test_an_unpriced_model_says_so_and_how_to_price_it():
    """Where a cost would be, one line names the model and the setting."""
    assert no_price("claude-foo-9") == "no price for claude-foo-9 (set CONDENSATE_PRICES)"


def test_condensate_prices_supplies_a_price_with_only_input_and_output(monkeypatch):
    """``CONDENSATE_PRICES`` (JSON, per model) prices a model the table lacks; a price needs
    only ``input`` and ``output``, and a tier can be given too."""
    given = {
        "openai:gpt-7": {"input": 3, "output": 12},
        "claude-foo-9": {
            "input": 1,
            "output": 5,
            "cache_read": 0.1,
            "long_context": {"above": 200_000, "input": 2, "output": 1.5},
        },
    }
    monkeypatch.setenv("CONDENSATE_PRICES", json.dumps(given))
    prices = load_settings().prices
    assert price_of("openai:gpt-7", prices) == Price(input=3, output=12)
    foo = price_of("claude-foo-9", prices)
    assert foo is not None
    assert foo.long_context == LongContext(above=200_000, input=2, output=1.5)


def test_condensate_model_prices_is_still_read_and_the_new_name_wins(monkeypatch):
    """The old name ``CONDENSATE_MODEL_PRICES`` still sets the prices; with both set,
    ``CONDENSATE_PRICES`` is the one read."""
    monkeypatch.setenv("CONDENSATE_MODEL_PRICES", json.dumps({"gpt-7": {"input": 1, "output": 2}}))
    assert load_settings().prices == {"gpt-7": Price(input=1, output=2)}
    monkeypatch.setenv("CONDENSATE_PRICES", json.dumps({"gpt-7": {"input": 5, "output": 6}}))
    assert load_settings().prices == {"gpt-7": Price(input=5, output=6)}


def test_a_price_without_output_is_refused_naming_the_variable(monkeypatch):
    """A price missing a required field is one startup error naming CONDENSATE_PRICES."""
    monkeypatch.setenv("CONDENSATE_PRICES", json.dumps({"gpt-7": {"input": 1}}))
    with pytest.raises(ConfigError, match="CONDENSATE_PRICES"):
        load_settings()
