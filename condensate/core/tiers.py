"""What each tier may cut: the choice of cleared results and of a summary's kept range (a
cleared result's category and receipt are ``receipts``'). Pure: no I/O.

microcompact clears older results of re-readable tools; collapse also clears older action
results; both leave receipts. Neither touches human messages, small results, the most recent
results, failed calls, memory and control results, the brief or a pin. A summary's kept range
starts on a safe boundary: a user message or the assistant message that opens a complete batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from condensate.core.clamps import DEFAULT_TOKENS as DEFAULT_CLAMP_TOKENS
from condensate.core.receipts import Category, bare_tool, receipt
from condensate.core.tokens import estimate
from condensate.events import CheapTier, ToolResult, UserMessage, Window

if TYPE_CHECKING:
    from condensate.core.projector import Entry, Projection


@dataclass(frozen=True)
class TierSettings:
    small_result_tokens: int = 200
    """Cheap tiers leave results below this size alone (ours)."""
    keep_pairs: int = 3
    """... and the most recent tool pairs, beside the latest batch's results, which are never
    cleared (``CONDENSATE_WINDOW_KEEP_PAIRS``; the spec: cheap tiers never clear the most
    recent results). 3, chosen on ``benchmarks/reactive_task.py --sweep``: the cheapest count
    at which its agent fetches again no more than its baselines (the CLI alone, the cheapest
    peer) on the native loop, Claude Code and Codex; 12 has it fetch nothing, at 11 % more on
    the native loop (docs/performance.md, "An agent that needs what it saw")."""
    exclude_tools: frozenset[str] = frozenset()
    """Tools whose results cheap tiers never clear, by bare lower-case name
    (``CONDENSATE_WINDOW_EXCLUDE_TOOLS``)."""
    target_share: float = 1.0
    """A window cuts down to this share of the line (``CONDENSATE_WINDOW_TARGET``). 1.0, the
    spec's rule: a cheap tier is taken once it lands under the line. Lower is a departure an
    operator chooses: windows come in batches, each clearing more."""
    early_share: float | None = None
    """Under the line but above the target, a cheap tier (``early_tier``) runs as soon as it
    frees this share of the line (``CONDENSATE_WINDOW_EARLY``). None, the spec's rule: a
    window only when the next prompt would pass the line. Set, it is a departure an operator
    chooses: it ignores that a tier already ran since the last summary."""
    early_tier: CheapTier = "collapse"
    dedupe_min_tokens: int = 50
    """A read superseded by a later one is cleared from this size."""
    keep_tail_share: float = 0.25
    """A summary keeps about this share of the line verbatim (ours)..."""
    keep_tail_share_restarted: float = 0.10
    """... and on an engine that applies a summary by restarting its session, where the kept
    tail is rendered into the one message that starts the new session and billed uncached
    again: a smaller tail there (measured by ``benchmarks/cli_long_task.py``: Claude Code at a
    60k ceiling, 1.72M weighted input with 0.25, 1.51M with 0.10)."""

    def tail_share(self, restarts: bool) -> float:
        return self.keep_tail_share_restarted if restarts else self.keep_tail_share

    summary_budget: int = 4_000
    """Tokens set aside for a summary's text (ours)."""
    clamp_tokens: int | None = DEFAULT_CLAMP_TOKENS
    """Any one message, result or argument longer than this many tokens' worth of
    characters keeps its head and tail in the view (``clamps``; ``CONDENSATE_CLAMP_TOKENS``;
    None: nothing clamped). A new thread records it, so its view never changes after."""


@dataclass(frozen=True)
class Clearing:
    cleared: tuple[int, ...]
    freed: int


CLEARS: dict[CheapTier, frozenset[Category]] = {
    "microcompact": frozenset({"reread"}),
    "collapse": frozenset({"reread", "action"}),
}
"""The categories of results each cheap tier clears."""


@dataclass
class _Clearable:
    """Tokens of ``entries[:count]`` that a cheap tier might clear, by category, while the
    view's layout, its ``baked_before`` and the size rules stay ``key``."""

    key: tuple[int, int, int, int]
    count: int
    tokens: dict[Category, int]
    unsuperseded: dict[str, int]
    """Read key -> the tokens of its latest read, when only a later read would clear it."""


def most_freed(view: Projection, tier: CheapTier, settings: TierSettings) -> int:
    """What ``tier`` could free at most: every result it might clear, whole (``cheap_clearing``
    frees less: it keeps the most recent results, and each receipt takes some back). Kept on
    the view as it grows, so a call costs what was appended since the last one, where
    ``cheap_clearing`` reads the whole view; counted again after a window."""
    key = (view.layout, view.baked_before, settings.small_result_tokens, settings.dedupe_min_tokens)
    memo = view.tiers_memo
    if not isinstance(memo, _Clearable) or memo.key != key:
        memo = _Clearable(key, 0, {}, {})
        view.tiers_memo = memo
    for entry in view.entries[memo.count :]:
        _tally(memo, entry, view.baked_before, settings)
    memo.count = len(view.entries)
    return sum(memo.tokens.get(category, 0) for category in CLEARS[tier])


