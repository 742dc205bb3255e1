"""What model calls cost: ``Bill`` sums the tokens billed, ``Prices`` turns them into USD,
each call at the rates its own prompt pays (``condensate.core.prices``).

Cost weights (Anthropic's price ratios to base input): uncached input 1.0, cache write 1.25,
cache read 0.1. ``weighted_input`` is the sum of the three counts times their weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from condensate.core.messages import Usage
from condensate.core.prices import Price, Tokens, price_of

WEIGHTS = {"uncached": 1.0, "cache_write": 1.25, "cache_read": 0.1}
"""Anthropic's price ratios to base input tokens; ``weighted_input`` uses them."""


Prices = Price
"""USD per million tokens by class (``condensate.core.prices``)."""


DEFAULT_MODEL = "claude-opus-5-5"
"""What a replay is priced as when its recording's model has no price: the model Claude Code
2.1.332 uses by default."""


def default_prices(model: str = DEFAULT_MODEL, extra: Mapping[str, Price] | None = None) -> Price:
    """A replay's prices unless told otherwise: the list price of ``model`` (the recording's;
    ``extra``: ``CONDENSATE_PRICES``), else Claude Opus 5.5's."""
    found = price_of(model, extra) or price_of(DEFAULT_MODEL)
    assert found is not None
    return found


@dataclass
class Bill:
    """Tokens billed over some calls."""

    calls: int = 0
    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    each: list[Tokens] = field(default_factory=list, repr=False)
    """Every call's tokens: a price may depend on the call's prompt (a long-context tier),
    so the sums alone cannot be priced."""

    def add(self, usage: Usage, output: int | None = None) -> None:
        tokens = Tokens.of(usage)
        if output is not None:
            tokens = replace(tokens, output=output)
        self.calls += 1
        self.uncached += tokens.input
        self.cache_read += tokens.cache_read
        self.cache_write += tokens.cache_write
        self.output += tokens.output
        self.each.append(tokens)

    def merged(self, other: Bill) -> Bill:
        return Bill(
            self.calls + other.calls,
            self.uncached + other.uncached,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.each + other.each,
        )

    @property
    def input(self) -> int:
        return self.uncached + self.cache_read + self.cache_write

    @property
    def weighted(self) -> float:
        return (
            self.uncached * WEIGHTS["uncached"]
            + self.cache_write * WEIGHTS["cache_write"]
            + self.cache_read * WEIGHTS["cache_read"]
        )

    def cost(self, prices: Prices) -> float:
        return sum(tokens.cost(prices) for tokens in self.each)

    def to_json(self, prices: Prices) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "uncached": self.uncached,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "input": self.input,
            "output": self.output,
            "weighted_input": round(self.weighted),
            "cache_read_share": round(self.cache_read / self.input, 4) if self.input else 0.0,
            "cost_usd": round(self.cost(prices), 4),
        }
