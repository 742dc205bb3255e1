"""Replay a recorded thread through a windowing policy, offline, and measure what it costs.

A recording is loaded from Condensate's own log (the SQLite file, or events as JSON lines), a
Claude Code transcript (``~/.claude/projects/…/<session>.jsonl``) or a Codex rollout
(``$CODEX_HOME/sessions/…/rollout-….jsonl``). Its conversation (human messages, assistant
replies with their tool calls, tool results, turns, children) is appended again, in order, to
a fresh in-memory log; before each recorded model call the policy may take windows, and the
view is then sent, as Anthropic Messages, to the fake model server running in process. The
fake counts every prompt with tiktoken and simulates the prompt cache, so each call is billed
as uncached input, cache read and cache write the way Anthropic bills it. The recorded reply
is appended whatever the fake answered, so every policy sees the same conversation.

Policies:

- ``condensate``: the real core: ``Projection`` folds, ``meter.measure``, ``planner.plan``,
  cheap cuts carried out in process, summaries written by ``Curator`` (against the fake, or a
  real model);
- ``unmanaged``: nothing until the provider refuses the prompt; then the oldest history is
  dropped (the brief kept) down to half the window, as a naive agent truncates on overflow.
  Where it would simply end instead is reported as ``first_overflow_call``;
- ``single-summary``: Claude Code's default shape: at 83.5 % of the window the whole history
  is summarized in one call (the view plus a summary request, so the prefix is a cache read)
  and nothing is kept verbatim but the brief.

The fake curator is a stand-in that does what the curator prompt asks, deterministically:
it names every file read, edited or written, and copies every human message and every failed
call with its error verbatim (``stand_in_summary``). Its text reaches ``Curator`` through the
fake server, so the curator's own calls are billed too.

Cost weights (Anthropic's price ratios to base input): uncached input 1.0, cache write 1.25,
cache read 0.1. ``weighted_input`` is the sum of the three counts times their weights.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from condensate import planner as planning
from condensate import tiers
from condensate.ceilings import CeilingSettings
from condensate.curator import (
    VERBATIM_HEADING,
    Curator,
    CuratorSettings,
    Miss,
    carry_out,
    replaced_entries,
    verbatim_items,
)
from condensate.errors import CondensateError, ContextWindowExceeded
from condensate.events import (
    EVENT_TYPES,
    AssistantMessage,
    BaselineMeasured,
    ChildJoined,
    ChildSpawned,
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
    TurnStarted,
    UserMessage,
    Window,
    WindowTrigger,
    decode,
)
from condensate.meter import ModelWindow, measure, next_prompt
from condensate.planner import Cut, HoldBack, PlannerSettings, Proceed, Stop
from condensate.projector import Entry, Projection
from condensate.prompt import to_messages
from condensate.providers import ModelClient
from condensate.providers._http import RetryPolicy
from condensate.providers.anthropic import AnthropicClient
from condensate.providers.types import Message, Request, Text, Usage
from condensate.providers.windows import from_table
from condensate.retention import (
    CallRecord,
    Retention,
    call_files,
    check,
    file_tool,
    files_of,
    pair_problems,
    receipt_file,
)
from condensate.testing.fake_model import FakeModelServer
from condensate.tokens import Counter as TokenCounter
from condensate.tokens import bare_model, count_event, counter_for

WEIGHTS = {"uncached": 1.0, "cache_write": 1.25, "cache_read": 0.1}
"""Anthropic's price ratios to base input tokens; ``weighted_input`` uses them."""
POLICIES = ("condensate", "unmanaged", "single-summary")
SINGLE_SUMMARY_SHARE = 0.835
DEFAULT_WINDOW = 200_000
DEFAULT_BASELINE = 12_000
FAKE_CURATOR = "fake"
FAKE_CURATOR_MODEL = "claude-haiku-4-5"
"""The fake curator answers under its own model name, so its replies never meet the thread's
(the fake's queues and prompt cache are per model). Its tokens are weighted like the thread's
model, which overstates Condensate's cost when the real curator is a cheaper model."""
MAX_CUTS_PER_CALL = 3
MAX_ATTEMPTS = 3
FORGET_REQUESTS_EVERY = 50
ARGUMENT_CHARS = 120
FILES_READ = "Files read: "
FILES_CHANGED = "Files edited or written: "
SUMMARY_REQUEST = (
    "Your task is to create a detailed summary of the conversation so far, paying close "
    "attention to the user's explicit requests and your previous actions. Include the primary "
    "request and intent, key technical concepts, every file and code section examined, "
    "modified or created, errors and their fixes, problem solving, all user messages, pending "
    "tasks, the current work and the next step. Answer with the summary only."
)
"""The request a single-summary baseline appends to the view (Claude Code's compaction shape)."""


# -- prices ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; the defaults are Claude Sonnet 4.5's list prices."""

    input: float = 3.0
    cache_read: float = 0.30
    cache_write: float = 3.75
    output: float = 15.0


