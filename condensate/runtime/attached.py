"""A person's own CLI session (``condensate claude``, ``condensate codex``): a thread whose one
long turn is the session. The daemon starts no CLI for it: the person's runs in their own
terminal, through the gateway, its pass in its base URL and its own login in its headers.

- The turn lasts while the session does: until the wrapper says the CLI exited
  (``POST /threads/:id/detach``) or the wrapper's process is gone. A daemon stopped meanwhile
  takes it up again at its next start with the same pass (``Passes.of_token``), so the CLI's
  next request is managed again.
- What the CLI sends is the log (``heard``): each request's conversation, where it goes on
  from what was logged, is appended as the messages, calls and results it holds. A
  conversation that no longer goes on from the log (``/clear``, ``/resume``, the summary a
  ``/compact`` starts again from) is logged again whole, and a drop window starts the view
  there. The CLI's own compaction request is forwarded with the view, never held or logged
  as the person's.
- A summary is applied in flight (``cut``): the CLI keeps its whole history, and every later
  request starts again where the summary's kept part starts, the summary before it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import anyio
import structlog

from condensate.core.messages import Message, Text, Thinking, ToolOutput, ToolUse
from condensate.core.meter import ContextUsage
from condensate.core.receipts import argument_of
from condensate.core.render import CLOSE, OPEN, PREAMBLE, entry_text
from condensate.engine import (
    Attachment,
    EngineAdapter,
    GatewayAccess,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.events import (
    AssistantMessage,
    Event,
    Stored,
    SystemLine,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    UserMessage,
    Window,
    WindowTrigger,
)
from condensate.gateway.wire import HELD_MARK, NOTICE_MARK
from condensate.runtime.gateway_port import ResetCut
from condensate.runtime.thread import Services, Thread

log = structlog.get_logger()

ALIVE_POLL_SECONDS = 2.0
"""How often the session checks that its wrapper's process still runs."""
CHANGED_REASON = "the CLI's conversation changed"
COMPACTING = (
    "The CLI compacts its own conversation (the person's /compact): its request goes on with "
    "Condensate's view, and the CLI's summary starts its conversation again."
)
CHANGED = (
    "The CLI's conversation no longer goes on from what was logged (its /clear, /compact, "
    "/resume or /rewind, or its own compaction): the view starts again from what it sends now."
)


@dataclass(frozen=True)
class Heard:
    """A conversation a session's CLI sent, and its events."""

    conversation: Sequence[tuple[int, Message]] = ()
    placed: Sequence[Placed] = ()


@dataclass
class AttachedSession:
    """The engine of an attached thread: it runs no CLI, and its turn waits for the session
    to end. ``inner`` is the thread's engine as the daemon would run it, for its baseline."""

    inner: EngineAdapter
    access: GatewayAccess | None
    pid: int | None
    attachment: Attachment | None = None
    exit_code: int | None = None
    ended: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while a request's conversation is logged."""
    keys: list[str] | None = None
    """What each logged message event of the session is (None: not read from the log yet)."""
    seqs: list[int] = field(default_factory=list)
    """For each of ``keys``: the seq it was logged at."""
    noticed: int = 0
    """The seq of the last window the person was told of (in the CLI's conversation)."""
    own_drops: set[int] = field(default_factory=set)
    """The drop windows the session's changed conversations made: not told, the CLI did it."""
    model: str = ""
    """The model the CLI's conversation last went on (a change is said in the log)."""
    compactions: int = -1
    """The length of the conversation the CLI last asked to compact (said once for it)."""
    positions: list[int] = field(default_factory=list)
    """For each of ``keys``: the position in the CLI's conversation of the message it came
    from (valid for the conversation last heard)."""
    heard: Heard = field(default_factory=Heard)
    """The conversation last heard, and its events (``placed_for``)."""

    def attach(self) -> Attachment:
        """The base URL the CLI is given (its pass in it): issued when the session is made,
        and again when the daemon takes it up after a restart (the same pass)."""
        if self.access is None or self.access.attach is None:
            msg = "This daemon serves no gateway: a person's CLI cannot be managed."
            raise RuntimeError(msg)
        self.attachment = self.access.attach()
        return self.attachment

    def end(self, exit_code: int) -> None:
        self.exit_code = exit_code
        self.ended.set()

    def baseline(self, spec: ThreadSpec) -> int:
        return self.inner.baseline(spec)

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        # Its pass is good from the session's making (``Runtime.engine_for``), before this.
        while not self.ended.is_set():
            with anyio.move_on_after(ALIVE_POLL_SECONDS):
                await self.ended.wait()
            if not self.ended.is_set() and not _alive(self.pid):
                return TurnOutcome("failed", f"the wrapper (pid {self.pid}) is gone")
        if self.exit_code == 0:
            return TurnOutcome("completed", "the CLI exited")
        return TurnOutcome("failed", f"the CLI exited with code {self.exit_code}")

    async def apply_window(self, window: Window) -> None:
        """Nothing to restart: the gateway applies every window to the requests."""

    async def close(self) -> None:
        await self.inner.close()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


