"""A scripted ``TurnContext``: the runtime as an engine's turn sees it, with no runtime behind
it. The test scripts what the turn will be told (each ``checkpoint``'s answer, the view, the
meter's reading) and reads what the turn did (the events it appended, its streamed text), as
mitmproxy's ``Playbook`` scripts a sans-I/O layer's events and reads its commands.

>>> ctx = ScriptedTurn(checks=[Checkpoint(usage(), window=window())])
>>> outcome = await engine.run_turn(ctx)
>>> ctx.lines()        # the system lines the turn logged

What a scripted turn cannot answer (a model client, the log, children, approvals) raises
``NotImplementedError`` naming the call: a test that needs one wants a real runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection
from condensate.engine import Checkpoint, ThreadSpec, Verdict
from condensate.events import Event, Stored, SystemLine, now_utc
from condensate.providers import ModelClient
from condensate.testing.builders import usage

Kind = TypeVar("Kind")


def _spec() -> ThreadSpec:
    return ThreadSpec(engine="fake", model="anthropic:m", cwd="/", brief="b")


@dataclass
class ScriptedTurn:
    """A ``TurnContext`` whose checkpoints answer from ``checks`` in order (then: go on,
    nothing due), and which keeps what the turn appended."""

    checks: list[Checkpoint] = field(default_factory=list)
    """What the next checkpoints answer, first first."""
    reading: ContextUsage = field(default_factory=usage)
    """What ``usage()`` and every unscripted checkpoint report."""
    view: Projection = field(default_factory=Projection)
    thread_id: str = "t-test"
    spec: ThreadSpec = field(default_factory=_spec)
    appended: list[Event] = field(default_factory=list)
    streamed_text: list[str] = field(default_factory=list)
    checked: int = 0
    """How many checkpoints the turn ran."""

    async def append(self, events: Event | Sequence[Event]) -> list[Stored]:
        self.appended.extend(events if isinstance(events, Sequence) else [events])
        return []

    async def checkpoint(self) -> Checkpoint:
        self.checked += 1
        return self.checks.pop(0) if self.checks else Checkpoint(self.reading)

    def usage(self) -> ContextUsage:
        return self.reading

    def now(self) -> datetime:
        return now_utc()

    def streamed(self, text: str) -> None:
        self.streamed_text.append(text)

    def client(self, model: str | None = None) -> ModelClient:
        raise NotImplementedError(_unscripted("client"))

    async def read(self, seq: int) -> Stored:
        raise NotImplementedError(_unscripted("read"))

    async def spawn(self, brief: str, call_id: str, model: str | None = None) -> str:
        raise NotImplementedError(_unscripted("spawn"))

    async def join(self, child_id: str, call_id: str) -> str:
        raise NotImplementedError(_unscripted("join"))

    async def approve(
        self, tool: str, argument: str, *, detail: str = "", call_id: str | None = None
    ) -> Verdict:
        raise NotImplementedError(_unscripted("approve"))

    def lines(self) -> list[str]:
        """The codes of the system lines the turn appended, in order."""
        return [e.code for e in self.appended if isinstance(e, SystemLine)]

    def of_kind(self, kind: type[Kind]) -> list[Kind]:
        """What the turn appended of one event class, in order."""
        return [e for e in self.appended if isinstance(e, kind)]


def _unscripted(call: str) -> str:
    return f"A scripted turn has no {call}(): run the engine in a real runtime for that."
