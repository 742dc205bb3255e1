"""A thread's bill: tokens by class and their cost at list price, summed over its calls (by
model; ``Projection.billed``)."""

from __future__ import annotations

from dataclasses import dataclass

from condensate.events import ModelUsage


@dataclass(slots=True)
class Bill:
    """Tokens by class and their cost at list price, summed over calls."""

    calls: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    usd: float = 0.0
    unpriced: int = 0
    """Calls whose model has no known price (their cost is not in ``usd``)."""
    cache_write_1h: int = 0
    """Of ``cache_write``, the tokens written for an hour."""
    compaction_input: int = 0
    compaction_output: int = 0
    thinking_dropped: int = 0
    thinking_dropped_tokens: int = 0
    """Signed thinking the calls went without, blocks and tokens (``ModelUsage``)."""

    def add(self, usage: ModelUsage) -> None:
        self.calls += 1
        self.input += usage.input
        self.cache_write += usage.cache_write
        self.cache_read += usage.cache_read
        self.output += usage.output
        self.cache_write_1h += usage.cache_write_1h
        self.compaction_input += usage.compaction_input
        self.compaction_output += usage.compaction_output
        self.thinking_dropped += usage.thinking_dropped
        self.thinking_dropped_tokens += usage.thinking_dropped_tokens
        if usage.usd is None:
            self.unpriced += 1
        else:
            self.usd = round(self.usd + usage.usd, 6)

    def merge(self, other: Bill) -> None:
        """Add ``other``'s calls to this bill."""
        self.calls += other.calls
        self.input += other.input
        self.cache_write += other.cache_write
        self.cache_read += other.cache_read
        self.output += other.output
        self.cache_write_1h += other.cache_write_1h
        self.compaction_input += other.compaction_input
        self.compaction_output += other.compaction_output
        self.unpriced += other.unpriced
        self.thinking_dropped += other.thinking_dropped
        self.thinking_dropped_tokens += other.thinking_dropped_tokens
        self.usd = round(self.usd + other.usd, 6)