@dataclass
class Bill:
    """Tokens billed over some calls."""

    calls: int = 0
    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0

    def add(self, usage: Usage, output: int | None = None) -> None:
        self.calls += 1
        self.uncached += usage.input
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        self.output += usage.output if output is None else output

    def merged(self, other: Bill) -> Bill:
        return Bill(
            self.calls + other.calls,
            self.uncached + other.uncached,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
        )

    @property
    def input(self) -> int:
        return self.uncached + self.cache_read + self.cache_write

    @property
    def weighted(self) -> float:
        return (
            self.uncached * WEIGHTS["uncached"]
            + self.cache_write * WEIGHTS["cache_write"]
            + self.cache_read * WEIGHTS["cache_read"]
        )

    def cost(self, prices: Prices) -> float:
        return (
            self.uncached * prices.input
            + self.cache_read * prices.cache_read
            + self.cache_write * prices.cache_write
            + self.output * prices.output
        ) / 1_000_000

    def to_json(self, prices: Prices) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "uncached": self.uncached,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "input": self.input,
            "output": self.output,
            "weighted_input": round(self.weighted),
            "cache_read_share": round(self.cache_read / self.input, 4) if self.input else 0.0,
            "cost_usd": round(self.cost(prices), 4),
        }


# -- recordings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    """A thread's conversation, ready to replay. ``events`` excludes ``thread.created``."""

    source: str
    """``condensate``, ``claude``, ``codex`` or ``generated``."""
    name: str
    engine: Engine
    model: str
    baseline: int
    events: tuple[Event, ...]

    @property
    def model_calls(self) -> int:
        return sum(isinstance(e, AssistantMessage) for e in self.events)


