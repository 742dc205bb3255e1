"""Every kind of event a thread's log holds, as frozen, versioned pydantic models.

The log is the truth; the view is folded from it. An event is never edited: a change of
meaning bumps ``v`` and adds an upcaster from the old shape, and old rows are upcast on read.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from condensate.errors import UnknownEventVersion

Engine = str
"""An engine's name, as its package registers it (``condensate.engines``): the log keeps it
and the daemon resolves it to the engine installed under that name."""
WindowKind = Literal["microcompact", "collapse", "summary", "drop"]
Author = Literal["thread", "operator", "curator", "system"]
CheapTier = Literal["microcompact", "collapse"]
"""The windows that clear results and leave receipts."""
CompactionMode = Literal["summary", "microcompact"]
"""What a compaction a head or an operator asks for takes."""
AskMode = Literal[CompactionMode, "decline"]
"""How an ask is answered."""
Answerer = Literal["thread", "operator", "runtime"]
ToolCategory = Literal["reread", "action", "control"]
Attached = Literal["managed", "costs"]
"""A person's own CLI session through the gateway: managed (windows taken in flight), or
for costs and logging only (``--no-manage``)."""
TurnOutcomeKind = Literal["completed", "stopped", "interrupted", "failed"]
"""How a turn ended."""


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = 1
    at: AwareDatetime


class ResetPolicy(BaseModel):
    """An agent-reset thread's condensation: the agent resets its own context (``condense``,
    with a note to its future self) and nothing is cut for it; warnings at ``warnings`` of
    ``budget`` (else the model's window) tell it the context fills; on a provider's
    context-window error the whole view is summarized on ``emergency_model``, if set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    warnings: tuple[float, ...] = (0.75, 0.80, 0.85, 0.90)
    budget: int | None = None
    emergency_model: str | None = None
    emergency_attempts: int = 5
    emergency_scaling: float = 0.8


class ThreadCreated(_Event):
    """A thread's identity: the first event of every log."""

    kind: Literal["thread.created"] = "thread.created"
    engine: Engine
    model: str
    cwd: str
    persona: str = ""
    tools: tuple[str, ...] = ()
    permissions: str = "default"
    head: bool = False
    parent: str | None = None
    baseline_tokens: int = 0
    """System prompt, tool schemas and skills, as measured when the thread was set up."""
    reset: ResetPolicy | None = None
    """Set for an agent-reset thread; None: Condensate's planner windows the thread."""
    recall: bool = False
    """The thread's agent has ``recall``: its receipts say how to get a cleared result back."""
    output_cap: int | None = None
    """Tokens of a tool result the view shows; a larger one is paged (the log keeps it all)."""
    clamp_tokens: int | None = None
    """The clamp (``clamps``): any one message, result or argument longer than this many
    tokens' worth of characters keeps its head and tail in the view (None: no clamp, as for
    every thread created before clamps)."""
    near_limit_warnings: bool = False
    """Each request near the line carries an URGENT or CRITICAL notice in its system prompt."""
    attached: Attached | None = None
    """Set for a CLI a person runs in their own terminal (``condensate claude``): the daemon
    runs none of its turns; its requests through the gateway are its log."""
    attached_pid: int | None = None
    """The process of the wrapper the person ran (``condensate claude``)."""


class BaselineMeasured(_Event):
    """The fixed part of every prompt was measured again (new tools, a new persona)."""

    kind: Literal["baseline.measured"] = "baseline.measured"
    tokens: int


class TurnStarted(_Event):
    kind: Literal["turn.started"] = "turn.started"
    cause: Literal["human", "child", "resume", "queued"] = "human"


class TurnEnded(_Event):
    kind: Literal["turn.ended"] = "turn.ended"
    outcome: TurnOutcomeKind
    reason: str = ""


class UserMessage(_Event):
    """Input in the user role. The first one in a thread is its brief."""

    kind: Literal["message.user"] = "message.user"
    text: str
    author: Literal["human", "parent", "runtime"] = "human"
    pinned: bool = False


class ThinkingBlock(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    signature: str = ""


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AssistantMessage(_Event):
    """One model reply: text, thinking and a batch of tool calls that move together."""

    kind: Literal["message.assistant"] = "message.assistant"
    text: str = ""
    thinking: tuple[ThinkingBlock, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    message_id: str | None = None


class ToolResult(_Event):
    kind: Literal["tool.result"] = "tool.result"
    call_id: str
    tool: str
    argument: str = ""
    """The argument a receipt names: a path, a pattern, a command."""
    output: str
    is_error: bool = False
    category: ToolCategory | None = None
    """Overrides the category the tool's name implies."""


class ModelUsageV1(BaseModel):
    """v1 stored OpenAI's shape, where input includes the cached part."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int
    cached_tokens: int = 0
    output_tokens: int = 0


class ModelUsage(_Event):
    """The provider's own count for one call. Appended before the reply it came with, so it
    measures the view as it stood when this event was appended."""

    kind: Literal["model.usage"] = "model.usage"
    v: int = 2
    input: int
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    model: str = ""
    message_id: str | None = None
    measured: int | None = None
    """The gateway's count of the request before it was forwarded (anchor plus delta)."""
    side: bool = False
    """A call outside the thread's conversation: on another model than the thread's (a
    CLI's title or quota check) or in a context of its own (a subagent's): billed, but it
    measures nothing of the thread's prompt."""
    session: str | None = None
    """The engine's session the call belongs to (Claude Code's session, Codex's thread)."""
    usd: float | None = None
    """The call at its model's list price, stamped when it was logged; None: no price."""
    cache_write_1h: int = 0
    """Of ``cache_write``, the tokens written for an hour (Anthropic's ``ttl: "1h"``), billed
    at the one-hour write price; the rest were written for five minutes."""
    compaction_input: int = 0
    compaction_output: int = 0
    """Tokens a server-side compaction billed beside the reply (Anthropic's
    ``usage.iterations`` entries of type ``compaction``): billed, never part of the prompt."""
    thinking_dropped: int = 0
    """Signed thinking blocks the request went without: taken out by the gateway to keep the
    request valid after an earlier part changed, or dropped by the provider
    (``input_transformations``)."""
    thinking_dropped_tokens: int = 0
    """Those blocks' tokens, as far as they are known (an omitted block's are estimated from
    the reply that produced it)."""

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


class ModelRefused(_Event):
    """The provider refused a prompt as too long for its window."""

    kind: Literal["model.refused"] = "model.refused"
    message: str
    tokens: int | None = None
    limit: int | None = None


class WindowTrigger(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    used: int
    line: int
    ceiling: int
    window: int
    freed: int
    reason: str


class ProbeReport(BaseModel):
    """What the probes found in a curator summary before its window was committed
    (``condensate.core.probes``): each kind's count, what the first answer missed, what a retry
    still missed, what the repair appended, and anything still failing after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checked: dict[str, int]
    missed: tuple[str, ...] = ()
    retried: bool = False
    missed_after_retry: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    """The files the summary had to name: the next summary's probes carry them on."""


class Window(_Event):
    """One context reduction. ``cleared`` names results that became receipts; a summary or a
    drop replaces everything before ``keep_from`` except the brief and pins."""

    kind: Literal["window"] = "window"
    window_kind: WindowKind
    cut: int
    """The last seq the planner saw when it planned this window."""
    cleared: tuple[int, ...] = ()
    keep_from: int | None = None
    summary: str | None = None
    author: Author | None = None
    forced: bool = False
    trigger: WindowTrigger
    request: int | None = None
    """The seq of the compaction request this window carries out."""
    ask: str | None = None
    probes: ProbeReport | None = None
    """A curator summary's probe report (None for any other window)."""


class AskOpened(_Event):
    kind: Literal["ask.opened"] = "ask.opened"
    ask_id: str
    deadline: AwareDatetime
    used: int
    line: int
    seat: str | None = None


class AskAnswered(_Event):
    kind: Literal["ask.answered"] = "ask.answered"
    ask_id: str
    mode: AskMode
    by: Answerer
    summary: str | None = None
    keep_from: int | None = None
    reason: str = ""
    seat: str | None = None


class CompactionRequested(_Event):
    """A compaction queued with nothing pending; taken at the next tool boundary or turn."""

    kind: Literal["compaction.requested"] = "compaction.requested"
    mode: CompactionMode
    by: Literal["thread", "operator"]
    summary: str | None = None
    keep_from: int | None = None
    reason: str = ""
    seat: str | None = None


class ApprovalRequested(_Event):
    """A thread run with ``permissions: "ask"`` wants to run a tool: nothing runs until an
    operator allows it; no answer by ``deadline`` denies it."""

    kind: Literal["approval.requested"] = "approval.requested"
    approval_id: str
    tool: str
    argument: str = ""
    """What a person decides on: the command, the path."""
    detail: str = ""
    """The call's whole input as the engine gave it (JSON)."""
    call_id: str | None = None
    deadline: AwareDatetime


class ApprovalAnswered(_Event):
    kind: Literal["approval.answered"] = "approval.answered"
    approval_id: str
    decision: Literal["allow", "deny"]
    by: Literal["operator", "deadline", "runtime"]
    reason: str = ""


class ChildSpawned(_Event):
    kind: Literal["child.spawned"] = "child.spawned"
    child_id: str
    brief: str
    call_id: str | None = None


class MessagePinned(_Event):
    """A message of the log (``pinned``: its seq) survives every tier from now on, as the
    brief does: pinned by an operator or by the agent (its ``pin`` tool)."""

    kind: Literal["message.pinned"] = "message.pinned"
    pinned: int
    by: Literal["operator", "thread"] = "operator"


class ChildJoined(_Event):
    kind: Literal["child.joined"] = "child.joined"
    child_id: str
    result: str
    call_id: str | None = None


class EngineNotice(_Event):
    """Something an engine did that the log should show: a session started, forked or
    resumed, a CLI crashed, an engine compacted on its own."""

    kind: Literal["engine.notice"] = "engine.notice"
    engine: Engine
    notice: str
    detail: str = ""
    seat: str | None = None
    session_id: str | None = None
    previous_session_id: str | None = None


class SystemLine(_Event):
    """A line the runtime writes for people and for the model: a pause, a stop, a drop."""

    kind: Literal["system.line"] = "system.line"
    code: str
    text: str


class ResetRequested(_Event):
    """The agent called ``condense``: its call, its message to its future self (verbatim),
    and the input boundary, the last seq the request that produced the call held: genuine
    user input after it is kept through the reset."""

    kind: Literal["reset.requested"] = "reset.requested"
    call_id: str
    message: str | None = None
    boundary: int


class ResetCommitted(_Event):
    """The reset took effect: the view starts again from the environment's notice, the
    agent's ``condense`` call and its result, and the genuine user input after ``boundary``.
    It commits the ``reset.requested`` of the same call (written in one batch with it and the
    call's result); one that names another call commits nothing."""

    kind: Literal["reset.committed"] = "reset.committed"
    call_id: str
    boundary: int


class EmergencyReset(_Event):
    """The provider refused an agent-reset thread's prompt as too long for its window, and
    the emergency condenser summarized the whole view: the view starts again from the
    environment's emergency notice, this summary, and the genuine user input after
    ``boundary`` (the last seq the refused request held)."""

    kind: Literal["reset.emergency"] = "reset.emergency"
    summary: str
    boundary: int
    model: str
    attempts: int


class ResetWarned(_Event):
    """An agent-reset thread's agent was warned that its context fills, in the request that
    succeeded (written before that request's reply, where the model read it)."""

    kind: Literal["reset.warned"] = "reset.warned"
    level: float
    used: int
    budget: int
    text: str


class SnapshotTaken(_Event):
    """Projector state up to ``upto`` was saved; the state itself lives beside the log."""

    kind: Literal["snapshot.taken"] = "snapshot.taken"
    upto: int


Event = Annotated[
    ThreadCreated
    | BaselineMeasured
    | TurnStarted
    | TurnEnded
    | UserMessage
    | AssistantMessage
    | ToolResult
    | ModelUsage
    | ModelRefused
    | Window
    | AskOpened
    | AskAnswered
    | CompactionRequested
    | ApprovalRequested
    | ApprovalAnswered
    | ChildSpawned
    | ChildJoined
    | EngineNotice
    | SystemLine
    | ResetRequested
    | ResetCommitted
    | EmergencyReset
    | ResetWarned
    | MessagePinned
    | SnapshotTaken,
    Field(discriminator="kind"),
]
EVENT: TypeAdapter[Event] = TypeAdapter(Event)

EVENT_TYPES: dict[str, type[_Event]] = {
    cls.model_fields["kind"].default: cls
    for cls in (
        ThreadCreated,
        BaselineMeasured,
        TurnStarted,
        TurnEnded,
        UserMessage,
        AssistantMessage,
        ToolResult,
        ModelUsage,
        ModelRefused,
        Window,
        AskOpened,
        AskAnswered,
        CompactionRequested,
        ApprovalRequested,
        ApprovalAnswered,
        ChildSpawned,
        ChildJoined,
        EngineNotice,
        SystemLine,
        ResetRequested,
        ResetCommitted,
        EmergencyReset,
        ResetWarned,
        MessagePinned,
        SnapshotTaken,
    )
}
"""Each kind with its current class; the current version is the class's default ``v``."""


def current_version(kind: str) -> int:
    default = EVENT_TYPES[kind].model_fields["v"].default
    assert isinstance(default, int)
    return default


def _usage_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    old = ModelUsageV1.model_validate(
        {k: raw.pop(k) for k in ("input_tokens", "cached_tokens", "output_tokens") if k in raw}
    )
    return {
        **raw,
        "v": 2,
        "input": old.input_tokens - old.cached_tokens,
        "cache_read": old.cached_tokens,
        "cache_write": 0,
        "output": old.output_tokens,
    }


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("model.usage", 1): _usage_v1_to_v2,
}
"""(kind, v) -> a function from that version's dict to the next version's dict."""


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored dict up to its kind's current version."""
    kind = raw.get("kind")
    if kind not in EVENT_TYPES:
        msg = f"Unknown event kind {kind!r}; this Condensate is older than the log."
        raise UnknownEventVersion(msg)
    target = current_version(kind)
    version = int(raw.get("v", 1))
    while version < target:
        step = UPCASTERS.get((kind, version))
        if step is None:
            msg = f"No upcaster from {kind} v{version} to v{version + 1}."
            raise UnknownEventVersion(msg)
        raw = step(dict(raw))
        version = int(raw["v"])
    if version > target:
        msg = f"{kind} v{version} is newer than this Condensate knows (v{target})."
        raise UnknownEventVersion(msg)
    return raw


def decode(raw: dict[str, Any]) -> Event:
    """A stored dict, of any known version, as the current event model."""
    return EVENT.validate_python(upcast(raw))


def encode(event: Event) -> str:
    return event.model_dump_json()


@dataclass(frozen=True, slots=True)
class Stored:
    """An event as the log holds it: its place in the thread and its token count, computed
    once at append."""

    thread_id: str
    seq: int
    event: Event
    tokens: int


def now_utc() -> datetime:
    """The wall clock as an event's ``at``; the edges call it, the planner takes ``now``."""
    return datetime.now(UTC)
