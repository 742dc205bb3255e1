"""A replay's bill: the sums by class, and their cost with each call priced on its own."""

from __future__ import annotations

import pytest

from condensate.core.messages import Usage
from condensate.core.prices import LIST_PRICES, LongContext, Price
from condensate.replay.billing import Bill, default_prices


def test_each_call_is_priced_at_its_own_prompts_tier():
    """A long call and a short one: only the long one pays the long-context rates (a price
    on the sums would put both calls past the mark)."""
    price = Price(input=1, output=1, long_context=LongContext(above=1_000, input=2, output=3))
    bill = Bill()
    bill.add(Usage(input=800, output=10))
    bill.add(Usage(input=1_200, output=10))
    assert (bill.uncached, bill.output) == (2_000, 20)
    assert bill.cost(price) * 1_000_000 == pytest.approx(800 + 10 + 1_200 * 2 + 10 * 3)


def test_a_merged_bill_keeps_every_call():
    """The thread's calls and the curator's, merged, cost what they cost apart."""
    price = Price(input=1, output=1, long_context=LongContext(above=1_000, input=2, output=3))
    main, summaries = Bill(), Bill()
    main.add(Usage(input=1_500))
    summaries.add(Usage(input=500, output=100), output=50)
    merged = main.merged(summaries)
    assert merged.calls == 2
    assert merged.cost(price) == pytest.approx(main.cost(price) + summaries.cost(price))
    assert summaries.output == 50


def test_a_replay_is_priced_as_its_recordings_model_else_opus_5_5():
    """The default prices are the recording's model's (the setting's first), and Claude
    Opus 5.5's, Claude Code's default model, for a model without a price."""
    assert default_prices("openai:gpt-6.2-sol") == LIST_PRICES["gpt-6.2-sol"]
    mine = {"chat:local": Price(input=1, output=1)}
    assert default_prices("chat:local", mine) == mine["chat:local"]
    assert default_prices("chat:unknown") == LIST_PRICES["claude-opus-5-5"]
    assert default_prices() == LIST_PRICES["claude-opus-5-5"]