def _tally(memo: _Clearable, entry: Entry, baked_before: int, settings: TierSettings) -> None:
    """Count ``entry`` in the category in which a cheap tier might clear it, by what
    ``cheap_clearing`` asks of it short of its age, its batch and its tool."""
    if entry.role != "tool" or entry.receipt is not None or entry.seq <= baked_before:
        return
    size = entry.full_tokens
    category: Category | None = entry.category
    if entry.read_key is not None:
        # A later read of the same thing supersedes the one before it, which is then
        # cleared whatever its age, from a smaller size (``dedupe_min_tokens``).
        category = "reread"
        superseded = memo.unsuperseded.pop(entry.read_key, 0)
        memo.tokens[category] = memo.tokens.get(category, 0) + superseded
        if size < settings.small_result_tokens:
            if size >= settings.dedupe_min_tokens:
                memo.unsuperseded[entry.read_key] = entry.tokens
            return
    elif isinstance(entry.event, ToolResult) and entry.event.is_error:
        return
    if category is None or size < settings.small_result_tokens:
        return
    memo.tokens[category] = memo.tokens.get(category, 0) + entry.tokens


def cheap_clearing(
    view: Projection,
    tier: CheapTier,
    settings: TierSettings,
    protect_from: int | None,
) -> Clearing:
    """The results ``tier`` would clear, oldest first, and the tokens it would free: every
    read superseded by a later one of the same thing (whatever its age: the later one is
    shown), then the older results of its categories."""
    allowed = CLEARS[tier]
    live = [
        i
        for i, e in enumerate(view.entries)
        if e.role == "tool" and e.receipt is None and e.seq > view.baked_before
    ]
    recent = set(live[-settings.keep_pairs :]) if settings.keep_pairs else set()
    # The results of the latest batch are what the model is about to read: never cleared.
    latest = max((view.entries[i].batch for i in live), default=None)
    recent |= {i for i in live if view.entries[i].batch == latest}
    newest: dict[str, int] = {}
    for i in live:
        key = view.entries[i].read_key
        if key is not None:
            newest[key] = i
    cleared: list[int] = []
    freed = 0
    for i in live:
        entry = view.entries[i]
        assert isinstance(entry.event, ToolResult)
        if protect_from is not None and _batch_position(view, entry.batch, i) >= protect_from:
            continue
        if bare_tool(entry.event.tool) in settings.exclude_tools:
            continue
        key = entry.read_key
        superseded = (
            key is not None and newest[key] != i and entry.full_tokens >= settings.dedupe_min_tokens
        )
        if not superseded and (
            i in recent
            or entry.category not in allowed
            or entry.full_tokens < settings.small_result_tokens
            or entry.event.is_error  # failures are what a resumed agent needs most
        ):
            continue
        cleared.append(entry.seq)
        shown = receipt(
            entry.event,
            entry.seq,
            entry.full_tokens,
            category=entry.category,
            superseded_by=view.entries[newest[key]].seq if superseded and key else None,
        )
        freed += entry.tokens - estimate(shown)
    return Clearing(tuple(cleared), freed)


def largest_clearing(view: Projection, need: int) -> Clearing:
    """Forced: the largest kept results (any age, any size, never control) until ``need``
    tokens are freed, or all of them if that is not enough."""
    live = [
        e
        for e in view.entries
        if e.role == "tool"
        and e.receipt is None
        and e.category != "control"
        and e.seq > view.baked_before
    ]
    cleared: list[int] = []
    freed = 0
    for entry in sorted(live, key=lambda e: e.tokens, reverse=True):
        if freed >= need:
            break
        assert isinstance(entry.event, ToolResult)
        gain = entry.tokens - estimate(
            receipt(entry.event, entry.seq, entry.full_tokens, category=entry.category)
        )
        if gain <= 0:
            continue
        cleared.append(entry.seq)
        freed += gain
    return Clearing(tuple(sorted(cleared)), freed)


def _batch_position(view: Projection, batch: int, fallback: int) -> int:
    position = view.position(batch)
    return fallback if position is None else position


def safe_boundaries(view: Projection) -> list[int]:
    """View positions where a kept range may start: a user message or an assistant message,
    with no tool result at or after it whose call came before it."""
    safe: list[int] = []
    earliest_call = len(view.entries)
    for i in range(len(view.entries) - 1, -1, -1):
        entry = view.entries[i]
        if entry.role == "tool":
            earliest_call = min(earliest_call, _batch_position(view, entry.batch, i))
        elif entry.role in ("user", "assistant") and earliest_call >= i:
            safe.append(i)
    safe.reverse()
    return safe


