"""``Recording``: a thread's conversation, ready to replay, in Condensate's own events.

``from_events`` builds one from a Condensate log's events (keeping the conversation: human
messages, assistant replies with their tool calls, tool results, turns, children);
``write_events`` writes one back as JSON lines, which ``load`` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from condensate.core.tokens import count_event, counter_for
from condensate.errors import CondensateError
from condensate.events import (
    AssistantMessage,
    BaselineMeasured,
    ChildJoined,
    ChildSpawned,
    Engine,
    Event,
    ModelUsage,
    ThreadCreated,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

DEFAULT_BASELINE = 12_000


@dataclass(frozen=True)
class Recording:
    """A thread's conversation, ready to replay. ``events`` excludes ``thread.created``."""

    source: str
    """``condensate``, ``claude``, ``codex`` or ``generated``."""
    name: str
    engine: Engine
    model: str
    baseline: int
    events: tuple[Event, ...]

    @property
    def model_calls(self) -> int:
        return sum(isinstance(e, AssistantMessage) for e in self.events)


_KEEP = (
    UserMessage,
    AssistantMessage,
    ToolResult,
    TurnStarted,
    TurnEnded,
    ChildSpawned,
    ChildJoined,
    BaselineMeasured,
)
"""What a replay takes from a recorded log; windows, usage and asks are the policy's to decide."""


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def from_events(name: str, source: str, events: Iterable[Event]) -> Recording:
    """A recording from Condensate events; the first must be ``thread.created``. Its
    baseline is the first call's count less the conversation before it (what the daemon's
    requests held besides the conversation), else the thread's own."""
    created: ThreadCreated | None = None
    kept: list[Event] = []
    first: int | None = None
    for event in events:
        if isinstance(event, ThreadCreated):
            created = created or event
        elif isinstance(event, _KEEP):
            kept.append(event)
        elif isinstance(event, ModelUsage) and first is None and not event.side:
            first = event.prompt
    if created is None:
        msg = f"{name} has no thread.created event."
        raise CondensateError(msg)
    baseline = created.baseline_tokens or DEFAULT_BASELINE
    if first is not None:
        baseline = first_prompt_baseline(kept, first)
    return Recording(source, name, created.engine, created.model, baseline, tuple(kept))


def first_prompt_baseline(events: Sequence[Event], prompt: int | None) -> int:
    """The recorded first prompt less what the conversation before it counts: the baseline."""
    if prompt is None:
        return DEFAULT_BASELINE
    counter = counter_for("")
    before = 0
    for event in events:
        if isinstance(event, AssistantMessage):
            break
        before += count_event(event, counter)
    return max(prompt - before, 1_000)


def write_events(path: Path, recording: Recording) -> None:
    """A recording as Condensate events, one JSON object a line (``load`` reads it back)."""
    created = ThreadCreated(
        at=recording.events[0].at if recording.events else EPOCH,
        engine=recording.engine,
        model=recording.model,
        cwd="/replay",
        baseline_tokens=recording.baseline,
    )
    with path.open("w", encoding="utf-8") as handle:
        for event in _chain(created, recording.events):
            handle.write(event.model_dump_json() + "\n")


def _chain(first: Event, rest: Iterable[Event]) -> Iterator[Event]:
    yield first
    yield from rest