_KEEP = (
    UserMessage,
    AssistantMessage,
    ToolResult,
    TurnStarted,
    TurnEnded,
    ChildSpawned,
    ChildJoined,
    BaselineMeasured,
)
"""What a replay takes from a recorded log; windows, usage and asks are the policy's to decide."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def load(path: Path, thread: str | None = None) -> Recording:
    """A recording from a log file, whichever of the three formats it is."""
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        return _load_sqlite(path, thread)
    lines = _json_lines(path)
    first = lines[0] if lines else None
    if first is None:
        msg = f"{path} holds no JSON lines to replay."
        raise CondensateError(msg)
    if first.get("kind") in EVENT_TYPES:
        return from_events(path.name, "condensate", (decode(_strip(line)) for line in lines))
    if "payload" in first and first.get("type") in {
        "session_meta",
        "response_item",
        "turn_context",
        "event_msg",
        "compacted",
    }:
        return from_codex(path.name, lines)
    if first.get("type") in {"user", "assistant", "system", "summary"} or "sessionId" in first:
        return from_claude(path.name, lines)
    msg = (
        f"{path} is not a Condensate log, a Claude Code transcript or a Codex rollout "
        f"(its first line has keys {sorted(first)[:8]})."
    )
    raise CondensateError(msg)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            msg = f"{path}, line {number}, is not JSON: {exc}."
            raise CondensateError(msg) from exc
        if isinstance(value, dict):
            out.append(value)
    return out


def _strip(line: dict[str, Any]) -> dict[str, Any]:
    """An event as the tail API prints it carries ``seq`` and ``tokens``; drop them."""
    return {k: v for k, v in line.items() if k not in ("seq", "tokens", "thread_id")}


def _load_sqlite(path: Path, thread: str | None) -> Recording:
    uri = f"file:{path}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        msg = f"Could not open {path} as a Condensate log: {exc}."
        raise CondensateError(msg) from exc
    try:
        if thread is None:
            row = connection.execute(
                "SELECT thread_id FROM events GROUP BY thread_id ORDER BY COUNT(*) DESC LIMIT 1"
            ).fetchone()
            if row is None:
                msg = f"{path} holds no threads."
                raise CondensateError(msg)
            thread = str(row[0])
        rows = connection.execute(
            "SELECT body FROM events WHERE thread_id = ? ORDER BY seq", (thread,)
        ).fetchall()
    except sqlite3.Error as exc:
        msg = f"Could not read {path} as a Condensate log: {exc}."
        raise CondensateError(msg) from exc
    finally:
        connection.close()
    if not rows:
        msg = f"{path} has no thread {thread!r}."
        raise CondensateError(msg)
    return from_events(
        f"{path.name}:{thread}", "condensate", (decode(json.loads(r[0])) for r in rows)
    )


def from_events(name: str, source: str, events: Iterable[Event]) -> Recording:
    """A recording from Condensate events; the first must be ``thread.created``."""
    created: ThreadCreated | None = None
    kept: list[Event] = []
    for event in events:
        if isinstance(event, ThreadCreated):
            created = created or event
        elif isinstance(event, _KEEP):
            kept.append(event)
    if created is None:
        msg = f"{name} has no thread.created event."
        raise CondensateError(msg)
    return Recording(
        source,
        name,
        created.engine,
        created.model,
        created.baseline_tokens or DEFAULT_BASELINE,
        tuple(kept),
    )


def _at(line: Mapping[str, Any], fallback: datetime) -> datetime:
    raw = line.get("timestamp")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


def argument_of(name: str, arguments: Mapping[str, Any]) -> str:
    """What a receipt names for a call: a path, a pattern, a command (about 120 chars)."""
    if name.rsplit("__", 1)[-1].lower() == "apply_patch":
        raw = arguments.get("input") or arguments.get("patch") or ""
        named = re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", str(raw), re.M)
        return ", ".join(n.strip() for n in named)[:ARGUMENT_CHARS]
    for key in ("file_path", "path", "notebook_path", "pattern", "command", "cmd", "query", "url"):
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return value[:ARGUMENT_CHARS]
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    if isinstance(content, dict):
        return _content_text(content.get("content") or content.get("output") or "")
    return "" if content is None else json.dumps(content)


class _Calls:
    """Tool calls seen so far, by id, to name the results that answer them."""

    def __init__(self) -> None:
        self.by_id: dict[str, ToolCall] = {}

    def result(self, at: datetime, call_id: str, output: str, is_error: bool) -> ToolResult | None:
        call = self.by_id.pop(call_id, None)
        if call is None:
            return None  # a result whose call the transcript does not hold
        return ToolResult(
            at=at,
            call_id=call_id,
            tool=call.name,
            argument=argument_of(call.name, call.arguments),
            output=output,
            is_error=is_error,
        )


def _first_prompt_baseline(events: Sequence[Event], prompt: int | None, model: str) -> int:
    """The recorded first prompt less what the conversation before it counts: the baseline."""
    if prompt is None:
        return DEFAULT_BASELINE
    counter = counter_for("")
    before = 0
    for event in events:
        if isinstance(event, AssistantMessage):
            break
        before += count_event(event, counter)
    return max(prompt - before, 1_000)


def from_claude(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Claude Code transcript (cli-protocols §2.7): one line per content block of an
    assistant message (merged by ``message.id``), user lines with text or tool results.
    Sidechains (subagents) and API error lines are skipped."""
    events: list[Event] = []
    calls = _Calls()
    pending: dict[str, Any] | None = None
    model = ""
    first_prompt: int | None = None
    clock = _EPOCH

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        tool_calls = tuple(pending["calls"])
        for call in tool_calls:
            calls.by_id[call.id] = call
        events.append(
            AssistantMessage(
                at=pending["at"],
                text="\n".join(pending["text"]),
                thinking=tuple(pending["thinking"]),
                tool_calls=tool_calls,
                message_id=pending["id"],
            )
        )
        pending = None

    for line in lines:
        clock = _at(line, clock + timedelta(seconds=1))
        if line.get("isSidechain") or line.get("isApiErrorMessage") or line.get("error"):
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            continue
        kind = line.get("type")
        if kind == "assistant":
            message_id = str(message.get("id") or line.get("uuid") or "")
            if pending is not None and pending["id"] != message_id:
                flush()
            if pending is None:
                pending = {"id": message_id, "at": clock, "text": [], "thinking": [], "calls": []}
                model = model or str(message.get("model") or "")
                usage = message.get("usage")
                if first_prompt is None and isinstance(usage, dict):
                    first_prompt = sum(
                        int(usage.get(k) or 0)
                        for k in (
                            "input_tokens",
                            "cache_read_input_tokens",
                            "cache_creation_input_tokens",
                        )
                    )
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    pending["text"].append(str(block.get("text", "")))
                elif block.get("type") == "thinking":
                    pending["thinking"].append(
                        ThinkingBlock(
                            text=str(block.get("thinking", "")),
                            signature=str(block.get("signature", "")),
                        )
                    )
                elif block.get("type") == "tool_use":
                    pending["calls"].append(
                        ToolCall(
                            id=str(block["id"]),
                            name=str(block.get("name", "")),
                            arguments=dict(block.get("input") or {}),
                        )
                    )
        elif kind == "user":
            flush()
            if line.get("isMeta"):
                continue
            content = message.get("content")
            if isinstance(content, str):
                if content.strip():
                    events.append(UserMessage(at=clock, text=content))
                continue
            texts: list[str] = []
            for block in content or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result":
                    result = calls.result(
                        clock,
                        str(block.get("tool_use_id")),
                        _content_text(block.get("content")),
                        bool(block.get("is_error")),
                    )
                    if result is not None:
                        events.append(result)
                elif block.get("type") == "text":
                    text = str(block.get("text", ""))
                    if text.strip() and not text.lstrip().startswith("<system-reminder>"):
                        texts.append(text)
            if texts:
                events.append(UserMessage(at=clock, text="\n".join(texts)))
    flush()
    model = f"anthropic:{model}" if model and ":" not in model else model
    model = model or "anthropic:claude-sonnet-4-5"
    baseline = _first_prompt_baseline(events, first_prompt, model)
    return Recording("claude", name, "claude", model, baseline, tuple(events))


_EXIT = re.compile(r"(?:Process exited with code|exit code:?|Exit code:?)\s*(-?\d+)", re.I)


