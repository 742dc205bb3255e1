"""What the daemon answers about threads: a thread with its usage and costs, the list, and
the short answers of the calls that act on one (a message, an interrupt, a pin, a context
tool, an archive). Pure."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from condensate.api.answer import Answer
from condensate.api.compaction import ThinkingDropped
from condensate.events import AskOpened, ResetPolicy


class Usage(Answer):
    """How full the thread's next prompt is, in tokens (``meter.ContextUsage``)."""

    used: int
    window: int
    ceiling: int
    line: int
    fraction: float
    """``used / line``, to 4 places."""
    anchored: bool
    """``used`` stands on the provider's last count, not only on local estimates."""
    resolved: bool
    """``window`` is the model's known size, not a fallback guess."""


class Tokens(Answer):
    """Tokens the provider billed, by class."""

    input: int
    cache_write: int = Field(alias="cacheWrite")
    cache_read: int = Field(alias="cacheRead")
    output: int
    cache_write_1h: int = Field(default=0, alias="cacheWrite1h")
    """Of ``cacheWrite``, the tokens written for an hour (Anthropic's one-hour entries)."""
    compaction_input: int = Field(default=0, alias="compactionInput")
    compaction_output: int = Field(default=0, alias="compactionOutput")
    """A server-side compaction's tokens, billed beside the calls' own."""


class SessionCosts(Answer):
    """What one session of the thread's engine spent on one model."""

    session: str
    model: str
    calls: int
    tokens: Tokens
    usd: float | None
    """At list price; null when the model has no price."""


class Costs(Answer):
    """What the provider billed for the thread, in all and per session and model."""

    calls: int
    tokens: Tokens
    usd: float | None
    """At list price; null while a model in ``unpriced`` has no price."""
    unpriced: list[str]
    sessions: list[SessionCosts]
    thinking_dropped: ThinkingDropped = Field(alias="thinkingDropped")


class ResetState(ResetPolicy):
    """An agent-reset thread's policy (its keys as the log stores them), and its resets."""

    resets: int


ThreadStatus = Literal["running", "waiting-for-approval", "idle"]
"""A thread this daemon runs: running a turn, that turn waiting on an operator's answer to a
tool call (``GET /threads/:id/approvals``), or idle between turns."""

TITLE_CHARS = 80


def title_of(brief: str) -> str:
    """A thread's title: its brief's first non-empty line, cut to ``TITLE_CHARS``."""
    line = next((ln.strip() for ln in brief.splitlines() if ln.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


class Thread(Answer):
    """A thread this daemon runs."""

    id: str
    title: str
    """The brief's first line, at most 80 characters: what tells threads apart."""
    engine: str
    model: str
    cwd: str
    head: bool
    parent: str | None
    status: ThreadStatus
    owner: str | None
    """In a fleet, this daemon; null on SQLite."""
    events: int
    """The seq of the thread's last event."""
    usage: Usage
    ceiling: int
    line: int
    over_line: str | None = Field(alias="overLine")
    """Why the last request the gateway held went on past the line, if one did."""
    costs: Costs
    pending_ask: AskOpened | None = Field(alias="pendingAsk")
    children: list[str]
    """Child threads not joined yet."""
    reset: ResetState | None
    """Null unless the thread is in agent-reset mode."""


class ThreadElsewhere(Answer):
    """In a fleet, a thread another daemon owns (``elsewhere``), or none does while it
    changes hands (``unowned``)."""

    id: str
    status: Literal["elsewhere", "unowned"]
    owner: str
    owner_url: str = Field(alias="ownerUrl")
    events: int


AnyThread = Annotated[Thread | ThreadElsewhere, Field(discriminator="status")]
"""A thread as any daemon of a fleet shows it."""


class ThreadList(Answer):
    """This daemon's threads; in a fleet, every other daemon's after them."""

    threads: list[AnyThread]


class MessageSent(Answer):
    """A message logged for the thread (a running turn takes it at its next call)."""

    seq: int
    thread: str


class Interrupted(Answer):
    interrupted: Literal[True]
    thread: str


class Pinned(Answer):
    seq: int | None
    """The ``message.pinned`` event's seq; null when the message was kept already."""
    pinned: int
    pins: list[int]
    """Every seq the thread keeps through every tier now."""


class ToolAnswer(Answer):
    """A context tool's answer, as the agent gets it as its result."""

    text: str
    is_error: bool = Field(alias="isError")


class Archived(Answer):
    """A thread moved out of the live log into its archive file."""

    thread: str
    file: str
    host: str
    archived_at: str = Field(alias="archivedAt")
    last_seq: int = Field(alias="lastSeq")
    events: int
    snapshots: int
    digest: str


class Launch(Answer):
    """How the wrapper starts the person's CLI: the binary, the arguments before theirs, the
    variables added to their environment (the gateway's base URL with the session's pass)."""

    binary: str
    args: list[str]
    env: dict[str, str]
    logins: list[str]
    """What shows the person has a login of their own (variables, ``~/`` files)."""
    key_variable: str = Field(alias="keyVariable")
    key: str
    """Given as ``keyVariable`` to a person with no login: the daemon's credential is used."""
    keyless_args: list[str] = Field(alias="keylessArgs")
    """Added after ``args`` for a person with no login (the CLI then reads ``keyVariable``)."""


class Attached(Answer):
    """``POST /attach``: the thread of the person's CLI session, and how to start the CLI."""

    thread: Thread
    launch: Launch


class Detached(Answer):
    """``POST /threads/:id/detach``: the session's turn has ended."""

    thread: str
    outcome: str