# -- what the CLI sends, logged ----------------------------------------------------------------


def events_of(
    conversation: Sequence[tuple[int, Message]],
    at: datetime,
    earlier: Sequence[tuple[int, Message]] = (),
) -> list[Placed]:
    """The log's events for a conversation: a reply as ``message.assistant``, each result as
    the ``tool.result`` of its call (named by its argument), a person's text as
    ``message.user``; Condensate's own replies (a held request's) are left out. ``earlier``:
    the messages before ``conversation``, whose calls its results may answer."""
    calls: dict[str, ToolUse] = {
        b.id: b for _, m in earlier for b in m.content if isinstance(b, ToolUse)
    }
    out: list[Placed] = []
    for position, message in conversation:
        texts = [b.text for b in message.content if isinstance(b, Text) and b.text]
        if message.role == "assistant":
            if any(t.startswith(HELD_MARK) for t in texts):
                continue
            uses = [b for b in message.content if isinstance(b, ToolUse)]
            calls.update((u.id, u) for u in uses)
            event: Event = AssistantMessage(
                at=at,
                text="\n\n".join(texts),
                thinking=tuple(
                    ThinkingBlock(text=b.text, signature=b.signature)
                    for b in message.content
                    if isinstance(b, Thinking)
                ),
                tool_calls=tuple(
                    ToolCall(id=u.id, name=u.name, arguments=u.arguments) for u in uses
                ),
            )
            out.append(Placed(position, event))
            continue
        for block in message.content:
            if isinstance(block, ToolOutput):
                use = calls.get(block.call_id)
                tool = use.name if use is not None else ""
                result = ToolResult(
                    at=at,
                    call_id=block.call_id,
                    tool=tool,
                    argument=argument_of(tool, use.arguments) if use is not None else "",
                    output=block.output,
                    is_error=block.is_error,
                )
                out.append(Placed(position, result))
        if texts:
            out.append(Placed(position, UserMessage(at=at, text="\n\n".join(texts))))
    return out


@dataclass(frozen=True)
class Placed:
    """An event and the position in the CLI's conversation of the message it came from."""

    position: int
    event: Event

    @functools.cached_property
    def key(self) -> str:
        return key_of(self.event)


def placed_for(conversation: Sequence[tuple[int, Message]], at: datetime, last: Heard) -> Heard:
    """``conversation`` and its events (``events_of``), the events of the messages it begins
    with in common with ``last`` taken from there: a CLI sends its whole conversation on every
    request, and only what it added since is read (with its keys)."""
    same = 0
    for now, before in zip(conversation, last.conversation, strict=False):
        if now != before:
            break
        same += 1
    if same == 0:
        return Heard(conversation, events_of(conversation, at))
    upto = conversation[same - 1][0]
    kept = list(itertools.takewhile(lambda p: p.position <= upto, last.placed))
    fresh = events_of(conversation[same:], at, earlier=conversation[:same])
    return Heard(conversation, kept + fresh)


def key_of(event: Event) -> str:
    """What an event is, whenever it was logged: its content without its time."""
    return hashlib.sha256(event.model_dump_json(exclude={"at"}).encode()).hexdigest()[:32]


LOGGED = (UserMessage, AssistantMessage, ToolResult)


async def heard(
    runtime: Services, thread: Thread, conversation: list[tuple[int, Message]], model: str = ""
) -> bool:
    """Log what the request's conversation holds past what the session logged; a
    conversation that no longer goes on from the log is logged whole, and the view starts
    again there (a drop window, said in a system line). True for the CLI's own compaction
    request (its last message is the CLI's instruction, not the person's: it is not logged,
    and the request is never held)."""
    session = thread.engine
    if not isinstance(session, AttachedSession):
        return False
    if model and session.model and model != session.model:
        text = (
            f"The CLI's conversation goes on on {model} (it was on {session.model}): the "
            "person's /model, or the CLI's own choice."
        )
        await runtime.append(thread, SystemLine(at=runtime.clock(), code="cli-model", text=text))
    session.model = model or session.model
    compacting = _compaction(conversation, thread.profile.info.compaction_opens)
    if compacting:
        conversation = conversation[:-1]
        if session.compactions != len(conversation):
            session.compactions = len(conversation)
            line = SystemLine(at=runtime.clock(), code="cli-compaction", text=COMPACTING)
            await runtime.append(thread, line)
    await _logged(runtime, thread, session, conversation, compacting=compacting)
    return compacting