def from_codex(name: str, lines: Sequence[Mapping[str, Any]]) -> Recording:  # noqa: PLR0915
    """A Codex rollout (cli-protocols §3.6): ``response_item`` lines as sent to the model
    (user and assistant messages, function and custom tool calls and their outputs);
    developer messages and the environment context are the baseline."""
    events: list[Event] = []
    calls = _Calls()
    pending: dict[str, Any] | None = None
    model = ""
    first_prompt: int | None = None
    clock = _EPOCH

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        tool_calls = tuple(pending["calls"])
        for call in tool_calls:
            calls.by_id[call.id] = call
        events.append(
            AssistantMessage(
                at=pending["at"], text="\n".join(pending["text"]), tool_calls=tool_calls
            )
        )
        pending = None

    def assistant() -> dict[str, Any]:
        nonlocal pending
        if pending is None:
            pending = {"at": clock, "text": [], "calls": []}
        return pending

    for line in lines:
        clock = _at(line, clock + timedelta(seconds=1))
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        kind, item = line.get("type"), payload.get("type")
        if kind == "turn_context":
            model = model or str(payload.get("model") or "")
        elif kind == "event_msg":
            if item == "task_started":
                flush()
                events.append(TurnStarted(at=clock))
            elif item == "task_complete":
                flush()
                events.append(TurnEnded(at=clock, outcome="completed"))
            elif item == "token_count" and first_prompt is None:
                info = payload.get("info") or {}
                last = info.get("last_token_usage") if isinstance(info, dict) else None
                if isinstance(last, dict) and last.get("input_tokens"):
                    first_prompt = int(last["input_tokens"])
        elif kind == "response_item":
            if item == "message":
                text = _content_text(payload.get("content"))
                role = payload.get("role")
                if role == "assistant":
                    if pending is not None and pending["calls"]:
                        flush()
                    assistant()["text"].append(text)
                elif role == "user":
                    flush()
                    stripped = text.lstrip()
                    if stripped.startswith(("<environment_context>", "<user_instructions>")):
                        continue
                    if text.strip():
                        events.append(UserMessage(at=clock, text=text))
            elif item in ("function_call", "custom_tool_call"):
                raw = payload.get("arguments") if item == "function_call" else None
                try:
                    arguments = json.loads(raw) if isinstance(raw, str) else {}
                except ValueError:
                    arguments = {"input": raw}
                if item == "custom_tool_call":
                    arguments = {"input": payload.get("input", "")}
                if not isinstance(arguments, dict):
                    arguments = {"input": arguments}
                call_id = str(payload.get("call_id") or payload.get("id") or "")
                assistant()["calls"].append(
                    ToolCall(id=call_id, name=str(payload.get("name", "")), arguments=arguments)
                )
            elif item in ("function_call_output", "custom_tool_call_output"):
                flush()
                output = _content_text(payload.get("output"))
                code = _EXIT.search(output)
                failed = code is not None and int(code[1]) != 0
                result = calls.result(clock, str(payload.get("call_id") or ""), output, failed)
                if result is not None:
                    events.append(result)
    flush()
    model = model or "gpt-5.5"
    model = model if ":" in model else f"openai:{model}"
    baseline = _first_prompt_baseline(events, first_prompt, model)
    return Recording("codex", name, "codex", model, baseline, tuple(events))


# -- the stand-in curator -----------------------------------------------------------------------


def _listed(summary: str, prefix: str) -> list[str]:
    for line in summary.splitlines():
        if line.startswith(prefix):
            return [p for p in line[len(prefix) :].split(", ") if p and p != "(none)"]
    return []


def touched_files(entries: Sequence[Entry]) -> tuple[list[str], list[str]]:
    """(files read, files edited or written) named anywhere in ``entries``, in order."""
    read: dict[str, None] = {}
    changed: dict[str, None] = {}

    def note(tool: str, paths: Iterable[str]) -> None:
        kind = file_tool(tool)
        target = read if kind == "read" else changed if kind is not None else None
        if target is not None:
            target.update(dict.fromkeys(paths))

    for entry in entries:
        event = entry.event
        if entry.receipt is not None:
            named = receipt_file(entry.receipt)
            if named is not None:
                tool, argument = named
                paths = argument.split(", ") if tool.lower() == "apply_patch" else [argument]
                note(tool, paths)
        elif isinstance(event, ToolResult):
            note(event.tool, files_of(event))
        elif isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                note(call.name, call_files(call))
        elif isinstance(event, Window) and event.summary:
            read.update(dict.fromkeys(_listed(event.summary, FILES_READ)))
            changed.update(dict.fromkeys(_listed(event.summary, FILES_CHANGED)))
    return list(read), list(changed)


def stand_in_summary(view: Projection, keep_from: int | None) -> str:
    """What a curator that follows its prompt writes, deterministically: the counts of what
    happened, every file touched, the latest test outcome, and the verbatim record (every
    human message, every failed call with its error, earlier summaries' records)."""
    entries = replaced_entries(view, keep_from)
    read, changed = touched_files(entries)
    tools: Counter[str] = Counter()
    failed = 0
    last_test = ""
    for entry in entries:
        if isinstance(entry.event, ToolResult):
            tools[entry.event.tool] += 1
            failed += entry.event.is_error
            if "test" in entry.event.argument:
                lines = entry.event.output.strip().splitlines()
                last_test = f"{entry.event.argument}: {lines[-1] if lines else ''}"
    done = ", ".join(f"{n} {tool}" for tool, n in sorted(tools.items())) or "no tool calls"
    parts = [
        f"Work so far: {done} ({failed} failed).",
        FILES_READ + (", ".join(read) or "(none)"),
        FILES_CHANGED + (", ".join(changed) or "(none)"),
    ]
    if last_test:
        parts.append(f"Latest test run: {last_test}")
    items = verbatim_items(entries)
    text = "\n".join(parts)
    if items:
        text += f"\n\n{VERBATIM_HEADING}\n" + "\n\n".join(items)
    return text


# -- the run --------------------------------------------------------------------------------


