"""The fold: ``Projection.apply`` takes one stored event at a time and is O(1) for ordinary
events; a summary window rebuilds the entry list once. The reset cycle (requested, warned,
committed) folds here too: its rules are ``core.reset``'s, the fold keeps its state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from condensate.core import clamps, paging, receipts, reset
from condensate.core.projector.billing import Bill
from condensate.core.projector.entries import (
    Anchor,
    Entry,
    Requested,
    WindowRecord,
    drop_notice,
)
from condensate.core.tokens import estimate
from condensate.events import (
    ApprovalAnswered,
    ApprovalRequested,
    AskAnswered,
    AskOpened,
    AssistantMessage,
    BaselineMeasured,
    ChildJoined,
    ChildSpawned,
    CompactionRequested,
    EmergencyReset,
    Engine,
    EngineNotice,
    Event,
    MessagePinned,
    ModelRefused,
    ModelUsage,
    ResetCommitted,
    ResetRequested,
    ResetWarned,
    Stored,
    SystemLine,
    ThreadCreated,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    Window,
)


@dataclass(slots=True)
class Projection:
    """The folded state of one thread: its view and everything the planner reads."""

    thread_id: str = ""
    engine: Engine = ""
    model: str = ""
    head: bool = False
    baseline_tokens: int = 0
    entries: list[Entry] = field(default_factory=list)
    view_tokens: int = 0
    brief_seq: int | None = None
    current_task: int | None = None
    """The latest human message: the current task, kept through every tier as the brief is."""
    pinned: list[int] = field(default_factory=list)
    last_seq: int = 0
    anchor: Anchor | None = None
    refusal: int | None = None
    """Tokens of a refusal since the last count (0 when the provider gave no number)."""
    turn: int = 0
    """Human turns (``turn.started``)."""
    calls: int = 0
    """Model calls the provider counted (``model.usage``): the planner's notion of a turn."""
    turn_open: bool = False
    last_turn_reason: str = ""
    turn_started_seq: int = 0
    """The seq of the latest ``turn.started``: input logged after it no turn has taken up."""
    completed_turn_seq: int = 0
    """The seq of the latest turn that ended completed: a human instruction after it is
    still open (a summary must state it)."""
    windows: list[WindowRecord] = field(default_factory=list)
    tiers_since_summary: list[str] = field(default_factory=list)
    unjoined: dict[str, int] = field(default_factory=dict)
    """Child id -> the seq from which the view must stay verbatim until it is joined."""
    ask: AskOpened | None = None
    approvals: dict[str, ApprovalRequested] = field(default_factory=dict)
    """Approval id -> a tool call waiting for an operator's allow or deny."""
    declined_turn: int | None = None
    requested: Requested | None = None
    lines_written: dict[str, list[int]] = field(default_factory=dict)
    """System line code -> [human turn, model calls] when it was last written."""
    baked_before: int = 0
    """The seq of the latest session a CLI started with a rendered window (a fork, a fresh
    session or Codex thread): what the view held before it is text inside that session's
    first message, which no receipt can reach, so cheap tiers leave it alone."""
    recall: bool = False
    """The agent has ``recall``: receipts say so."""
    output_cap: int | None = None
    """Tokens of a tool result the view shows whole (None: every result is shown whole)."""
    clamp_chars: int | None = None
    """Characters of any one message, result or argument the view shows whole; a longer one
    keeps its head and tail (None: nothing is clamped)."""
    clamped: int = 0
    """Entries clamped so far: what the gateway shows in place of them changes with it."""
    reset_requested: str | None = None
    """The call of a ``condense`` whose reset is requested and not yet committed."""
    resets: int = 0
    """Resets committed: each starts a new reset cycle (its warnings rearmed)."""
    warned_level: float = 0.0
    """The highest warning level told in this reset cycle (0: none yet)."""
    emergency_blocked: bool = False
    """An emergency reset was made and no main-model response has succeeded since: another
    is not made automatically (it could only buy more summaries of what does not fit)."""
    billed: dict[str, Bill] = field(default_factory=dict)
    """``session|model`` -> what the provider billed for the calls of that session on that
    model (``main`` for the native loop, which has no session of its own)."""
    _index: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _calls: dict[str, int] = field(default_factory=dict, repr=False)
    layout: int = field(default=0, repr=False, compare=False)
    """Bumped whenever entries change other than by appending (a window): a memo of
    anything derived from the entries in order stays valid while this does not move."""
    memo: object = field(default=None, repr=False, compare=False)
    """A derived value kept by its deriver (``prompt.to_messages``); never serialized."""
    tiers_memo: object = field(default=None, repr=False, compare=False)
    """Another such value, kept by ``tiers.most_freed``."""

    # -- folding -------------------------------------------------------------------------

    def apply(self, stored: Stored) -> None:
        """Fold one event in. Events must arrive in seq order."""
        if stored.seq <= self.last_seq:
            msg = f"Event seq {stored.seq} arrived after seq {self.last_seq}."
            raise ValueError(msg)
        self.thread_id = stored.thread_id
        self.last_seq = stored.seq
        self._fold(stored.seq, stored.event, stored.tokens)

    def apply_all(self, events: list[Stored]) -> Projection:
        for stored in events:
            self.apply(stored)
        return self

    def _fold(self, seq: int, event: Event, tokens: int) -> None:
        match event:
            case ThreadCreated():
                self._created(event)
            case BaselineMeasured(tokens=measured):
                self.baseline_tokens = measured
            case TurnStarted():
                self.turn += 1
                self.turn_open = True
                self.turn_started_seq = seq
                # A refusal's claim was about the prompt its turn sent: a new turn tries the
                # provider again (were the claim true, the provider says so again).
                self.refusal = None
            case TurnEnded(reason=reason, outcome=outcome):
                self.turn_open = False
                self.last_turn_reason = reason
                if outcome == "completed":
                    self.completed_turn_seq = seq
            case UserMessage():
                self._user(seq, event, tokens)
            case MessagePinned(pinned=pinned):
                if pinned not in self.pinned and pinnable(self, pinned) is None:
                    self.pinned.append(pinned)
            case AssistantMessage():
                for call in event.tool_calls:
                    self._calls[call.id] = seq
                entry = Entry(seq, "assistant", tokens, tokens, event, batch=seq)
                self._push(self._clamped(entry, _assistant_over(event, self.clamp_chars)))
            case ToolResult():
                self._result(seq, event, tokens)
            case ModelUsage():
                self._counted(seq, event)
            case EngineNotice(notice="session-fresh" | "session-forked"):
                self.baked_before = seq
            case ModelRefused():
                self.refusal = event.tokens or 0
            case Window():
                self._window(seq, event, tokens)
            case AskOpened() | AskAnswered() | CompactionRequested():
                self._fold_ask(seq, event)
            case ApprovalRequested():
                self.approvals[event.approval_id] = event
            case ApprovalAnswered():
                self.approvals.pop(event.approval_id, None)
            case ChildSpawned():
                self.unjoined[event.child_id] = self._batch_of(event.call_id, seq)
            case ChildJoined():
                self.unjoined.pop(event.child_id, None)
            case SystemLine(code=code):
                self.lines_written[code] = [self.turn, self.calls]
            case ResetRequested() | ResetCommitted() | ResetWarned() | EmergencyReset():
                self._fold_reset(seq, event, tokens)
            case _:
                pass

    def _user(self, seq: int, event: UserMessage, tokens: int) -> None:
        if self.brief_seq is None:
            self.brief_seq = seq
        elif event.pinned:
            self.pinned.append(seq)
        if event.author == "human":
            self.current_task = seq
        entry = Entry(seq, "user", tokens, tokens, event)
        self._push(self._clamped(entry, clamps.over(event.text, self.clamp_chars)))

    def _result(self, seq: int, event: ToolResult, tokens: int) -> None:
        batch = self._calls.pop(event.call_id, seq)
        call = self._call_of(batch, event.call_id)
        command = call.arguments.get("command") or call.arguments.get("cmd") if call else None
        category = event.category or receipts.categorize(
            event.tool, command if isinstance(command, str) else event.argument
        )
        entry = Entry(seq, "tool", tokens, tokens, event, batch, None, category, event.call_id)
        if category == "reread" and not event.is_error:
            entry.read_key = receipts.read_key(event, None if call is None else call.arguments)
        cap = self.output_cap
        if cap is not None and tokens > cap:
            entry.paged = paging.shown_chars(event.output, tokens, cap)
            entry.tokens = estimate(entry.shown_output())
            self._push(entry)
            return
        self._push(self._clamped(entry, clamps.over(event.output, self.clamp_chars)))

    def _clamped(self, entry: Entry, over: bool) -> Entry:
        """``entry``, clamped when one of its parts is longer than the thread's clamp."""
        if over and self.clamp_chars is not None:
            self.clamped += 1
            entry.clamped = self.clamp_chars
            entry.tokens = estimate(_shown(entry))
        return entry

    def _created(self, event: ThreadCreated) -> None:
        self.engine, self.model, self.head = event.engine, event.model, event.head
        self.recall = event.recall
        self.output_cap = event.output_cap
        self.clamp_chars = (
            None if event.clamp_tokens is None else clamps.cap_chars(event.clamp_tokens)
        )
        self.baseline_tokens = event.baseline_tokens

    def _fold_ask(self, seq: int, event: AskOpened | AskAnswered | CompactionRequested) -> None:
        match event:
            case AskOpened():
                self.ask = event
            case AskAnswered():
                if self.ask is not None and self.ask.ask_id == event.ask_id:
                    self.ask = None
                if event.mode == "decline":
                    self.declined_turn = self.turn
                elif event.by != "runtime":
                    by: Literal["thread", "operator"] = (
                        "operator" if event.by == "operator" else "thread"
                    )
                    self.requested = Requested(
                        seq, event.mode, by, event.summary, event.keep_from, event.ask_id
                    )
            case CompactionRequested():
                self.requested = Requested(
                    seq, event.mode, event.by, event.summary, event.keep_from, None
                )

    def _counted(self, seq: int, usage: ModelUsage) -> None:
        """A call's count: billed; and, unless it was a side call on another model, the
        anchor the meter measures from."""
        self._bill(usage)
        if not usage.side:
            self.emergency_blocked = False  # a main-model response succeeded
            self.calls += 1
            self.anchor = Anchor(seq, usage.prompt, self.view_tokens)
            self.refusal = None

    def _bill(self, usage: ModelUsage) -> None:
        key = f"{usage.session or 'main'}|{usage.model or self.model}"
        bill = self.billed.get(key)
        if bill is None:
            bill = self.billed[key] = Bill()
        bill.add(usage)

    def _call_of(self, batch: int, call_id: str) -> ToolCall | None:
        """The call a result answers, from the assistant message that made it."""
        position = self._index.get(batch)
        event = self.entries[position].event if position is not None else None
        if not isinstance(event, AssistantMessage):
            return None
        return next((c for c in event.tool_calls if c.id == call_id), None)

    def _batch_of(self, call_id: str | None, default: int) -> int:
        """The seq of the assistant message that made ``call_id`` (a recent call: searched
        from the end)."""
        if call_id is None:
            return default
        if call_id in self._calls:
            return self._calls[call_id]
        for entry in reversed(self.entries):
            if isinstance(entry.event, AssistantMessage) and any(
                c.id == call_id for c in entry.event.tool_calls
            ):
                return entry.seq
        return default

    def _push(self, entry: Entry) -> None:
        self._index[entry.seq] = len(self.entries)
        self.entries.append(entry)
        self.view_tokens += entry.tokens

    def _window(self, seq: int, window: Window, tokens: int) -> None:
        self.layout += 1
        before = self.view_tokens
        going = set(window.cleared)
        for cleared in window.cleared:
            self._clear(cleared, going)
        if window.window_kind in ("summary", "drop"):
            self._replace_prefix(seq, window, tokens)
        if window.request is not None and self.requested and self.requested.seq == window.request:
            self.requested = None
        if window.ask is not None and self.ask is not None and self.ask.ask_id == window.ask:
            self.ask = None
        if window.window_kind in ("summary", "drop"):
            self.tiers_since_summary = []
        elif window.window_kind not in self.tiers_since_summary:
            self.tiers_since_summary.append(window.window_kind)
        self.refusal = None
        self.windows.append(
            WindowRecord(
                seq,
                self.calls,
                window.at,
                window.window_kind,
                window.forced,
                window.trigger.used,
                before - self.view_tokens,
                window.request is not None or window.author in ("thread", "operator"),
            )
        )
        del self.windows[:-10]

    def _clear(self, seq: int, going: set[int]) -> None:
        """Clear the result at ``seq``; ``going`` is everything the window clears."""
        position = self._index.get(seq)
        if position is None:
            return
        entry = self.entries[position]
        if entry.role != "tool" or entry.receipt is not None or entry.event is None:
            return
        assert isinstance(entry.event, ToolResult)
        newer = self._newer_read(entry, going)
        receipt = receipts.receipt(
            entry.event,
            entry.seq,
            entry.full_tokens,
            recall=self.recall,
            category=entry.category,
            superseded_by=newer,
        )
        entry.receipt = receipt
        entry.event = None
        self.view_tokens -= entry.tokens
        entry.tokens = estimate(receipt)
        self.view_tokens += entry.tokens

    def _newer_read(self, entry: Entry, going: set[int]) -> int | None:
        """The seq of the latest result that read what ``entry`` read and stays shown whole
        (not cleared, nor cleared by the same window)."""
        if entry.read_key is None:
            return None
        for later in reversed(self.entries):
            if later.seq <= entry.seq:
                return None
            shown = later.receipt is None and later.seq not in going
            if shown and later.read_key == entry.read_key:
                return later.seq
        return None

    def _replace_prefix(self, seq: int, window: Window, tokens: int) -> None:
        """Everything before ``keep_from`` goes, but the brief and pins; the summary (or the
        drop notice) stands between them and the kept range."""
        cut = len(self.entries)
        if window.keep_from is not None and window.keep_from in self._index:
            cut = self._index[window.keep_from]
        kept_head = [e for e in self.entries[:cut] if self._survives(e)]
        if window.window_kind == "summary":
            marker = Entry(seq, "summary", tokens, tokens, window)
        else:
            notice = estimate(drop_notice(window))
            marker = Entry(seq, "notice", notice, notice, window)
        self.entries = [*kept_head, marker, *self.entries[cut:]]
        self._index = {e.seq: i for i, e in enumerate(self.entries)}
        self.view_tokens = sum(e.tokens for e in self.entries)
        live = {e.batch for e in self.entries if e.role == "assistant"}
        self._calls = {cid: s for cid, s in self._calls.items() if s in live}

    def _fold_reset(
        self,
        seq: int,
        event: ResetRequested | ResetCommitted | ResetWarned | EmergencyReset,
        tokens: int,
    ) -> None:
        match event:
            case EmergencyReset():
                pending = self.pending_after(event.boundary)
                marker = estimate(reset.EMERGENCY_NOTICE) + tokens
                self._restart_view([Entry(seq, "summary", marker, marker, event), *pending])
                self.emergency_blocked = True
            case ResetRequested():
                self.reset_requested = event.call_id
            case ResetCommitted():
                self._reset(seq, event)
            case ResetWarned():
                self.warned_level = max(self.warned_level, event.level)
                self._push(Entry(seq, "notice", tokens, tokens, event))

    def _reset(self, seq: int, commit: ResetCommitted) -> None:
        """The agent's reset: the view becomes the environment's notice, the agent's own
        ``condense`` call and its result, and the genuine user input after the boundary. A
        commit whose request, call or result the view lacks resets nothing."""
        requested, self.reset_requested = self.reset_requested, None
        call = result = None
        for entry in self.entries:
            event = entry.event
            if isinstance(event, AssistantMessage) and any(
                c.id == commit.call_id for c in event.tool_calls
            ):
                call = entry
            elif entry.role == "tool" and entry.call_id == commit.call_id:
                result = entry
        if requested != commit.call_id or call is None or result is None:
            return
        pending = self.pending_after(commit.boundary)
        tokens = estimate(reset.NOTICE)
        self._restart_view([Entry(seq, "notice", tokens, tokens, commit), call, result, *pending])

    def pending_after(self, boundary: int) -> list[Entry]:
        """The genuine user input the view holds after ``boundary``, in order."""
        return [
            e
            for e in self.entries
            if isinstance(e.event, UserMessage)
            and e.seq > boundary
            and e.event.author in ("human", "parent")
        ]

    def _restart_view(self, entries: list[Entry]) -> None:
        """The view is ``entries`` from now on: a new reset cycle begins."""
        self.entries = entries
        self._index = {e.seq: i for i, e in enumerate(self.entries)}
        self.view_tokens = sum(e.tokens for e in self.entries)
        self._calls = {}
        self.layout += 1
        self.anchor = None  # the provider's last count measured the history that went
        self.refusal = None
        self.tiers_since_summary = []
        self.resets += 1
        self.warned_level = 0.0

    def _survives(self, entry: Entry) -> bool:
        return entry.seq in (self.brief_seq, self.current_task) or entry.seq in self.pinned

    # -- queries the planner and the engines use -------------------------------------------

    def position(self, seq: int) -> int | None:
        return self._index.get(seq)

    def is_protected(self, entry: Entry) -> bool:
        """The brief, the current task and pinned messages survive every tier."""
        return self._survives(entry)

    @property
    def protected_seqs(self) -> set[int]:
        kept = {s for s in (self.brief_seq, self.current_task) if s is not None}
        return kept | set(self.pinned)

    @property
    def protect_from(self) -> int | None:
        """The first view position an unjoined child's spawn keeps verbatim."""
        positions = [
            p
            for s in self.unjoined.values()
            if (p := self._first_position_at_or_after(s)) is not None
        ]
        return min(positions) if positions else None

    def _first_position_at_or_after(self, seq: int) -> int | None:
        if seq in self._index:
            return self._index[seq]
        for i, entry in enumerate(self.entries):
            if entry.seq >= seq and entry.role in ("user", "assistant", "tool"):
                return i
        return None


