"""The TurnContext the runtime hands an engine for a turn: the thread's view, its appends, its
window check (under the thread's lock), its model client, children, approvals, and the
clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from condensate.runtime import approvals
from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection
from condensate.engine import Checkpoint, ThreadSpec, Verdict
from condensate.events import Event, Stored
from condensate.runtime.live import DELTA
from condensate.providers import ModelClient
from condensate.runtime.thread import Services, Thread


@dataclass
class RuntimeTurn:
    """The TurnContext an engine gets: one thread of the runtime, for one turn."""

    runtime: Services
    thread: Thread

    @property
    def thread_id(self) -> str:
        return self.thread.thread_id

    @property
    def spec(self) -> ThreadSpec:
        return self.thread.spec

    @property
    def view(self) -> Projection:
        return self.thread.projection

    async def append(self, events: Event | Sequence[Event]) -> list[Stored]:
        return await self.runtime.append(self.thread, events)

    async def checkpoint(self) -> Checkpoint:
        async with self.thread.lock:
            return await self.runtime.checkpoint(self.thread)

    def usage(self) -> ContextUsage:
        return self.runtime.usage(self.thread)

    async def read(self, seq: int) -> Stored:
        return await self.runtime.log.read(self.thread.thread_id, seq)

    def client(self, model: str | None = None) -> ModelClient:
        return self.runtime.client_for(model or self.thread.spec.model)

    async def spawn(self, brief: str, call_id: str, model: str | None = None) -> str:
        return await self.runtime.spawn_child(self.thread, brief, call_id, model)

    async def join(self, child_id: str, call_id: str) -> str:
        return await self.runtime.join_child(self.thread, child_id, call_id)

    async def approve(
        self, tool: str, argument: str, *, detail: str = "", call_id: str | None = None
    ) -> Verdict:
        return await approvals.request(
            self.runtime, self.thread, tool=tool, argument=argument, detail=detail, call_id=call_id
        )

    def now(self) -> datetime:
        return self.runtime.clock()

    def streamed(self, text: str) -> None:
        live = self.runtime.live
        if text and live.listening(self.thread.thread_id):
            live.ephemeral(self.thread.thread_id, DELTA, {"text": text})