VERBATIM_HEADING = "## Verbatim record"
"""Where a summary's word-for-word part begins (the curator appends what the model left
out)."""
VERBATIM_ERROR_CHARS = 6_000
"""A failed call's error text a summary keeps word for word: its head and tail up to this
many characters (a failing run of a thousand lines is mostly noise; the log keeps it all)."""


VERBATIM_FAILURES_CHARS = 12_000
"""The error text a summary's failed calls share before each is cut further: every failed
call is kept (the spec: "keep every failed tool call with its error text"), each error whole
or its head and tail, within ``failure_share`` of this."""
VERBATIM_FAILURE_FLOOR = 1_000
"""The least of its error a failed call keeps, however many there are: with more failures
than this divides into, the record grows by this much a failure."""


def failure_share(failures: int) -> int:
    """The characters of error text each of ``failures`` failed calls keeps in a summary."""
    share = VERBATIM_FAILURES_CHARS // max(failures, 1)
    return min(VERBATIM_ERROR_CHARS, max(share, VERBATIM_FAILURE_FLOOR))


def verbatim_error(output: str, seq: int | None, chars: int = VERBATIM_ERROR_CHARS) -> str:
    """The error text a summary's verbatim record keeps: whole, or its head and tail with a
    note of what was cut and the seq that holds it whole (``recall`` returns it)."""
    if len(output) <= chars:
        return output
    half = chars // 2
    cut = len(output) - 2 * half
    where = "" if seq is None else f"; the log keeps them at seq {seq}"
    note = f"[... {cut} characters cut here{where}]"
    return f"{output[:half]}\n{note}\n{output[-half:]}"


def _verbatim_tokens(entry: Entry) -> tuple[int, int]:
    """What ``entry`` adds to a summary that replaces it, word for word: (a human message,
    failures: a failed call's capped error text or an earlier summary's record)."""
    event = entry.event
    if isinstance(event, Window):
        record = (event.summary or "").partition(VERBATIM_HEADING + "\n")[2]
        return 0, estimate(record) if record else 0
    if isinstance(event, UserMessage) and event.author == "human":
        return entry.tokens, 0
    if isinstance(event, ToolResult) and event.is_error:
        return 0, min(entry.tokens, estimate("x" * VERBATIM_ERROR_CHARS))
    return 0, 0


def _failures_in(entry: Entry) -> int:
    """The failed calls ``entry`` brings into a summary's record: one for a failed result,
    those an earlier summary's record holds."""
    event = entry.event
    if isinstance(event, ToolResult) and event.is_error:
        return 1
    if isinstance(event, Window):
        record = (event.summary or "").partition(VERBATIM_HEADING + "\n")[2]
        return sum(1 for part in record.split("\n\n") if part.startswith("Failed "))
    return 0


@dataclass(frozen=True)
class SummaryCut:
    keep_from: int | None
    """The seq the kept range starts at; None keeps nothing but the brief and pins."""
    removed: int
    """Tokens of the entries the summary replaces."""
    after: int
    """The view's tokens after the cut, before the summary's own text is added."""
    verbatim: int = 0
    """Tokens the summary must carry word for word (human messages, failed calls' errors,
    earlier summaries' records), beyond its own text."""


def summary_cut(
    view: Projection,
    tail_budget: int,
    protect_from: int | None,
) -> SummaryCut | None:
    """The earliest safe boundary whose kept range fits ``tail_budget``, at or before
    ``protect_from``; else the latest usable one; None when nothing before it could be
    summarized. One forward and one backward pass: this runs on every over-the-line step."""
    entries = view.entries
    count = len(entries)
    protected = view.protected_seqs
    replaced = [0] * (count + 1)
    verbatim = [0] * (count + 1)
    total = humans = failures = failed = 0
    for i, entry in enumerate(entries):
        if entry.seq not in protected:
            total += entry.tokens
            human, failure = _verbatim_tokens(entry)
            humans += human
            failures += failure
            failed += _failures_in(entry)
        replaced[i + 1] = total
        bound = estimate("x" * (failed * failure_share(failed)))
        verbatim[i + 1] = humans + min(failures, bound)
    limit = count if protect_from is None else protect_from
    best: int | None = None
    latest: int | None = None
    if protect_from is None and replaced[count] > 0:
        best = latest = count  # keep nothing but the brief and pins
    index = view.position
    suffix = 0
    earliest_call = count
    for i in range(count - 1, -1, -1):
        entry = entries[i]
        suffix += entry.tokens
        if entry.role == "tool":
            batch = index(entry.batch)
            earliest_call = min(earliest_call, i if batch is None else batch)
            continue
        safe = entry.role in ("user", "assistant") and earliest_call >= i
        if not safe or i > limit or replaced[i] == 0:
            continue
        if latest is None:
            latest = i
        if suffix <= tail_budget:
            best = i
    chosen = best if best is not None else latest
    if chosen is None:
        return None
    keep_from = entries[chosen].seq if chosen < count else None
    return SummaryCut(
        keep_from, replaced[chosen], view.view_tokens - replaced[chosen], verbatim[chosen]
    )
