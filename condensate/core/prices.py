"""What a call costs at its model's list price. Pure: no I/O.

Prices are US dollars per million tokens, by class: uncached input; cache writes (Anthropic's
five-minute and one-hour writes, OpenAI's from GPT-5.6 on); cache reads; output. Some models
bill a whole call at higher rates once its prompt passes a size (``LongContext``), so a call's
price depends on its prompt. A server-side compaction (Anthropic's ``usage.iterations``
entries of type ``compaction``) is billed beside the call at the model's input and output
prices.

A model is found by its own name, or by that name with a snapshot date after it
(``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``); any other name has no price rather
than a neighbour's. ``CONDENSATE_PRICES`` adds or overrides entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from condensate.core.tokens import bare_model


class LongContext(BaseModel):
    """A provider's rates for a long prompt: past ``above`` prompt tokens the whole call (not
    only the tokens past the mark) pays every input and cache price times ``input`` and the
    output price times ``output``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    above: int = Field(gt=0)
    input: float = Field(ge=1)
    output: float = Field(ge=1)


@dataclass(frozen=True)
class Rates:
    """What one call pays per million tokens of each class, its prompt's tier applied."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_write_1h: float


class Price(BaseModel):
    """A model's list price, US dollars per million tokens.

    >>> Price(input=4, output=20, cache_read=0.2, cache_write=5, cache_write_1h=8)
    >>> Price(input=1.25, output=10, cache_read=0.125)    # no write price: a write is input
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    """None: a cache read is billed as input."""
    cache_write: float | None = Field(default=None, ge=0)
    """A five-minute write (Anthropic) or any write (OpenAI from GPT-5.6 on). None: the
    provider has no write price, a written token is ordinary input (OpenAI before GPT-5.6)."""
    cache_write_1h: float | None = Field(default=None, ge=0)
    """A one-hour write (Anthropic's ``ttl: "1h"``). None: at the ``cache_write`` price."""
    long_context: LongContext | None = None

    def rates(self, prompt: int) -> Rates:
        """The rates a call whose prompt holds ``prompt`` tokens pays."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        write_1h = write if self.cache_write_1h is None else self.cache_write_1h
        long = self.long_context
        up, out = (1.0, 1.0) if long is None or prompt <= long.above else (long.input, long.output)
        return Rates(self.input * up, self.output * out, read * up, write * up, write_1h * up)


class Counted(Protocol):
    """A call's count as the provider reported it (``ModelUsage``, a provider's ``Usage``)."""

    @property
    def input(self) -> int: ...
    @property
    def cache_read(self) -> int: ...
    @property
    def cache_write(self) -> int: ...
    @property
    def output(self) -> int: ...
    @property
    def cache_write_1h(self) -> int: ...
    @property
    def compaction_input(self) -> int: ...
    @property
    def compaction_output(self) -> int: ...


@dataclass(frozen=True)
class Tokens:
    """One call's tokens by class. ``cache_write`` counts every write, ``cache_write_1h``
    the part of it written for an hour."""

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cache_write_1h: int = 0
    compaction_input: int = 0
    compaction_output: int = 0

    @classmethod
    def of(cls, usage: Counted) -> Tokens:
        return cls(
            input=usage.input,
            cache_write=usage.cache_write,
            cache_read=usage.cache_read,
            output=usage.output,
            cache_write_1h=usage.cache_write_1h,
            compaction_input=usage.compaction_input,
            compaction_output=usage.compaction_output,
        )

    @property
    def prompt(self) -> int:
        """The prompt the provider read: what its long-context tier is decided on."""
        return self.input + self.cache_read + self.cache_write

    def cost(self, price: Price) -> float:
        call = price.rates(self.prompt)
        # The summarizing call is a call of its own: its prompt decides its tier.
        compaction = price.rates(self.compaction_input)
        five_minute = max(self.cache_write - self.cache_write_1h, 0)
        return (
            self.input * call.input
            + five_minute * call.cache_write
            + self.cache_write_1h * call.cache_write_1h
            + self.cache_read * call.cache_read
            + self.output * call.output
            + self.compaction_input * compaction.input
            + self.compaction_output * compaction.output
        ) / 1_000_000


# -- the table ----------------------------------------------------------------------------------
#
# Each entry names the page its figures come from. [V]: read on the vendor's page; [S]:
# secondary (a third party's notes), not confirmed on the vendor's page. Figures read in
# December 2026; prices change, and CONDENSATE_PRICES corrects any of them.

ANTHROPIC_PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"
OPENAI_MODELS = "https://developers.openai.com/api/docs/models"
OPENAI_CACHING = "https://developers.openai.com/api/docs/guides/prompt-caching"


def _anthropic(
    input_price: float,
    output_price: float,
    *,
    read: float | None = None,
    long: LongContext | None = None,
) -> Price:
    """Anthropic's writes: five-minute 1.25x input, one-hour 2x ([V] pricing page). Reads
    are 0.1x input unless the model's own price says otherwise (Opus 5.5 0.05x, Fable 5.1
    0.025x: no blanket ratio)."""
    return Price(
        input=input_price,
        output=output_price,
        cache_read=input_price / 10 if read is None else read,
        cache_write=input_price * 1.25,
        cache_write_1h=input_price * 2,
        long_context=long,
    )


OPENAI_LONG = LongContext(above=272_000, input=2, output=1.5)
"""[V] gpt-6.2-sol's model page: "For requests with more than 272K input tokens, input and
cache rates double and output costs 1.5 times the short-context rate for the full request"."""