def _filler(tokens: int, counter: TokenCounter) -> str:
    """A system prompt of about ``tokens`` tokens, standing in for the recorded baseline."""
    unit = (
        "Rule {i}: keep each change small, read before you edit, run the tests after each "
        "edit, and report what failed and why."
    )
    per = max(counter.count(unit.format(i=1000)) + 1, 1)
    lines = [unit.format(i=i) for i in range(max(tokens // per, 1))]
    return "\n".join(lines)


@dataclass(frozen=True)
class ReplayConfig:
    window: int | None = None
    """The model's window; default: the built-in table for the recording's model, else 200k."""
    ceilings: CeilingSettings = field(default_factory=CeilingSettings)
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    prices: Prices = field(default_factory=Prices)
    policies: tuple[str, ...] = POLICIES
    curator: str = FAKE_CURATOR
    """``fake`` (the stand-in through the fake server) or a ``provider:model`` name."""
    single_summary_share: float = SINGLE_SUMMARY_SHARE
    failed_as_control: bool = False
    """Mark failed tool results ``category="control"`` so that only a summary replaces them
    (a what-if for a core change: cheap tiers would then keep error text verbatim)."""


Progress = Callable[[str, int, int], None]
"""(policy, events done, events in all)"""


class Policy(Protocol):
    name: str

    def limit(self, run: Run) -> int: ...

    async def before_call(self, run: Run) -> str | None:
        """Take whatever windows are due; a reason when the call must not be sent."""
        ...

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None: ...


@dataclass
class Run:
    """One policy over one recording, against one fake server."""

    recording: Recording
    policy: Policy
    config: ReplayConfig
    fake: FakeModelServer
    client: ModelClient
    curator: Curator
    curator_is_fake: bool
    counts: dict[int, int]
    counter: TokenCounter
    window: int
    system: str
    model: str
    history: list[Stored] = field(default_factory=list)
    view: Projection = field(default_factory=Projection)
    main: Bill = field(default_factory=Bill)
    summaries: Bill = field(default_factory=Bill)
    calls: list[CallRecord] = field(default_factory=list)
    summarized: set[int] = field(default_factory=set)
    windows: Counter[str] = field(default_factory=Counter)
    summaries_written: int = 0
    summary_tokens: list[int] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    holds: Counter[str] = field(default_factory=Counter)
    misses: int = 0
    refusals: int = 0
    first_overflow_call: int | None = None
    cumulative: list[float] = field(default_factory=list)
    """Weighted input billed after each recorded model call."""
    now: datetime = _EPOCH

    # -- the log ------------------------------------------------------------------------------

    def append(self, event: Event) -> Stored:
        tokens = self.counts.get(id(event))
        if tokens is None:
            tokens = count_event(event, self.counter)
        stored = Stored("replay", len(self.history) + 1, event, tokens)
        self.history.append(stored)
        self.view.apply(stored)
        return stored

    def take_window(self, window: Window) -> None:
        if window.window_kind == "summary":
            self.summarized.update(
                e.seq for e in replaced_entries(self.view, window.keep_from) if e.event is not None
            )
            self.summaries_written += 1
        stored = self.append(window)
        if window.window_kind == "summary":
            self.summary_tokens.append(stored.tokens)
        self.windows[window.window_kind] += 1

    @property
    def calls_made(self) -> int:
        return len(self.cumulative)

    # -- model calls --------------------------------------------------------------------------

    async def run(self, progress: Progress | None) -> None:
        recording = self.recording
        self.append(
            ThreadCreated(
                at=recording.events[0].at if recording.events else _EPOCH,
                engine=recording.engine,
                model=recording.model,
                cwd="/replay",
                baseline_tokens=recording.baseline,
            )
        )
        total = len(recording.events)
        for index, event in enumerate(recording.events):
            self.now = max(self.now, event.at)
            if isinstance(event, AssistantMessage):
                await self.call(event)
                if self.calls_made % FORGET_REQUESTS_EVERY == 0:
                    _forget_requests(self.fake)
            else:
                self.append(event)
            if progress is not None:
                progress(self.policy.name, index + 1, total)

    async def call(self, reply: AssistantMessage) -> None:
        for _ in range(MAX_ATTEMPTS):
            stop = await self.policy.before_call(self)
            if stop is not None:
                self.stopped.append(stop)
                break
            messages = to_messages(self.view)
            problems = tuple(pair_problems(messages))
            request = Request(
                model=self.model,
                messages=tuple(messages),
                system=self.system,
                max_tokens=8_192,
                stream=False,
            )
            try:
                completion = await self.client.complete(request)
            except ContextWindowExceeded as exc:
                self.refusals += 1
                tokens = exc.tokens or 0
                self.calls.append(CallRecord(tokens, self.policy.limit(self), True, problems))
                if self.first_overflow_call is None:
                    self.first_overflow_call = self.calls_made + 1
                self.append(
                    ModelRefused(at=self.now, message=str(exc), tokens=exc.tokens, limit=exc.limit)
                )
                await self.policy.on_refused(self, exc)
                continue
            usage = completion.usage
            self.main.add(usage, output=self.counts.get(id(reply)))
            self.calls.append(CallRecord(usage.prompt, self.policy.limit(self), False, problems))
            self.append(
                ModelUsage(
                    at=self.now,
                    input=usage.input,
                    cache_read=usage.cache_read,
                    cache_write=usage.cache_write,
                    output=usage.output,
                    model=self.model,
                )
            )
            break
        self.append(reply)
        self.cumulative.append(self.main.weighted + self.summaries.weighted)

    async def curator_summary(self, cut: Cut) -> Window | None:
        """Carry a summary cut out through ``Curator`` (the stand-in or a real model)."""
        if self.curator_is_fake:
            self.fake.queue(
                _text_reply(stand_in_summary(self.view, cut.keep_from)), model=FAKE_CURATOR_MODEL
            )
        result = await self.curator.summarize(self.view, cut, self.curator.settings.model or "")
        if not isinstance(result, Miss):
            self.summaries.add(result.usage)
        else:
            self.misses += 1
        return carry_out(cut, result, self.view.last_seq, self.now)

    async def summary_call(self) -> str | None:
        """The single-summary baseline's summary: the view plus a summary request, one call
        on the thread's model (its prefix is a cache read, as in Claude Code)."""
        messages = to_messages(self.view)
        request_text = Text(SUMMARY_REQUEST)
        if messages and messages[-1].role == "user":
            messages[-1] = Message("user", (*messages[-1].content, request_text))
        else:
            messages.append(Message("user", (request_text,)))
        self.fake.queue(_text_reply(stand_in_summary(self.view, None)), model=self.model)
        request = Request(
            model=self.model, messages=tuple(messages), system=self.system, stream=False
        )
        try:
            completion = await self.client.complete(request)
        except ContextWindowExceeded:
            self.refusals += 1
            return None
        self.summaries.add(completion.usage)
        return completion.text


def _text_reply(text: str) -> Any:
    from condensate.testing.fake_model import Text as FakeText  # noqa: PLC0415

    return FakeText(text)


def _forget_requests(fake: FakeModelServer) -> None:
    """The fake logs every request body; a long replay needs the bills only."""
    state = fake._state  # the fake has no public way to drop its log but keep its cache
    with state._lock:
        state._log.clear()


# -- policies -------------------------------------------------------------------------------


def _trigger(used: int, window: int, reason: str, freed: int = 0) -> WindowTrigger:
    return WindowTrigger(
        used=used, line=window, ceiling=window, window=window, freed=freed, reason=reason
    )


class CondensatePolicy:
    """The real core, as the runtime's checkpoint runs it before each native model call."""

    name = "condensate"

    def limit(self, run: Run) -> int:
        return measure(run.view, ModelWindow(run.window, True), run.config.ceilings).limit

    async def before_call(self, run: Run) -> str | None:
        window = ModelWindow(run.window, resolved=True)
        for _ in range(MAX_CUTS_PER_CALL):
            usage = measure(run.view, window, run.config.ceilings)
            decision = planning.plan(run.view, usage, run.config.planner, run.now)
            match decision:
                case Proceed():
                    return None
                case HoldBack(why=why, line=line):
                    run.holds[why] += 1
                    if line is not None:
                        run.append(SystemLine(at=run.now, code=line[0], text=line[1]))
                    return None
                case Stop(reason=reason):
                    run.append(
                        SystemLine(
                            at=run.now, code="turn-stopped", text=f"The turn stopped: {reason}."
                        )
                    )
                    return reason
                case Cut():
                    if decision.needs_curator:
                        taken = await run.curator_summary(decision)
                    else:
                        taken = decision.window(run.view.last_seq, run.now)
                    if taken is None:
                        run.append(
                            SystemLine(
                                at=run.now,
                                code="summary-missed",
                                text="No summary arrived; the cut waits.",
                            )
                        )
                        return None
                    run.take_window(taken)
                case _:
                    return None
        return None

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        """The refusal is logged; the next check forces a window."""


class UnmanagedPolicy:
    """Sends everything; when the provider refuses, drops the oldest history down to half
    the window (the brief kept)."""

    name = "unmanaged"

    def limit(self, run: Run) -> int:
        return run.window

    async def before_call(self, run: Run) -> str | None:
        return None

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        _drop(run, exc.tokens or run.window, "unmanaged: the provider refused the prompt")


def _drop(run: Run, used: int, reason: str) -> None:
    budget = max(run.window // 2 - run.recording.baseline, 0)
    cut = tiers.summary_cut(run.view, budget, None)
    keep_from = None if cut is None else cut.keep_from
    run.take_window(
        Window(
            at=run.now,
            window_kind="drop",
            cut=run.view.last_seq,
            keep_from=keep_from,
            author="system",
            forced=True,
            trigger=_trigger(used, run.window, reason),
        )
    )


class SingleSummaryPolicy:
    """At a share of the window (83.5 %), one summary of everything; nothing kept."""

    name = "single-summary"

    def __init__(self, share: float = SINGLE_SUMMARY_SHARE) -> None:
        self.share = share

    def limit(self, run: Run) -> int:
        return run.window

    async def before_call(self, run: Run) -> str | None:
        used, _ = next_prompt(run.view)
        if used > self.share * run.window:
            await self._summarize(run, used)
        return None

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        await self._summarize(run, exc.tokens or run.window)

    async def _summarize(self, run: Run, used: int) -> None:
        text = await run.summary_call()
        if text is None:
            _drop(run, used, "single-summary: the summary call itself was refused")
            return
        run.take_window(
            Window(
                at=run.now,
                window_kind="summary",
                cut=run.view.last_seq,
                keep_from=None,
                summary=text,
                author="curator",
                trigger=_trigger(used, run.window, f"single summary at {self.share:.1%}"),
            )
        )


def make_policy(name: str, config: ReplayConfig) -> Policy:
    if name == "condensate":
        return CondensatePolicy()
    if name == "unmanaged":
        return UnmanagedPolicy()
    if name == "single-summary":
        return SingleSummaryPolicy(config.single_summary_share)
    msg = f"Unknown policy {name!r}; use one of {', '.join(POLICIES)}."
    raise CondensateError(msg)


# -- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    bill: Bill
    main: Bill
    summaries: Bill
    calls: int
    refusals: int
    stopped: tuple[str, ...]
    windows: dict[str, int]
    summaries_written: int
    summary_tokens_max: int
    peak_prompt: int
    limit: int
    window: int
    first_overflow_call: int | None
    holds: dict[str, int]
    retention: Retention
    cumulative: tuple[float, ...]

    def to_json(self, prices: Prices) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "model_calls": self.calls,
            "billed": self.bill.to_json(prices),
            "weighted_input": round(self.bill.weighted),
            "cache_read_share": self.bill.to_json(prices)["cache_read_share"],
            "cost_usd": round(self.bill.cost(prices), 4),
            "thread_calls": self.main.to_json(prices),
            "summary_calls": self.summaries.to_json(prices),
            "windows": dict(sorted(self.windows.items())),
            "summaries_written": self.summaries_written,
            "summary_tokens_max": self.summary_tokens_max,
            "peak_prompt": self.peak_prompt,
            "limit": self.limit,
            "window": self.window,
            "peak_share_of_limit": round(self.peak_prompt / self.limit, 3) if self.limit else None,
            "refusals": self.refusals,
            "stopped_calls": len(self.stopped),
            "stop_reasons": sorted(set(self.stopped))[:3],
            "hold_backs": dict(sorted(self.holds.items())),
            "first_overflow_call": self.first_overflow_call,
            "retention": self.retention.to_json(),
        }


def _result(run: Run) -> PolicyResult:
    sent = [c for c in run.calls if not c.refused]
    limits = [c.limit for c in run.calls]
    return PolicyResult(
        policy=run.policy.name,
        bill=run.main.merged(run.summaries),
        main=run.main,
        summaries=run.summaries,
        calls=run.calls_made,
        refusals=run.refusals,
        stopped=tuple(run.stopped),
        windows=dict(run.windows),
        summaries_written=run.summaries_written,
        summary_tokens_max=max(run.summary_tokens, default=0),
        peak_prompt=max((c.prompt for c in sent), default=0),
        limit=min(limits, default=run.policy.limit(run)),
        window=run.window,
        first_overflow_call=run.first_overflow_call,
        holds=dict(run.holds),
        retention=check(run.history, run.view, run.summarized, run.calls),
        cumulative=tuple(run.cumulative),
    )


@dataclass(frozen=True)
class Report:
    recording: Recording
    config: ReplayConfig
    window: int
    curator: str
    results: dict[str, PolicyResult]

    def ratios(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        ours = self.results.get("condensate")
        if ours is None:
            return out
        for name, other in self.results.items():
            if name != "condensate":
                key = f"condensate_vs_{name.replace('-', '_')}"
                out[key] = (
                    round(ours.bill.weighted / other.bill.weighted, 3)
                    if other.bill.weighted
                    else None
                )
        unmanaged = self.results.get("unmanaged")
        if unmanaged is not None and unmanaged.first_overflow_call is not None:
            n = unmanaged.first_overflow_call - 1
            if 0 < n <= len(ours.cumulative) and unmanaged.cumulative[n - 1]:
                out["condensate_vs_unmanaged_until_first_overflow"] = round(
                    ours.cumulative[n - 1] / unmanaged.cumulative[n - 1], 3
                )
        return out

    def to_json(self) -> dict[str, Any]:
        rec = self.recording
        return {
            "recording": {
                "name": rec.name,
                "source": rec.source,
                "engine": rec.engine,
                "model": rec.model,
                "baseline_tokens": rec.baseline,
                "events": len(rec.events),
                "model_calls": rec.model_calls,
                "human_messages": sum(
                    isinstance(e, UserMessage) and e.author == "human" for e in rec.events
                ),
                "tool_results": sum(isinstance(e, ToolResult) for e in rec.events),
                "failed_tool_results": sum(
                    isinstance(e, ToolResult) and e.is_error for e in rec.events
                ),
            },
            "window": self.window,
            "curator": self.curator,
            "weights": WEIGHTS,
            "prices_usd_per_mtok": {
                "input": self.config.prices.input,
                "cache_read": self.config.prices.cache_read,
                "cache_write": self.config.prices.cache_write,
                "output": self.config.prices.output,
            },
            "policies": {n: r.to_json(self.config.prices) for n, r in self.results.items()},
            "ratios": self.ratios(),
        }


def text_report(report: Report) -> str:
    """The human-readable form of a report."""
    data = report.to_json()
    rec = data["recording"]
    lines = [
        f"replay of {rec['name']} ({rec['source']}, {rec['model']}): {rec['model_calls']} model "
        f"calls, {rec['tool_results']} tool results ({rec['failed_tool_results']} failed), "
        f"{rec['human_messages']} human messages; window {data['window']:,}, baseline "
        f"{rec['baseline_tokens']:,}, curator {data['curator']}",
        "weights: uncached 1.0, cache write 1.25, cache read 0.1",
        "",
        f"{'policy':<15} {'weighted in':>12} {'uncached':>10} {'cache rd':>11} {'cache wr':>10} "
        f"{'rd share':>8} {'cost $':>8} {'peak/limit':>17} {'windows':<28} retention",
    ]
    for name, r in data["policies"].items():
        b = r["billed"]
        windows = ", ".join(f"{k} {v}" for k, v in r["windows"].items()) or "none"
        failed = [k for k, v in r["retention"].items() if isinstance(v, dict) and not v["passed"]]
        lines.append(
            f"{name:<15} {b['weighted_input']:>12,} {b['uncached']:>10,} {b['cache_read']:>11,} "
            f"{b['cache_write']:>10,} {b['cache_read_share']:>8.1%} {b['cost_usd']:>8.2f} "
            f"{r['peak_prompt']:>8,}/{r['limit']:<8,} {windows:<28} "
            f"{'pass' if not failed else 'FAIL: ' + ', '.join(failed)}"
        )
    for name, r in data["policies"].items():
        extra = []
        if r["summaries_written"]:
            extra.append(
                f"{r['summaries_written']} summaries (largest {r['summary_tokens_max']:,} tokens)"
            )
        if r["refusals"]:
            extra.append(f"{r['refusals']} refusals (first at call {r['first_overflow_call']})")
        if r["stopped_calls"]:
            extra.append(f"{r['stopped_calls']} calls not sent: {r['stop_reasons']}")
        for key in ("human", "errors", "files", "pairs", "ceiling"):
            check_ = r["retention"][key]
            if not check_["passed"]:
                lost = f"{check_['failed']}/{check_['total']}"
                extra.append(f"{key} {lost} lost, e.g. {check_['examples'][:2]}")
        if extra:
            lines.append(f"  {name}: " + "; ".join(extra))
    if data["ratios"]:
        lines.append("")
        lines += [f"{k}: {v}" for k, v in data["ratios"].items()]
    return "\n".join(lines)


# -- entry point ------------------------------------------------------------------------------


def recording_window(recording: Recording, config: ReplayConfig) -> int:
    if config.window is not None:
        return config.window
    return from_table(bare_model(recording.model)) or DEFAULT_WINDOW


def _fake_model(recording: Recording) -> str:
    """The name the thread's calls use on the fake: the recorded one when tiktoken would not
    look for another encoding (a download, offline), else a Claude-like stand-in."""
    bare = bare_model(recording.model)
    return bare if bare.startswith("claude") else f"claude-replay-{bare}"


async def replay(
    recording: Recording,
    config: ReplayConfig,
    *,
    curator_client_for: Callable[[str], ModelClient] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Run ``recording`` through each policy in ``config``, each against a fresh fake."""
    if not recording.events:
        msg = f"{recording.name} has no conversation to replay."
        raise CondensateError(msg)
    if config.failed_as_control:
        recording = _failed_as_control(recording)
    counter = counter_for("")
    counts = {id(e): count_event(e, counter) for e in recording.events}
    window = recording_window(recording, config)
    system = _filler(recording.baseline, counter)
    results: dict[str, PolicyResult] = {}
    fake_curator = config.curator == FAKE_CURATOR
    curator_model = f"anthropic:{FAKE_CURATOR_MODEL}" if fake_curator else config.curator
    for name in config.policies:
        policy = make_policy(name, config)
        async with (
            FakeModelServer(window=window) as fake,
            aiohttp.ClientSession() as session,
        ):
            client = AnthropicClient(
                fake.url, "replay", session=session, retry=RetryPolicy(max_retries=0)
            )

            def client_for(model: str, client: ModelClient = client) -> ModelClient:
                return client

            curator = Curator(
                CuratorSettings(model=curator_model),
                client_for if fake_curator or curator_client_for is None else curator_client_for,
            )
            run = Run(
                recording,
                policy,
                config,
                fake,
                client,
                curator,
                fake_curator,
                counts,
                counter,
                window,
                system,
                _fake_model(recording),
            )
            await run.run(progress)
            results[name] = _result(run)
    return Report(recording, config, window, curator_model, results)


def _failed_as_control(recording: Recording) -> Recording:
    events = tuple(
        e.model_copy(update={"category": "control"})
        if isinstance(e, ToolResult) and e.is_error
        else e
        for e in recording.events
    )
    return Recording(
        recording.source,
        recording.name,
        recording.engine,
        recording.model,
        recording.baseline,
        events,
    )


def write_events(path: Path, recording: Recording) -> None:
    """A recording as Condensate events, one JSON object a line (``load`` reads it back)."""
    created = ThreadCreated(
        at=recording.events[0].at if recording.events else _EPOCH,
        engine=recording.engine,
        model=recording.model,
        cwd="/replay",
        baseline_tokens=recording.baseline,
    )
    with path.open("w", encoding="utf-8") as handle:
        for event in _chain(created, recording.events):
            handle.write(event.model_dump_json() + "\n")


def _chain(first: Event, rest: Iterable[Event]) -> Iterator[Event]:
    yield first
    yield from rest
