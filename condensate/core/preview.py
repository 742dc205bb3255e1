"""What a cut would remove right now, and what it would cost, for operators deciding how to
answer an ask. Pure.

For each tier: the tokens it frees; the cached prefix it invalidates (the next call reads the
provider's cache only up to where the provider's rules find it, at or before the first entry
the cut changes, and writes the rest again: ``cache_rules``; on an engine that applies a
summary by restarting its session, the whole prompt) with the dollar cost of writing it again
and what each later call saves; the signed thinking it drops; the results it clears that the
agent would have to fetch again (``refetch``); and for a summary, the curator call's own cost
(its prompt, and at most its output budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from condensate.core import cache_rules, tiers
from condensate.core.cache_rules import Cache, Part
from condensate.core.meter import ContextUsage
from condensate.core.planner import PlannerSettings, Stop, summary_plan
from condensate.core.prices import Price
from condensate.core.probes import probes_for
from condensate.core.projector import Entry, Projection
from condensate.core.receipts import receipt
from condensate.core.refetch import Refetch, fetch_again
from condensate.core.summary import SYSTEM_PROMPT, replaced_entries, summary_prompt
from condensate.core.tokens import estimate
from condensate.events import AssistantMessage, EmergencyReset, ResetCommitted, ToolResult

SHOWN_REFETCHES = 5


@dataclass(frozen=True)
class Pricing:
    """The prices a preview is costed at (None: the model has no known price)."""

    model: str
    price: Price | None
    curator_model: str
    curator_price: Price | None
    curator_output: int
    """The most a summary's text may take (the curator's output budget)."""
    one_hour_writes: bool = False
    """The thread's calls write the cache mostly for an hour (Anthropic's ``ttl: "1h"``):
    a rewrite is priced at the one-hour write price."""


@dataclass(frozen=True)
class CuratorCost:
    model: str
    input: int
    output: int
    """At most: the curator's output budget (a retry after missed probes costs it again)."""
    usd: float | None


@dataclass(frozen=True)
class Thinking:
    """Thinking blocks, and their tokens as far as their text tells (an omitted block's
    text is empty)."""

    blocks: int
    tokens: int


def _thinking_after(view: Projection, first: int | None) -> Thinking:
    """The thinking of the model's turns from position ``first`` on: a provider that binds
    each block to what came before it refuses them once anything before them changed, so the
    engine takes them out (``condensate.gateway.binding``)."""
    if first is None:
        return Thinking(0, 0)
    blocks = [
        t
        for e in view.entries[first:]
        if isinstance(e.event, AssistantMessage)
        for t in e.event.thinking
    ]
    return Thinking(len(blocks), sum(estimate(t.text) for t in blocks if t.text))


CacheRule = cache_rules.Rule | Literal["new-session"]


@dataclass(frozen=True)
class Rewrite:
    """Where the next call reads the cache again after a cut."""

    rule: CacheRule
    read: int = 0
    """Prompt tokens it still reads from the cache (the fixed part included)."""
    first_change: int | None = None
    """The seq of the first entry the cut changes."""
    start: int | None = None
    """The seq of the first entry it writes again."""


@dataclass(frozen=True)
class TierCost:
    freed: int
    invalidated: int
    """Prompt tokens from where the next call stops reading the cache on (the whole prompt,
    for a restarting summary)."""
    rewritten: int
    """Tokens the next call writes to the cache again, after the cut."""
    rewrite_usd: float | None
    saved_per_call_usd: float | None
    """What every later call no longer reads from the cache."""
    curator: CuratorCost | None = None
    thinking: Thinking = field(default_factory=lambda: Thinking(0, 0))
    """The signed thinking the cut would take from the model's view."""
    rewrite: Rewrite = field(default_factory=lambda: Rewrite("first-change"))
    refetch: tuple[Refetch, ...] = ()
    """The results it clears that the agent would have to fetch again."""

    @property
    def break_even_calls(self) -> int | None:
        """Calls after which the cut has paid for its rewrite (and its curator call)."""
        if self.rewrite_usd is None or not self.saved_per_call_usd:
            return None
        curator = (self.curator.usd or 0.0) if self.curator else 0.0
        spent = self.rewrite_usd + curator
        return math.ceil(spent / self.saved_per_call_usd)