def _openai(
    input_price: float, output_price: float, cached: float, *, writes: bool, long: bool
) -> Price:
    """``writes``: the GPT-5.6 family and later bill cache writes at 1.25x uncached input
    ([V] OPENAI_CACHING); earlier models have no write price (a write is input). ``long``:
    the model has OPENAI_LONG's long-context rates."""
    return Price(
        input=input_price,
        output=output_price,
        cache_read=cached,
        cache_write=input_price * 1.25 if writes else None,
        long_context=OPENAI_LONG if long else None,
    )


def _current_openai(input_price: float, output_price: float, cached: float) -> Price:
    return _openai(input_price, output_price, cached, writes=True, long=True)


_FABLE_5_2 = _anthropic(8, 40, read=0.20)
_FABLE_5_1 = _anthropic(10, 50, read=0.25)
_FABLE_5 = _anthropic(10, 50, read=1)
_GPT_5_6_SOL = _current_openai(4, 20, 0.40)

LIST_PRICES: dict[str, Price] = {
    # -- Anthropic: the 5.x models, ANTHROPIC_PRICING and each model's overview page ---------
    # [V] $4 / $5 / $8 / $0.20 (0.05x) / $20 (pricing row; zh-CN opus-5-5 overview).
    "claude-opus-5-5": _anthropic(4, 20, read=0.20),
    # [V] $2 / $2.50 / $4 / $10 (sonnet-5-5 overview). Read $0.10 (0.05x) [S]: trackers
    # checked against the pricing page give a cut from $0.20 on 2026-10-07; the vendor copy
    # read here ($0.20) predates it (its line-up still shows Haiku 4.5). Unconfirmed.
    "claude-sonnet-5-5": _anthropic(2, 10, read=0.10),
    # [V] haiku-5-5 overview: $0.10 / $0.125 / $0.20 / $0.50 up to 100,000 prompt tokens,
    # $0.50 / $0.625 / $2.50 over (5x). Read $0.01 ($0.05 over) and the one-hour write over
    # 100K ($1) [S]. The prompt counts cache reads and writes.
    "claude-haiku-5-5": _anthropic(
        0.10, 0.50, read=0.01, long=LongContext(above=100_000, input=5, output=5)
    ),
    # [S] $8 / $10 / $16 / $0.20 / $40 (trackers' copies of the pricing row); the vendor's
    # row was not read. Unconfirmed. Mythos 5.2: "same capabilities as Claude Fable 5.2" [V].
    "claude-fable-5-2": _FABLE_5_2,
    "claude-mythos-5-2": _FABLE_5_2,
    # [V] pricing: $10 / $12.50 / $20 / $0.25 (0.025x) / $50, Mythos 5.1 the same row.
    "claude-fable-5-1": _FABLE_5_1,
    "claude-mythos-5-1": _FABLE_5_1,
    # [V] pricing: $10 / $12.50 / $20 / $1 / $50.
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    # [V] pricing and the opus-5 / sonnet-5 overviews.
    "claude-opus-5": _anthropic(5, 25),
    "claude-sonnet-5": _anthropic(2, 10),
    # -- Anthropic: the 4.x and older models still listed ------------------------------------
    "claude-opus-4-8": _anthropic(5, 25),  # [V] pricing
    "claude-opus-4-7": _anthropic(5, 25),  # [V] pricing
    "claude-opus-4-6": _anthropic(5, 25),  # [V] pricing
    "claude-opus-4-5": _anthropic(5, 25),  # [V] pricing
    "claude-opus-4-1": _anthropic(15, 75),  # [V] pricing (retired except Bedrock, Google Cloud)
    "claude-opus-4": _anthropic(15, 75),  # [V] pricing (retired except Google Cloud)
    "claude-sonnet-4-6": _anthropic(3, 15),  # [S] a copy of the pricing page
    "claude-sonnet-4-5": _anthropic(3, 15),  # [S] a copy of the pricing page; 2025's list
    "claude-sonnet-4": _anthropic(3, 15),  # [S] a copy of the pricing page
    "claude-3-7-sonnet": _anthropic(3, 15),  # 2025's list price, not read again
    "claude-haiku-4-5": _anthropic(1, 5),  # [V] models overview ($1 / $5); cache [S]
    "claude-3-5-haiku": _anthropic(0.8, 4),  # [S] a copy of the pricing page
    # -- OpenAI: OPENAI_MODELS/{model}, Standard tier, short context --------------------------
    # Cache writes (1.25x input) on GPT-5.6 and later: [V] OPENAI_CACHING.
    "gpt-6.2-sol": _current_openai(2, 10, 0.10),  # [V] model page: $2 / $0.10 / $2.50 / $10
    # [V] $8 / $40 (models overview). Cached $0.40 [S] ("60% cheaper" than GPT-6 Astra's $1).
    "gpt-6.2-astra": _current_openai(8, 40, 0.40),
    "gpt-6.1-sol": _current_openai(2, 10, 0.10),  # [S] all figures
    "gpt-6.1-terra": _current_openai(1, 5, 0.05),  # [V] $1 / $5 (overview); cached $0.05 [S]
    "gpt-6-astra": _current_openai(10, 50, 1),  # [V] $10 / $50 (overview); cached $1 [S]
    "gpt-6-sol": _current_openai(2, 10, 0.20),  # [V] gpt-6-sol page: cached 10% of input
    "gpt-6-luna": _current_openai(0.10, 0.50, 0.01),  # [S] all figures
    # [V] ja-JP / pt-BR model page: $4 / $0.40 / $20, called promotional "at least until
    # November 21, 2026": the price after it is unconfirmed. ``gpt-5.6`` is its alias.
    "gpt-5.6-sol": _GPT_5_6_SOL,
    "gpt-5.6": _GPT_5_6_SOL,
    "gpt-5.6-terra": _current_openai(2, 12, 0.20),  # [V] $2 / $12 (overview); cached [S]
    "gpt-5.6-luna": _current_openai(0.20, 1.20, 0.02),  # [V] model page
    # [V] $5 input (the gpt-5.6-sol page's comparison); $0.50 cached and $30 output [S]. No
    # write price (before GPT-5.6); the 272K rule [S].
    "gpt-5.5": _openai(5, 30, 0.50, writes=False, long=True),
    # -- OpenAI: older models, 2025's list prices (not read again) -----------------------------
    "gpt-5.1": _openai(1.25, 10, 0.125, writes=False, long=False),
    "gpt-5": _openai(1.25, 10, 0.125, writes=False, long=False),
    "gpt-5-mini": _openai(0.25, 2, 0.025, writes=False, long=False),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005, writes=False, long=False),
    "gpt-4.1": _openai(2, 8, 0.5, writes=False, long=False),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1, writes=False, long=False),
    "gpt-4o": _openai(2.5, 10, 1.25, writes=False, long=False),
}
"""List prices; a model not here needs ``CONDENSATE_PRICES``."""

_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
"""A snapshot's date after a model's name: Anthropic's ``-20250929``, OpenAI's
``-2025-08-07``."""


def price_of(model: str, extra: Mapping[str, Price] | None = None) -> Price | None:
    """``model``'s price: ``extra`` (the setting) over the table; None when neither has it."""
    table = {**LIST_PRICES, **{bare_model(k): v for k, v in (extra or {}).items()}}
    name = bare_model(model)
    found = table.get(name)
    return found if found is not None else table.get(_SNAPSHOT.sub("", name))


def cost(model: str, tokens: Tokens, extra: Mapping[str, Price] | None = None) -> float | None:
    """The list price of ``tokens`` on ``model``; None when its price is not known."""
    price = price_of(model, extra)
    return None if price is None else round(tokens.cost(price), 6)


def no_price(model: str) -> str:
    """What stands where a cost would, for a model without a price."""
    return f"no price for {model} (set CONDENSATE_PRICES)"
