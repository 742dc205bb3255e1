"""List prices: which entry a model name finds, what a setting adds, and what tokens cost."""

from __future__ import annotations

import pytest

from condensate.prices import LIST_PRICES, Price, Tokens, cost, price_of


def test_a_dated_model_name_finds_its_longest_known_prefix():
    """``claude-sonnet-4-5-20250929`` is priced as claude-sonnet-4-5, not claude-sonnet-4,
    and the ``provider:`` part of a name is ignored."""
    assert price_of("claude-sonnet-4-5-20250929") == LIST_PRICES["claude-sonnet-4-5"]
    assert price_of("anthropic:claude-opus-4-5") == LIST_PRICES["claude-opus-4-5"]
    assert price_of("claude-opus-4-20250514") == LIST_PRICES["claude-opus-4"]


def test_a_model_the_table_does_not_know_has_no_price():
    """No entry, no prefix: None (shown as cost unknown), not a guess; ``gpt-5.5`` is not
    ``gpt-5`` (a prefix counts only up to a dash)."""
    assert price_of("gpt-5.5") is None
    assert price_of("openai:gpt-5.5") is None
    assert cost("gpt-5.5", Tokens(1_000, 0, 0, 100)) is None


def test_the_setting_adds_and_overrides_prices():
    """``CONDENSATE_MODEL_PRICES`` entries (with or without a provider) price models the table
    lacks and take precedence over it."""
    extra = {
        "openai:gpt-5.5": Price(input=2, output=16, cache_read=0.2, cache_write=2),
        "claude-sonnet-4-5": Price(input=1, output=1, cache_read=1, cache_write=1),
    }
    assert price_of("gpt-5.5", extra) == extra["openai:gpt-5.5"]
    assert price_of("claude-sonnet-4-5", extra) == extra["claude-sonnet-4-5"]


def test_anthropic_cache_prices_follow_its_ratios():
    """An Anthropic model's cache read is a tenth of its input price and a five-minute cache
    write 1.25 times it."""
    sonnet = LIST_PRICES["claude-sonnet-4-5"]
    assert sonnet.input == 3
    assert sonnet.cache_read == pytest.approx(0.3)
    assert sonnet.cache_write == pytest.approx(3.75)


def test_tokens_cost_each_class_at_its_price():
    """A million tokens of each class cost that class's price; the sum is rounded to
    micro-dollars."""
    tokens = Tokens(input=1_000_000, cache_write=1_000_000, cache_read=1_000_000, output=1_000_000)
    assert cost("claude-sonnet-4-5", tokens) == pytest.approx(3 + 3.75 + 0.3 + 15)
    assert cost("claude-haiku-4-5", Tokens(input=123)) == pytest.approx(0.000123)