def _assistant_over(event: AssistantMessage, cap: int | None) -> bool:
    if cap is None:
        return False
    return len(event.text) > cap or any(
        clamps.has_long_string(c.arguments, cap) for c in event.tool_calls
    )


def _shown(entry: Entry) -> str:
    """What a clamped entry shows, as one text (to estimate its tokens)."""
    if entry.role == "tool":
        return entry.shown_output()
    calls = entry.shown_calls() if isinstance(entry.event, AssistantMessage) else ()
    return "\n".join([entry.shown_text(), *(json.dumps(c.arguments) for c in calls)])


def pinnable(view: Projection, seq: int) -> str | None:
    """Why the message at ``seq`` cannot be pinned, or None: a user message, or an assistant
    message without tool calls (pinning one with calls would keep calls without results),
    still in the view."""
    if not 0 < seq <= view.last_seq:
        return f"Seq {seq} is no event of the thread (its events run 1 to {view.last_seq})."
    position = view.position(seq)
    if position is None:
        return f"Seq {seq} is not in the thread's view (a window or a reset let it go)."
    event = view.entries[position].event
    if isinstance(event, UserMessage):
        return None
    if isinstance(event, AssistantMessage):
        if event.tool_calls:
            return (
                f"Seq {seq} is an assistant message with tool calls; pin a message, not a "
                "batch of actions."
            )
        return None
    kind = "a tool result" if view.entries[position].role == "tool" else "not a message"
    return f"Seq {seq} is {kind}: only a user or an assistant message can be pinned."


def project(events: list[Stored]) -> Projection:
    """A full replay: the view of a thread from its first event."""
    return Projection().apply_all(events)
