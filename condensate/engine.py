"""The seam between the runtime and the engines in ``adapters/``.

An engine runs one turn of a thread at a time through a ``TurnContext``: it reads the view,
appends events, and calls ``checkpoint`` where its engine allows a window (before every model
call for the native loop; after tool use for Claude Code; after a turn for Codex). The runtime
implements the context; the engines never touch the store, the planner or the curator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Literal, Protocol, runtime_checkable

from condensate.events import Engine, Event, Stored, Window
from condensate.meter import ContextUsage
from condensate.projector import Projection
from condensate.providers import ModelClient


@dataclass(frozen=True)
class Verdict:
    """What the engine tells its tool: run it, or refuse it with ``reason``."""

    allowed: bool
    reason: str
    by: str


@dataclass(frozen=True)
class ThreadSpec:
    """What a thread is: set once, in its ``thread.created`` event."""

    engine: Engine
    model: str
    cwd: str
    brief: str
    persona: str = ""
    tools: tuple[str, ...] = ()
    permissions: str = "default"
    head: bool = False
    parent: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """What a window check decided. ``window`` is set when one was taken (an engine that
    restarts sessions applies it); ``stop`` holds the reason when the turn must end;
    ``missed`` why a due cut was not made (its summary did not arrive)."""

    usage: ContextUsage
    window: Window | None = None
    stop: str | None = None
    missed: str | None = None


@dataclass(frozen=True)
class TurnOutcome:
    outcome: Literal["completed", "stopped", "interrupted", "failed"]
    reason: str = ""
    last_text: str = ""


class TurnContext(Protocol):
    """What an engine may do during a turn."""

    @property
    def thread_id(self) -> str: ...

    @property
    def spec(self) -> ThreadSpec: ...

    @property
    def view(self) -> Projection: ...

    async def append(self, events: Event | Sequence[Event]) -> list[Stored]: ...

    async def checkpoint(self) -> Checkpoint: ...

    def client(self) -> ModelClient: ...

    async def spawn(self, brief: str, call_id: str, model: str | None = None) -> str: ...

    async def join(self, child_id: str, call_id: str) -> str: ...

    async def approve(
        self, tool: str, argument: str, *, detail: str = "", call_id: str | None = None
    ) -> Verdict:
        """Ask the operator whether a tool may run (a thread with ``permissions: "ask"``):
        logged, shown at ``GET /threads/:id/approvals``, denied when its deadline passes."""
        ...

    def now(self) -> datetime: ...


class EngineAdapter(Protocol):
    """Drives one engine for one thread. Implementations live in ``adapters/``."""

    name: ClassVar[str]

    def baseline(self, spec: ThreadSpec) -> int:
        """Tokens of the fixed part of every prompt: system prompt, tool schemas, skills."""
        ...

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome: ...

    async def apply_window(self, window: Window, view: Projection) -> None:
        """A window was taken outside the engine's own checkpoint (an ask's deadline): apply
        it the engine's way. The native loop needs nothing; it projects every call."""
        ...

    async def close(self) -> None: ...


INTERRUPTED_BY_OPERATOR = "interrupted by the operator"
"""The reason a turn the operator interrupted (``POST /threads/:id/interrupt``) ends with."""


@runtime_checkable
class Interruptible(Protocol):
    """An engine that can end its running turn itself, more cleanly than a cancellation: a
    CLI engine asks its child to stop the turn (Claude Code's ``interrupt`` control request,
    Codex's ``turn/interrupt``) and keeps the child for the next turn. The runtime cancels
    the turn when the engine has not ended it within a grace period, and cancels turns of
    engines without this method (the native loop) at once."""

    async def interrupt(self) -> None:
        """Ask the running turn to end; return at once. The turn then ends ``interrupted``
        with ``INTERRUPTED_BY_OPERATOR``, its open tool calls closed."""
        ...


@dataclass(frozen=True)
class GatewayAccess:
    """How a CLI engine reaches its provider through the daemon's gateway: the base URLs to
    give the CLI, and a pass per session (its API key or bearer token). Issuing a pass
    retires the thread's earlier one: requests of an older session are refused."""

    anthropic_url: str
    openai_url: str
    issue: Callable[[], str]
    session: Callable[[str], None]
    """The engine now runs this session (Claude Code's session id, Codex's thread id):
    requests that name another are refused."""


@dataclass(frozen=True)
class EngineEnv:
    """What an engine that runs a CLI needs from the daemon's settings: where its state goes
    and how it reaches the provider. Built by the runtime for each thread."""

    home: Path
    """The daemon's state directory; a CLI engine keeps its own state under it."""
    thread_id: str
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str = ""
    claude_binary: str | None = None
    """``CONDENSATE_CLAUDE_BINARY``; ``None``: the project's pinned CLI, else ``claude`` on PATH."""
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = ""
    codex_binary: str | None = None
    """``CONDENSATE_CODEX_BINARY``; ``None``: the project's pinned CLI, else ``codex`` on PATH."""
    codex_windowing: bool = True
    """``CONDENSATE_CODEX_WINDOWING``; off hands compaction back to Codex (from the next
    session the engine starts)."""
    daemon_url: str = ""
    """Where the daemon's HTTP API answers (a loopback address): a head's tools call it."""
    daemon_token: str = ""
    """The API's bearer token, for the same tools."""
    gateway: GatewayAccess | None = None
    """Set when a daemon serves the gateway: the CLI then holds a pass, never the provider's
    key, and its provider's counts come from the gateway rather than from the CLI."""

    def restarts_for(self, window: Window | None) -> bool:
        """Whether a CLI session must restart to apply ``window``: always without a gateway;
        through one only for a summary or a drop, as the gateway applies cheap tiers to the
        requests themselves."""
        if window is None:
            return False
        return self.gateway is None or window.window_kind in ("summary", "drop")


EngineFactory = Callable[[ThreadSpec, EngineEnv], EngineAdapter]
Engines = Mapping[str, EngineFactory]
