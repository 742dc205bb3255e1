"""The seam between the runtime and the engines in ``adapters/``.

An engine is a package that declares an ``EngineInfo`` (its name, its ceiling share and cap,
whether its heads are asked or cut, where it checkpoints, its settings, how to make one) and
registers it under the ``condensate.engines`` entry-point group; ``registry`` finds
what is installed. The core knows engines only through what they declare.

An engine runs one turn of a thread at a time through a ``TurnContext``: it reads the view,
appends events, and calls ``checkpoint`` where it allows a window (its ``checkpoints``). The
runtime implements the context; the engines never touch the store, the planner or the curator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol, TypeVar, runtime_checkable

from pydantic_settings import BaseSettings, SettingsConfigDict

from condensate.config import read_settings
from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection
from condensate.events import Attached, Engine, Event, ResetPolicy, Stored, TurnOutcomeKind, Window
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
    reset: ResetPolicy | None = None
    """Set for an agent-reset thread (its agent condenses its own context)."""
    output_cap: int | None = None
    """Tokens of a tool result the view shows; a larger one is paged (None: not paged)."""
    near_limit_warnings: bool = False
    """Requests near the line carry a request-scoped URGENT or CRITICAL notice."""
    attached: Attached | None = None
    """Set for a CLI a person runs in their own terminal (``condensate claude``): its one
    long turn is the person's session, and the engine's CLI is never started by the daemon."""
    attached_pid: int | None = None
    """The process of the wrapper the person ran: the session ends when it is gone."""


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
    outcome: TurnOutcomeKind
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

    def usage(self) -> ContextUsage:
        """How full the next prompt is, as the runtime measures it (no window is taken)."""
        ...

    async def read(self, seq: int) -> Stored:
        """The thread's event at ``seq``, from the log (``EventNotFound`` when none)."""
        ...

    def client(self, model: str | None = None) -> ModelClient:
        """The client of ``model`` (default: the thread's)."""
        ...

    async def spawn(self, brief: str, call_id: str, model: str | None = None) -> str: ...

    async def join(self, child_id: str, call_id: str) -> str: ...

    async def approve(
        self, tool: str, argument: str, *, detail: str = "", call_id: str | None = None
    ) -> Verdict:
        """Ask the operator whether a tool may run (a thread with ``permissions: "ask"``):
        logged, shown at ``GET /threads/:id/approvals``, denied when its deadline passes."""
        ...

    def now(self) -> datetime: ...

    def streamed(self, text: str) -> None:
        """A chunk of the reply as the model writes it: shown to whoever follows the thread
        live (``condensate chat``), never logged (the whole message is)."""
        ...


class EngineAdapter(Protocol):
    """Drives one engine for one thread. Implementations live in ``adapters/``; their name
    and traits are their package's ``EngineInfo``."""

    def baseline(self, spec: ThreadSpec) -> int:
        """Tokens of the fixed part of every prompt: system prompt, tool schemas, skills."""
        ...

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome: ...

    async def apply_window(self, window: Window) -> None:
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
class Attachment:
    """How a person's own CLI reaches the gateway: ``url``, its base URL with the session's
    pass in its path, and the pass itself (the key a person with no login is given)."""

    url: str
    credential: str


@dataclass(frozen=True)
class GatewayAccess:
    """How a CLI engine reaches its provider through the daemon's gateway: the base URL to
    give the CLI (its engine's API's, ``EngineInfo.gateway_api``), and a pass per session
    (its API key or bearer token), good on that API's endpoints only. Issuing a pass retires
    the thread's earlier one: requests of an older session are refused."""

    url: str
    issue: Callable[[], str]
    session: Callable[[str], None]
    """The engine now runs this session (Claude Code's session id, Codex's thread id):
    requests that name another are refused."""
    attach: Callable[[], Attachment] | None = None
    """A person's own CLI session's pass (``condensate claude``), and the base URL with it in
    the path, so the CLI keeps its own credential; the same after a daemon restart."""


class EngineSettings(BaseSettings):
    """An engine's own settings, each read from ``CONDENSATE_<NAME>`` as the daemon's are.
    An engine that has some subclasses this and names the subclass in its ``EngineInfo``."""

    model_config = SettingsConfigDict(
        env_prefix="CONDENSATE_", extra="ignore", frozen=True, populate_by_name=True
    )

    def ceiling_cap(self) -> int | None:
        """The operator's cap on this engine's working ceiling, when its settings hold one."""
        return None

    def windowing(self) -> bool:
        """Whether Condensate windows this engine's threads (off: the engine compacts on its
        own, and the gateway lets its requests pass unmeasured)."""
        return True


_Own = TypeVar("_Own", bound=EngineSettings)


def own_settings(kind: type[_Own], given: EngineSettings | None) -> _Own:
    """``given`` when it is an engine's settings of ``kind``, else ``kind``'s read from the
    environment and the configuration file (an engine made outside a daemon, as a benchmark
    makes one)."""
    return given if isinstance(given, kind) else read_settings(kind)


