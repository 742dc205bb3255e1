"""What a call costs at its model's list price. Pure: no I/O.

Prices are US dollars per million tokens, by class: uncached input, cache write (Anthropic's
five-minute writes; OpenAI bills none), cache read, output. A model is found by the longest
known name its own name starts with (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``);
``CONDENSATE_MODEL_PRICES`` adds or overrides entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from condensate.tokens import bare_model


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)


def _anthropic(input_price: float, output_price: float) -> Price:
    """Anthropic's rule: a cache read is a tenth of input, a five-minute write 1.25 times."""
    return Price(
        input=input_price,
        output=output_price,
        cache_read=input_price / 10,
        cache_write=input_price * 1.25,
    )


def _openai(input_price: float, output_price: float, cached: float) -> Price:
    return Price(input=input_price, output=output_price, cache_read=cached, cache_write=input_price)


LIST_PRICES: dict[str, Price] = {
    "claude-opus-4-5": _anthropic(5, 25),
    "claude-opus-4-1": _anthropic(15, 75),
    "claude-opus-4": _anthropic(15, 75),
    "claude-sonnet-4-5": _anthropic(3, 15),
    "claude-sonnet-4": _anthropic(3, 15),
    "claude-3-7-sonnet": _anthropic(3, 15),
    "claude-haiku-4-5": _anthropic(1, 5),
    "claude-3-5-haiku": _anthropic(0.8, 4),
    "gpt-5": _openai(1.25, 10, 0.125),
    "gpt-5.1": _openai(1.25, 10, 0.125),
    "gpt-5-mini": _openai(0.25, 2, 0.025),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005),
    "gpt-4.1": _openai(2, 8, 0.5),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
    "gpt-4o": _openai(2.5, 10, 1.25),
}
"""List prices as published when this table was written (2025); newer models need
``CONDENSATE_MODEL_PRICES``."""


def price_of(model: str, extra: Mapping[str, Price] | None = None) -> Price | None:
    name = bare_model(model)
    table = {**LIST_PRICES, **{bare_model(k): v for k, v in (extra or {}).items()}}
    if name in table:
        return table[name]
    known = [k for k in table if name.startswith(k + "-")]
    return table[max(known, key=len)] if known else None


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0

    def cost(self, price: Price) -> float:
        return (
            self.input * price.input
            + self.cache_write * price.cache_write
            + self.cache_read * price.cache_read
            + self.output * price.output
        ) / 1_000_000


def cost(model: str, tokens: Tokens, extra: Mapping[str, Price] | None = None) -> float | None:
    """The list price of ``tokens`` on ``model``; None when its price is not known."""
    price = price_of(model, extra)
    return None if price is None else round(tokens.cost(price), 6)
