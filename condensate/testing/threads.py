"""Build thread logs in memory, with chosen token sizes, for tests and benchmarks.

``ThreadBuilder`` hands out ``Stored`` events with consecutive seqs and keeps a projection up to
date, so a test can say "a 3,000-token file read" and then ask the planner. Sizes are given, not
counted, so tables stay readable; ``count=True`` counts real tokens instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from condensate.core.projector import Projection
from condensate.core.tokens import count_event, counter_for
from condensate.events import (
    Answerer,
    AskAnswered,
    AskMode,
    AskOpened,
    AssistantMessage,
    ChildJoined,
    ChildSpawned,
    CompactionMode,
    CompactionRequested,
    Engine,
    Event,
    ModelRefused,
    ModelUsage,
    Stored,
    SystemLine,
    ThinkingBlock,
    ThreadCreated,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnOutcomeKind,
    TurnStarted,
    UserMessage,
)

EPOCH = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@dataclass
class ThreadBuilder:
    """A thread log under construction, with its projection folded as it grows."""

    engine: Engine = "api"
    head: bool = False
    baseline: int = 2_000
    model: str = "anthropic:claude-opus-5-5"
    thread_id: str = "t1"
    recall: bool = False
    clamp_tokens: int | None = None
    """What ``ThreadCreated`` records of the engine and its settings, as the runtime writes
    them (``recall`` shows in receipts, ``clamp_tokens`` in the view)."""
    count: bool = False
    clock: datetime = EPOCH
    log: list[Stored] = field(default_factory=list)
    view: Projection = field(default_factory=Projection)
    _calls: int = 0

    def __post_init__(self) -> None:
        self.add(
            ThreadCreated(
                at=self.clock,
                engine=self.engine,
                model=self.model,
                cwd="/work",
                head=self.head,
                baseline_tokens=self.baseline,
                recall=self.recall,
                clamp_tokens=self.clamp_tokens,
            ),
            0,
        )

    @property
    def seq(self) -> int:
        return len(self.log)

    def tick(self, seconds: float = 1.0) -> datetime:
        self.clock += timedelta(seconds=seconds)
        return self.clock

    def add(self, event: Event, tokens: int | None = None) -> Stored:
        if tokens is None or self.count:
            tokens = count_event(event, counter_for(self.model))
        stored = Stored(self.thread_id, self.seq + 1, event, tokens)
        self.log.append(stored)
        self.view.apply(stored)
        return stored

    # -- conversation ------------------------------------------------------------------------

    def turn(self, text: str = "steer", tokens: int = 50, *, pinned: bool = False) -> Stored:
        self.add(TurnStarted(at=self.tick()))
        return self.user(text, tokens, pinned=pinned)

    def end(self, outcome: TurnOutcomeKind = "completed") -> Stored:
        """The running turn ends."""
        return self.add(TurnEnded(at=self.tick(), outcome=outcome), 0)

    def user(self, text: str = "steer", tokens: int = 50, *, pinned: bool = False) -> Stored:
        return self.add(UserMessage(at=self.tick(), text=text, pinned=pinned), tokens)

    def call(
        self,
        tool: str = "read",
        argument: str = "src/app.py",
        tokens: int = 1_000,
        *,
        error: bool = False,
        text: str = "",
        output: str | None = None,
        thinking: tuple[ThinkingBlock, ...] = (),
    ) -> tuple[Stored, Stored]:
        """One assistant message with one tool call, and its result of ``tokens`` tokens."""
        (assistant, *results) = self.batch(
            [(tool, argument, tokens, error, output)], text=text, thinking=thinking
        )
        return assistant, results[0]

    def batch(
        self,
        calls: list[tuple[str, str, int, bool, str | None]],
        text: str = "",
        thinking: tuple[ThinkingBlock, ...] = (),
    ) -> list[Stored]:
        """An assistant message with parallel calls, then all their results."""
        ids = []
        tool_calls = []
        for tool, argument, _, _, _ in calls:
            self._calls += 1
            ids.append(f"call_{self._calls}")
            tool_calls.append(ToolCall(id=ids[-1], name=tool, arguments={"arg": argument}))
        message = AssistantMessage(
            at=self.tick(), text=text, thinking=thinking, tool_calls=tuple(tool_calls)
        )
        out = [self.add(message, 30)]
        for call_id, (tool, argument, tokens, error, output) in zip(ids, calls, strict=True):
            body = output if output is not None else f"{tool} {argument} output " * 4
            result = ToolResult(
                at=self.tick(),
                call_id=call_id,
                tool=tool,
                argument=argument,
                output=body,
                is_error=error,
            )
            out.append(self.add(result, tokens))
        return out

    def reply(self, text: str = "done", tokens: int = 40) -> Stored:
        return self.add(AssistantMessage(at=self.tick(), text=text), tokens)

    def usage(self, prompt: int | None = None) -> Stored:
        """The provider counted the prompt as it stands (by default: baseline + view)."""
        count = self.baseline + self.view.view_tokens if prompt is None else prompt
        return self.add(ModelUsage(at=self.tick(), input=10, cache_read=count - 10), 0)

    def refused(self, tokens: int | None = None, limit: int | None = None) -> Stored:
        return self.add(
            ModelRefused(at=self.tick(), message="prompt is too long", tokens=tokens, limit=limit),
            0,
        )

    def spawn(self, child_id: str = "c1") -> Stored:
        assistant, _ = self.call("spawn", child_id, 60)
        call_id = assistant.event.tool_calls[0].id  # type: ignore[union-attr]
        return self.add(
            ChildSpawned(at=self.tick(), child_id=child_id, brief="sub-task", call_id=call_id), 0
        )

    def join(self, child_id: str = "c1", result: str = "child result") -> Stored:
        return self.add(ChildJoined(at=self.tick(), child_id=child_id, result=result), 0)

    def request(
        self,
        mode: CompactionMode = "summary",
        summary: str | None = None,
        keep_from: int | None = None,
        by: Literal["thread", "operator"] = "thread",
    ) -> Stored:
        return self.add(
            CompactionRequested(
                at=self.tick(), mode=mode, summary=summary, keep_from=keep_from, by=by
            ),
            0,
        )

    def ask(self, ask_id: str = "a1", minutes: float = 5) -> Stored:
        return self.add(
            AskOpened(
                at=self.tick(),
                ask_id=ask_id,
                deadline=self.clock + timedelta(minutes=minutes),
                used=0,
                line=0,
            ),
            0,
        )

    def answer(
        self,
        ask_id: str = "a1",
        mode: AskMode = "decline",
        by: Answerer = "operator",
        summary: str | None = None,
    ) -> Stored:
        return self.add(
            AskAnswered(
                at=self.tick(),
                ask_id=ask_id,
                mode=mode,
                by=by,
                summary=summary,
            ),
            0,
        )

    def line(self, code: str, text: str = "note") -> Stored:
        return self.add(SystemLine(at=self.tick(), code=code, text=text), 0)
