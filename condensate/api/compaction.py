"""What ``GET /threads/:id/compact`` answers (the pending ask, a requested compaction, and
what each tier would cut and cost now: ``condensate.core.preview``) and what answering it
answers. Pure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from condensate.api.answer import Answer
from condensate.core import preview
from condensate.events import AskOpened, CompactionMode


class ThinkingDropped(Answer):
    """Signed thinking the thread's calls went without: blocks the gateway took out because
    an earlier part of the request had changed since they were produced, or the provider
    dropped; the model has to reason again what they held."""

    blocks: int
    tokens: int
    """As far as known (an omitted block's, estimated from the reply that produced it)."""


class CuratorCall(Answer):
    """A summary's one curator call: its prompt, at most its output budget, their price."""

    model: str
    input_tokens: int = Field(alias="inputTokens")
    output_tokens: int = Field(alias="outputTokens")
    usd: float | None


CacheRule = Literal["anthropic-breakpoints", "openai-prefix", "first-change", "new-session"]
"""Where the next call reads the provider's cache again after a cut (``core.cache_rules``):
Anthropic's breakpoints and their 20-block lookback, OpenAI's prefix in 128-token steps, the
fallback for any other provider (everything before the first change), or a new session (a
summary on an engine that restarts its session: nothing)."""


class Refetched(Answer):
    """A result the cut takes from the view that the thread's recent steps still use."""

    seq: int
    tool: str
    target: str
    """What its call named: a file, a command, a pattern, a URL."""
    named_by: int = Field(alias="namedBy")
    """The seq of the latest assistant message (of the last 12 model calls) whose call names
    it again, or that cites its seq."""


class FetchAgain(Answer):
    """What the agent would have to fetch again after the cut (``condensate.core.refetch``)."""

    results: int
    tokens: int
    """What the view shows of them now."""
    items: list[Refetched]
    """At most five, oldest first."""


class TierCost(Answer):
    """What a tier's cut costs: the cached prefix it invalidates, what the next call writes
    to the cache again and its price, what each later call saves, the thinking it drops and
    what the agent would have to fetch again."""

    freed: int
    invalidated_tokens: int = Field(alias="invalidatedTokens")
    rewritten_tokens: int = Field(alias="rewrittenTokens")
    rewrite_usd: float | None = Field(alias="rewriteUsd")
    """At the thread model's cache-write price; null when it has no price."""
    saved_per_call_usd: float | None = Field(alias="savedPerCallUsd")
    break_even_calls: int | None = Field(alias="breakEvenCalls")
    """Calls after which the cut has paid for its rewrite (and its curator call)."""
    thinking_dropped: ThinkingDropped = Field(alias="thinkingDropped")
    """The signed thinking the cut would take from the model's view: on providers that bind
    thinking to what came before it, every block after the first change (all of them, for a
    summary that restarts the session)."""
    cache_rule: CacheRule = Field(alias="cacheRule")
    read_tokens: int = Field(alias="readTokens")
    """Prompt tokens the next call still reads from the cache after the cut (the system
    prompt and tools included)."""
    first_change_seq: int | None = Field(alias="firstChangeSeq")
    """The first entry the cut changes; null when it changes nothing."""
    rewrite_from_seq: int | None = Field(alias="rewriteFromSeq")
    """The first entry the next call writes to the cache again (at or before the first
    change, where the cache rule finds it read); null when it writes nothing again."""
    fetch_again: FetchAgain = Field(alias="fetchAgain")


class SummaryCost(TierCost):
    """A summary's cost, its curator call included."""

    curator: CuratorCall


class MicrocompactPreview(Answer):
    freed: int
    receipts: list[str]
    """The receipts the cleared results would leave."""
    cost: TierCost


class CollapsePreview(Answer):
    freed: int
    cost: TierCost


class SummaryPreview(Answer):
    possible: bool
    keep_from: int | None = Field(alias="keepFrom")
    removed_by_kind: dict[str, int] = Field(alias="removedByKind")
    """Tokens the summary would replace, by kind of entry."""
    freed: int | None
    cost: SummaryCost | None
    """Null when no summary is possible."""


class Preview(Answer):
    """What each tier would cut now, and what it would cost."""

    microcompact: MicrocompactPreview
    collapse: CollapsePreview
    summary: SummaryPreview
    model: str = ""
    """The thread's model: the tiers' rewrites and savings are at its prices."""
    unpriced: list[str] = Field(default_factory=list)
    """The models without a price (the thread's, the curator's): their costs are null."""


class Requested(Answer):
    """A compaction queued for the next tool boundary or turn start."""

    seq: int
    mode: CompactionMode
    by: Literal["thread", "operator"]
    keep_from: int | None = Field(alias="keepFrom")
    summary: str | None


class CompactionUsage(Answer):
    used: int
    line: int
    ceiling: int


class Compaction(Answer):
    ask: AskOpened | None
    """The ask a head's thread opened when it crossed its line, until it is answered."""
    requested: Requested | None
    preview: Preview
    usage: CompactionUsage


class CompactAnswered(Answer):
    """The ask answered (``ask.answered``, 200), or a compaction queued
    (``compaction.requested``, 202)."""

    seq: int
    kind: Literal["ask.answered", "compaction.requested"]
    queued: bool


# -- answers built from the core's preview ---------------------------------------------------


def cost_answer(cost: preview.TierCost) -> TierCost:
    """The cost as ``GET /threads/:id/compact`` shows it (a summary's with its curator
    call)."""
    fields = {
        "freed": cost.freed,
        "invalidated_tokens": cost.invalidated,
        "rewritten_tokens": cost.rewritten,
        "rewrite_usd": cost.rewrite_usd,
        "saved_per_call_usd": cost.saved_per_call_usd,
        "break_even_calls": cost.break_even_calls,
        "thinking_dropped": ThinkingDropped(
            blocks=cost.thinking.blocks, tokens=cost.thinking.tokens
        ),
        "cache_rule": cost.rewrite.rule,
        "read_tokens": cost.rewrite.read,
        "first_change_seq": cost.rewrite.first_change,
        "rewrite_from_seq": cost.rewrite.start,
        "fetch_again": FetchAgain(
            results=len(cost.refetch),
            tokens=sum(r.tokens for r in cost.refetch),
            items=[
                Refetched(seq=r.seq, tool=r.tool, target=r.target, named_by=r.named_by)
                for r in cost.refetch[: preview.SHOWN_REFETCHES]
            ],
        ),
    }
    if cost.curator is None:
        return TierCost(**fields)
    curator = CuratorCall(
        model=cost.curator.model,
        input_tokens=cost.curator.input,
        output_tokens=cost.curator.output,
        usd=cost.curator.usd,
    )
    return SummaryCost(**fields, curator=curator)


def preview_answer(shown: preview.Preview) -> Preview:
    """What ``GET /threads/:id/compact`` shows of it."""
    summary_cost = None if shown.summary is None else cost_answer(shown.summary)
    assert summary_cost is None or isinstance(summary_cost, SummaryCost)
    return Preview(
        microcompact=MicrocompactPreview(
            freed=shown.microcompact.freed,
            receipts=list(shown.microcompact_receipts),
            cost=cost_answer(shown.microcompact),
        ),
        collapse=CollapsePreview(freed=shown.collapse.freed, cost=cost_answer(shown.collapse)),
        summary=SummaryPreview(
            possible=shown.summary_possible,
            keep_from=shown.summary_keep_from,
            removed_by_kind=shown.summary_removed,
            freed=None if shown.summary is None else shown.summary.freed,
            cost=summary_cost,
        ),
        model=shown.model,
        unpriced=list(shown.unpriced),
    )
