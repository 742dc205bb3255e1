"""Retention checks: what a windowing policy must not lose. Pure: no I/O.

Computed on every replay (``condensate replay``, ``benchmarks/long_task.py``) from the whole
history, the final view, the seqs that went into a summary, and what each model call sent:

- **human**: each human message is in the view, or verbatim in the view's text (a summary's
  verbatim record), or was in the input of the summary that replaced it;
- **errors**: each failed tool call's error text is likewise in the view, verbatim in its text,
  or was in a summary's input. A failed result that a cheap tier turned into a receipt before
  any summary read it fails this check: the receipt keeps the fact, not the text;
- **files**: every file read, edited or written (a successful call of a file tool) is named
  somewhere in the view: a tool call, a receipt, a result or a summary;
- **pairs**: every request sent had each ``tool_use`` answered in the next message and no
  orphan ``tool_result``;
- **ceiling**: no request was sent over the policy's limit (a refused request counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from condensate.core.messages import Message, ToolOutput, ToolUse
from condensate.core.projector import Projection
from condensate.core.receipts import bare_tool, files_named
from condensate.core.render import render_window
from condensate.events import Stored, ToolCall, ToolResult, UserMessage

FILE_TOOLS = {
    "read": "read",
    "read_file": "read",
    "view": "read",
    "cat": "read",
    "notebookread": "read",
    "edit": "edit",
    "multiedit": "edit",
    "str_replace": "edit",
    "str_replace_editor": "edit",
    "notebookedit": "edit",
    "apply_patch": "edit",
    "write": "write",
    "write_file": "write",
    "create": "write",
    "create_file": "write",
}
"""Tool names (lower case, after any ``mcp__server__`` prefix) that read, edit or write files."""

MAX_EXAMPLES = 5


def file_tool(tool: str) -> str | None:
    """``read``, ``edit`` or ``write`` for a file tool's name, else None."""
    return FILE_TOOLS.get(bare_tool(tool))


def files_of(result: ToolResult) -> list[str]:
    """The files a successful file-tool call touched, as its argument names them."""
    if result.is_error or file_tool(result.tool) is None:
        return []
    return files_named(result.tool, result.argument)


def pair_problems(messages: Sequence[Message]) -> list[str]:
    """What the Messages API would refuse about tool pairing in ``messages``."""
    problems: list[str] = []
    for i, message in enumerate(messages):
        if message.role == "assistant":
            calls = [b.id for b in message.content if isinstance(b, ToolUse)]
            after = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                {b.call_id for b in after.content if isinstance(b, ToolOutput)}
                if after is not None and after.role == "user"
                else set()
            )
            problems += [
                f"message {i}: tool_use {c} has no result" for c in calls if c not in answered
            ]
        else:
            before = messages[i - 1] if i > 0 else None
            offered = (
                {b.id for b in before.content if isinstance(b, ToolUse)}
                if before is not None and before.role == "assistant"
                else set()
            )
            problems += [
                f"message {i}: tool_result {b.call_id} has no call"
                for b in message.content
                if isinstance(b, ToolOutput) and b.call_id not in offered
            ]
    return problems


@dataclass(frozen=True)
class CallRecord:
    """What one model call sent, as the provider counted it."""

    prompt: int
    limit: int
    refused: bool = False
    pair_problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    name: str
    total: int
    failed: int
    examples: tuple[str, ...] = ()
    routes: Mapping[str, int] = field(default_factory=dict)
    """How the passing items passed (in the view, verbatim in its text, in a summary's input)."""

    @property
    def passed(self) -> bool:
        return self.failed == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": self.total,
            "failed": self.failed,
            "routes": dict(self.routes),
            "examples": list(self.examples),
        }


@dataclass(frozen=True)
class Retention:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, **{c.name: c.to_json() for c in self.checks}}


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _kept(
    name: str,
    items: Iterable[tuple[int, str, str]],
    live: set[int],
    text: str,
    summarized: set[int],
) -> Check:
    """Each (seq, label, verbatim text) is live in the view, verbatim in its text, or was in
    a summary's input."""
    routes = {"in_view": 0, "verbatim_in_view_text": 0, "in_summary_input": 0}
    total = failed = 0
    examples: list[str] = []
    for seq, label, body in items:
        total += 1
        if seq in live:
            routes["in_view"] += 1
        elif body and body in text:
            routes["verbatim_in_view_text"] += 1
        elif seq in summarized:
            routes["in_summary_input"] += 1
        else:
            failed += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append(f"seq {seq} {label}: {_short(body)}")
    return Check(name, total, failed, tuple(examples), routes)


def check(
    history: Sequence[Stored],
    view: Projection,
    summarized: set[int],
    calls: Sequence[CallRecord],
) -> Retention:
    """Every retention check over a finished run.

    ``history`` is every event the run logged; ``view`` its final projection; ``summarized``
    the seqs whose full content (not a receipt) was in the input of a summary; ``calls`` what
    each model call sent.
    """
    live = {e.seq for e in view.entries if e.event is not None}
    text = render_window(view)
    humans: list[tuple[int, str, str]] = []
    errors: list[tuple[int, str, str]] = []
    files: dict[str, int] = {}
    for stored in history:
        event = stored.event
        if isinstance(event, UserMessage) and event.author == "human":
            humans.append((stored.seq, "human message", event.text))
        elif isinstance(event, ToolResult):
            if event.is_error:
                errors.append((stored.seq, f"failed {event.tool}({event.argument})", event.output))
            for path in files_of(event):
                files.setdefault(path, stored.seq)
    missing = [(seq, path) for path, seq in files.items() if path not in text]
    file_check = Check(
        "files",
        len(files),
        len(missing),
        tuple(f"seq {seq}: {path}" for seq, path in missing[:MAX_EXAMPLES]),
        {"named_in_view": len(files) - len(missing)},
    )
    pairs = [p for c in calls for p in c.pair_problems]
    over = [c for c in calls if c.refused or c.prompt > c.limit]
    return Retention(
        (
            _kept("human", humans, live, text, summarized),
            _kept("errors", errors, live, text, summarized),
            file_check,
            Check(
                "pairs",
                len(calls),
                len({id(c) for c in calls if c.pair_problems}),
                tuple(pairs[:MAX_EXAMPLES]),
            ),
            Check(
                "ceiling",
                len(calls),
                len(over),
                tuple(
                    f"{'refused' if c.refused else 'sent'} {c.prompt} tokens over {c.limit}"
                    for c in over[:MAX_EXAMPLES]
                ),
            ),
        )
    )


def call_files(call: ToolCall) -> list[str]:
    """Paths a file tool's call names (``path``, ``file_path``, ``notebook_path``)."""
    if file_tool(call.name) is None:
        return []
    out: list[str] = []
    for key in ("path", "file_path", "notebook_path"):
        value = call.arguments.get(key)
        if isinstance(value, str) and value:
            out.append(value)
    return out