def _compaction(conversation: list[tuple[int, Message]], opens: tuple[str, ...]) -> bool:
    if not conversation or not opens or conversation[-1][1].role != "user":
        return False
    texts = [b.text for b in conversation[-1][1].content if isinstance(b, Text)]
    return any(t.lstrip().startswith(opens) for t in texts)


async def _logged(
    runtime: Services,
    thread: Thread,
    session: AttachedSession,
    conversation: list[tuple[int, Message]],
    *,
    compacting: bool = False,
) -> None:
    async with session.lock:
        if session.keys is None:  # a daemon restarted since: the log says what was logged
            logged = _since_last_change(await runtime.log.events(thread.thread_id))
            session.keys = [key_of(s.event) for s in logged]
            session.seqs = [s.seq for s in logged]
        heard = session.heard = placed_for(conversation, runtime.clock(), session.heard)
        placed = heard.placed
        now = [p.key for p in placed]
        changed = now[: len(session.keys)] != session.keys
        if changed and compacting:
            # The CLI's compaction request is not its conversation going on: whatever it
            # holds, the session's log stays as it is (its summary starts the next one).
            return
        new = placed if changed else placed[len(session.keys) :]
        at = runtime.clock()  # an event read from an earlier request is logged now
        logging = [p.event.model_copy(update={"at": at}) for p in new]
        stored = await runtime.append(thread, logging) if new else []
        if changed:
            last = thread.projection.last_seq
            session.keys, session.seqs = [], []
            if stored:
                usage = runtime.usage(thread)
                drop, _ = await runtime.append(
                    thread,
                    [
                        _dropped_before(stored[0].seq, last, usage, runtime.clock()),
                        SystemLine(
                            at=runtime.clock(), code="cli-conversation-changed", text=CHANGED
                        ),
                    ],
                )
                session.own_drops.add(drop.seq)
            log.info("attached_conversation_changed", thread=thread.thread_id, messages=len(placed))
        session.keys += [p.key for p in new]
        session.seqs += [s.seq for s in stored]
        session.positions = [p.position for p in placed]


def _since_last_change(events: list[Stored]) -> list[Stored]:
    """The message events of the CLI's current conversation: those from where the last
    change of conversation started the view again."""
    start = 0
    for stored in events:
        event = stored.event
        if isinstance(event, Window) and event.trigger.reason == CHANGED_REASON:
            start = event.keep_from or 0
    return [s for s in events if s.seq >= start and isinstance(s.event, LOGGED)]


def notice(thread: Thread) -> str | None:
    """One line for the person, in their CLI's conversation, when windows were taken since
    they were last told: what each took and freed, and where the context stands against its
    line; None otherwise (no noise)."""
    session = thread.engine
    if not isinstance(session, AttachedSession):
        return None
    view = thread.projection
    new = [w for w in view.windows if w.seq > session.noticed and w.seq not in session.own_drops]
    if not new:
        return None
    session.noticed = max(w.seq for w in new)
    taken = "; ".join(f"{w.kind} freed ~{w.freed:,} tokens" for w in new)
    return f"{NOTICE_MARK} {taken}."


def cut(thread: Thread) -> ResetCut | None:
    """Where the provider's view of the session starts again: after its latest summary, at
    the message the summary's kept part starts with, the summary (with the brief and pins)
    before it; None while the view holds no summary."""
    session = thread.engine
    view = thread.projection
    if not isinstance(session, AttachedSession):
        return None
    marker = next(
        (i for i in reversed(range(len(view.entries))) if view.entries[i].role == "summary"), None
    )
    if marker is None:
        return None
    position_of = dict(zip(session.seqs, session.positions, strict=False))
    kept = view.entries[marker + 1 :]
    at = next((position_of[e.seq] for e in kept if e.seq in position_of), None)
    if at is None and session.positions:
        # The summary took all the CLI sent: the provider sees the summary and what follows.
        at = session.positions[-1] + 1
    if at is None:
        return None
    head = [OPEN, PREAMBLE, *(entry_text(e, view) for e in view.entries[: marker + 1]), CLOSE]
    text = "\n\n".join(part for part in head if part)
    return ResetCut("", text, thread.profile.info.own_context, at=at)


def _dropped_before(keep_from: int, last: int, usage: ContextUsage, at: datetime) -> Window:
    """The window that starts the view again where the CLI's changed conversation starts."""
    trigger = WindowTrigger(
        used=usage.used,
        line=usage.line,
        ceiling=usage.ceiling,
        window=usage.window,
        freed=0,
        reason=CHANGED_REASON,
    )
    return Window(
        at=at,
        window_kind="drop",
        cut=last,
        keep_from=keep_from,
        author="system",
        trigger=trigger,
    )