@dataclass(frozen=True)
class Preview:
    microcompact_receipts: tuple[str, ...]
    microcompact: TierCost
    collapse: TierCost
    summary_keep_from: int | None
    summary_removed: dict[str, int]
    summary_possible: bool
    summary: TierCost | None
    """None when no summary is possible."""
    model: str = ""
    unpriced: tuple[str, ...] = ()
    """The models without a price (the thread's, the curator's)."""


def _kind(entry: Entry) -> str:
    if entry.role == "tool":
        return f"tool:{entry.category}" if entry.receipt is None else "receipt"
    return entry.role


def _usd(tokens: int, per_million: float) -> float:
    return round(tokens * per_million / 1_000_000, 6)


def _part(entry: Entry, read_at: datetime | None) -> Part:
    """An entry as the cache sees it: its tokens, and the message and blocks ``prompt``
    renders it into (a reply: its thinking, its text and its calls; anything else one block
    of a user message)."""
    event = entry.event
    if isinstance(event, AssistantMessage):
        blocks = len(event.thinking) + bool(event.text) + len(event.tool_calls)
        return Part(entry.tokens, blocks, "assistant", read_at)
    return Part(entry.tokens, 1, "user", read_at)


def _last_change(view: Projection) -> int:
    """The seq of the last event that changed the view other than at its end (a window, a
    reset): the requests before it cached another prompt."""
    windows = [w.seq for w in view.windows[-1:]]
    resets = [e.seq for e in view.entries if isinstance(e.event, ResetCommitted | EmergencyReset)]
    return max([*windows, *resets], default=0)


def _cache(view: Projection, pricing: Pricing, now: datetime) -> Cache:
    """The thread's prompt as the provider's cache holds it: each request the thread made
    since its view last changed in the middle ended before the reply it got, and the cache
    there was read last by the next request (written, for the last)."""
    rule = cache_rules.rule_for(pricing.model)
    bills_writes = pricing.price is not None and pricing.price.cache_write is not None
    replies = [
        (i, e.event.at) for i, e in enumerate(view.entries) if isinstance(e.event, AssistantMessage)
    ]
    since = _last_change(view)
    ends = [(i, at) for i, at in replies if view.entries[i].seq > since]
    read_at = {i: ends[k + 1][1] if k + 1 < len(ends) else at for k, (i, at) in enumerate(ends)}
    return Cache(
        rule=rule,
        fixed=view.baseline_tokens,
        parts=tuple(_part(e, read_at.get(i)) for i, e in enumerate(view.entries)),
        last_call=replies[-1][1] if replies else None,
        now=now,
        lifetime=cache_rules.lifetime(
            rule, one_hour=pricing.one_hour_writes, bills_writes=bills_writes
        ),
    )


def _rewrite(view: Projection, cache: Cache, first: int | None) -> tuple[Rewrite, int]:
    """Where the next call reads the cache again when position ``first`` is the first one the
    cut changes, and the prompt's tokens from there on, before the cut."""
    if first is None:
        return Rewrite(cache.rule), 0
    reuse = cache.reuse(first)
    total = cache.fixed + sum(e.tokens for e in view.entries)
    start = view.entries[reuse.start].seq
    return Rewrite(cache.rule, reuse.read, view.entries[first].seq, start), total - reuse.read


def _cost(
    freed: int,
    invalidated: int,
    *,
    prompt: int,
    pricing: Pricing,
    rewrite: Rewrite,
    thinking: Thinking,
    refetch: tuple[Refetch, ...],
    curator: CuratorCost | None = None,
) -> TierCost:
    """The rewrite at the rates of the next call (its prompt less what the cut freed), the
    saving at the rates of the call that no longer reads the freed part (``prompt``, now):
    a long-context tier prices the whole call."""
    rewritten = max(invalidated - freed, 0)
    price = pricing.price
    rewrite_usd = saved = None
    if price is not None:
        after, before = price.rates(max(prompt - freed, 0)), price.rates(prompt)
        write = after.cache_write_1h if pricing.one_hour_writes else after.cache_write
        rewrite_usd, saved = _usd(rewritten, write), _usd(freed, before.cache_read)
    return TierCost(
        freed,
        invalidated,
        rewritten,
        rewrite_usd,
        saved,
        curator,
        thinking,
        rewrite,
        refetch,
    )