@dataclass(frozen=True)
class EngineEnv:
    """What an engine needs from the daemon: where its state goes, how it reaches the
    provider, and its own settings. Built by the runtime for each thread."""

    home: Path
    """The daemon's state directory; a CLI engine keeps its own state under it."""
    thread_id: str
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str = ""
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = ""
    settings: EngineSettings | None = None
    """The engine's own settings (``EngineInfo.settings``); None: read from the environment."""
    daemon_url: str = ""
    """Where the daemon's HTTP API answers (a loopback address): a head's tools call it."""
    thread_token: str = ""
    """The thread's own bearer token for the same tools (``condensate.api.tokens``): good on
    its tool and compaction routes only, never the daemon's whole token."""
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


@dataclass(frozen=True)
class Launch:
    """How a person's own CLI is started in their terminal (``condensate claude``): the
    binary, the arguments put before theirs, and the variables added to their environment
    (the gateway's base URL with the session's pass in it, the CLI's own compaction off)."""

    binary: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    logins: tuple[str, ...] = ()
    """What shows that the person has a login of their own: variables, and files under their
    home (``~/...``); with none, ``key_variable`` is given the session's pass and the daemon's
    credential is used."""
    key_variable: str = ""
    keyless_args: tuple[str, ...] = ()
    """Arguments added (after ``args``) for a person with no login: the CLI then reads its
    key from ``key_variable``."""


Launcher = Callable[[EngineSettings, str, bool, Path], Launch]
"""An engine's ``Launch`` for its settings, the gateway's base URL, whether the session is
managed (windows taken in flight) or run for costs and logging only, and the daemon's state
directory (where it may keep what the CLI reads, a model catalog)."""

EngineFactory = Callable[[ThreadSpec, EngineEnv], EngineAdapter]

Checkpoints = Literal["before-each-call", "after-tool-results", "after-each-response"]
"""Where an engine runs the window check: before every model call (a loop that projects each
call), after each batch of tool results, or after each counted response and each turn."""


@dataclass(frozen=True)
class EngineInfo:
    """What the core knows of an engine, declared by its package.

    >>> EngineInfo("echo", "Echo", make=EchoEngine, checkpoints="before-each-call")
    """

    name: Engine
    """What threads are created with (``"engine": ...``) and what their logs keep."""
    title: str
    """How messages name it."""
    make: EngineFactory
    checkpoints: Checkpoints
    ceiling_share: float = 0.40
    ceiling_cap: int = 120_000
    """The working ceiling: this share of the model's window, at most this many tokens."""
    heads: Literal["asked", "cut"] = "cut"
    """Whether a head thread is asked to compact (through tools the engine gives it) or cut
    like any thread."""
    restarts: bool = False
    """The engine applies a summary by starting a new session with the window rendered as
    its first message (not by projecting each call): the kept tail is billed again there,
    and the gateway holds the old session's requests until the new one starts."""
    default: bool = False
    """The engine a thread created without one runs on."""
    recall: bool = False
    """Its agent has ``recall(seq)``: a receipt's original is redeemable, and says so."""
    own_context: tuple[str, ...] = ()
    """How the text blocks open that the engine's CLI itself writes into the conversation
    (its environment, its instructions): an agent's reset keeps them, as fixed context."""
    announces_retries: bool = False
    """The engine's CLI says when it retries its provider on its own (Claude Code's
    ``api_retry`` lines), and the engine tells the operator; else the gateway, which relays
    the provider's errors, tells after a few in a row."""
    compaction_opens: tuple[str, ...] = ()
    """How the last user text of the CLI's own compaction request opens (Claude Code's
    ``/compact``): a person's session forwards it with Condensate's view, never holds it, and
    logs it as the CLI's compaction, not as the person's message."""
    gateway_api: str | None = None
    """The API its CLI speaks through the daemon's gateway (``"anthropic"``: Messages,
    ``"openai"``: Responses); a pass issued to its threads is good there only. None: its
    threads get no gateway access."""
    session_header: str | None = None
    """The request header in which the engine's CLI names the session a model request
    belongs to: through the gateway, a request naming an older session is refused."""
    settings: type[EngineSettings] = EngineSettings
    providers: tuple[str, ...] = ()
    """The providers its threads' models reach (the daemon warns at start when one has no
    credential); empty: whichever a thread's model names."""
    thread_dirs: str | None = None
    """The directory under the state directory in which the engine keeps one directory per
    thread for its CLI (``claude``: ``$CONDENSATE_HOME/claude/<thread>``). No CLI session
    outlives a restart, so the daemon removes them at start (``statedir.clear_thread_dirs``)."""
    cli_model: Callable[[Sequence[str]], str] | None = None
    """The model the engine's CLI runs with a person's arguments (the one they name, else
    its default), as threads name models (``anthropic:claude-opus-5-5``)."""
    launch: Launcher | None = None
    """How a person runs the engine's CLI in their own terminal through the gateway
    (``condensate claude``); None: the engine has no such CLI."""
    check: Callable[[EngineSettings], str] | None = None
    """What ``condensate doctor`` reports: the engine's binary and version; raises
    ``ConfigError`` saying why it cannot run."""


Engines = Mapping[str, EngineInfo]

__all__ = [
    "INTERRUPTED_BY_OPERATOR",
    "Attachment",
    "Checkpoint",
    "Checkpoints",
    "EngineAdapter",
    "EngineEnv",
    "EngineFactory",
    "EngineInfo",
    "EngineSettings",
    "Engines",
    "GatewayAccess",
    "Interruptible",
    "Launch",
    "Launcher",
    "ThreadSpec",
    "TurnContext",
    "TurnOutcome",
    "Verdict",
    "own_settings",
]
