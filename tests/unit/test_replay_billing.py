"""A replay's bill: the sums by class, and their cost with each call priced on its own."""

from __future__ import annotations

import pytest

from condensate.prices import LongContext, Price
from condensate.providers.types import Usage
from condensate.replay.billing import Bill


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