def _cheap(
    view: Projection, clearing: tiers.Clearing, prompt: int, pricing: Pricing, cache: Cache
) -> TierCost:
    positions = [p for seq in clearing.cleared if (p := view.position(seq)) is not None]
    first = min(positions, default=None)
    rewrite, invalidated = _rewrite(view, cache, first)
    return _cost(
        clearing.freed,
        invalidated,
        prompt=prompt,
        pricing=pricing,
        rewrite=rewrite,
        thinking=_thinking_after(view, first),
        refetch=fetch_again(view, clearing.cleared),
    )


def _curator(view: Projection, keep_from: int | None, pricing: Pricing) -> CuratorCost:
    """The curator's one call: its system prompt and the summary prompt it would read."""
    still_open = [
        p for p in probes_for(view, replaced_entries(view, keep_from)) if p.kind == "open"
    ]
    prompt = estimate(SYSTEM_PROMPT) + estimate(summary_prompt(view, keep_from, [], still_open))
    price = pricing.curator_price
    output = pricing.curator_output
    usd = None
    if price is not None:
        rates = price.rates(prompt)
        usd = round((prompt * rates.input + output * rates.output) / 1_000_000, 6)
    return CuratorCost(pricing.curator_model, prompt, output, usd)


def preview(
    view: Projection,
    usage: ContextUsage,
    settings: PlannerSettings,
    pricing: Pricing,
    *,
    now: datetime,
) -> Preview:
    """What each tier would cut if it were taken ``now`` (the cache's entries age)."""
    protect = view.protect_from
    cache = _cache(view, pricing, now)
    micro = tiers.cheap_clearing(view, "microcompact", settings.tiers, protect)
    collapse = tiers.cheap_clearing(view, "collapse", settings.tiers, protect)
    receipts = []
    for seq in micro.cleared:
        position = view.position(seq)
        entry = view.entries[position] if position is not None else None
        if entry is not None and entry.event is not None:
            receipts.append(receipt(entry.event, seq, entry.full_tokens, category=entry.category))  # type: ignore[arg-type]
    chosen = summary_plan(view, usage, settings)
    removed: dict[str, int] = {}
    keep_from = None
    summary = None
    if not isinstance(chosen, Stop):
        keep_from = chosen.keep_from
        end = len(view.entries) if keep_from is None else view.position(keep_from) or 0
        first = None
        replaced = []
        for i, entry in enumerate(view.entries[:end]):
            if not view.is_protected(entry):
                first = i if first is None else first
                removed[_kind(entry)] = removed.get(_kind(entry), 0) + entry.tokens
                if isinstance(entry.event, ToolResult):
                    replaced.append(entry.seq)
        if settings.restarts:
            # A new session: nothing of the old prompt stays cached, the baseline included,
            # and no thinking of the old one goes with it.
            invalidated = usage.measured
            start = view.entries[0].seq if view.entries else None
            rewrite = Rewrite(
                "new-session", 0, None if first is None else view.entries[first].seq, start
            )
            thinking = _thinking_after(view, 0)
        else:
            rewrite, invalidated = _rewrite(view, cache, first)
            thinking = _thinking_after(view, first)
        summary = _cost(
            chosen.freed,
            invalidated,
            prompt=usage.measured,
            pricing=pricing,
            rewrite=rewrite,
            thinking=thinking,
            refetch=fetch_again(view, replaced),
            curator=_curator(view, keep_from, pricing),
        )
    unpriced = dict.fromkeys(
        model
        for model, price in (
            (pricing.model, pricing.price),
            (pricing.curator_model, pricing.curator_price),
        )
        if price is None
    )
    return Preview(
        tuple(receipts),
        _cheap(view, micro, usage.measured, pricing, cache),
        _cheap(view, collapse, usage.measured, pricing, cache),
        keep_from,
        removed,
        not isinstance(chosen, Stop),
        summary,
        model=pricing.model,
        unpriced=tuple(unpriced),
    )
