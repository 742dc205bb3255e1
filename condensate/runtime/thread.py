"""A thread in memory, and what the runtime's parts (admission, approvals, asks, a turn's
context) use of the runtime: they name this protocol, not ``runtime.Runtime``, so that no
import runs in a circle. ``Runtime`` is the one implementation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio

from condensate.api.threads import ThreadStatus
from condensate.core.meter import ContextUsage, ModelWindow
from condensate.core.projector import Projection
from condensate.core.window_step import Host
from condensate.engine import Checkpoint, EngineAdapter, ThreadSpec
from condensate.engine.registry import Profile
from condensate.eventlog import EventStore
from condensate.events import Event, ResetWarned, Stored
from condensate.providers import ModelClient
from condensate.runtime.gateway_port import Clamps
from condensate.runtime.live import Hub
from condensate.settings import Settings


@dataclass
class Thread:
    """A thread in memory: its spec, its projection and what is running for it."""

    thread_id: str
    spec: ThreadSpec
    projection: Projection
    window: ModelWindow
    engine: EngineAdapter
    profile: Profile
    """Its engine as this daemon runs it: the ceilings and planner settings it is planned with."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while a window check runs or an answer is recorded."""
    appending: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while events are written and folded."""
    changed: anyio.Event = field(default_factory=anyio.Event)
    running: bool = False
    snapshot_at: int = 0
    turn_done: anyio.Event = field(default_factory=anyio.Event)
    turn_scope: anyio.CancelScope | None = None
    """The running turn's scope: cancelling it ends that turn and nothing else."""
    interrupted: str | None = None
    """Why the running turn is being interrupted (the operator asked), once it is."""
    restart_pending: bool = False
    """A summary or drop was taken for a request the gateway held: until the engine's next
    session starts, every request of the old one is answered with Condensate's own reply."""
    over_line: str | None = None
    """Why the last request the gateway held went on over the line, if it did."""
    receipts: Mapping[str, str] = field(default_factory=dict)
    clamps: Clamps = field(default_factory=Clamps)
    receipts_at: tuple[int, int, int] = (-1, -1, -1)
    """The view's layout (and, for a thread that resets or pages, its last seq) ``receipts``
    were taken at."""
    counting: int = 0
    """Calls whose count the gateway announced and has not logged yet."""
    warning: ResetWarned | None = None
    """The staged warning the gateway put in the agent-reset thread's last request: logged
    with that request's count when it succeeds."""
    released: bool = False
    """Another daemon of the fleet holds the thread now: nothing more is written for it here."""
    published_status: ThreadStatus = "idle"
    """The status the live channel last said (it says each change once)."""

    @property
    def status(self) -> ThreadStatus:
        """What ``GET /threads``, the live channel and the metrics say of it: ``running``
        during a turn, ``waiting-for-approval`` while that turn waits on an operator's answer
        to a tool call, else ``idle``."""
        if not self.running:
            return "idle"
        # Only a running turn's engine waits on a request: a turn's end and a restart deny
        # whatever was still pending.
        return "waiting-for-approval" if self.projection.approvals else "running"

    def notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class Services(Protocol):
    """The runtime as its parts use it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def log(self) -> EventStore: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def client_for(self) -> Callable[[str], ModelClient]: ...

    @property
    def live(self) -> Hub: ...

    async def append(self, thread: Thread, events: Event | Sequence[Event]) -> list[Stored]: ...

    def usage(self, thread: Thread) -> ContextUsage: ...

    def host(self, thread: Thread) -> Host: ...

    async def counted(self, thread: Thread) -> None: ...

    async def checkpoint(self, thread: Thread) -> Checkpoint: ...

    def spawn_task(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None: ...

    async def spawn_child(
        self, parent: Thread, brief: str, call_id: str, model: str | None
    ) -> str: ...

    async def join_child(self, parent: Thread, child_id: str, call_id: str) -> str: ...
