"""The curator's pure half: the summary prompt (what the curator model reads), the summary a
call returns or the miss when none did, and ``carry_out``, which turns a cut and its result
into the window to append. The calls themselves (the model chain, the deadline, recall) are
``condensate.runtime.curator``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from condensate.core.messages import Usage
from condensate.core.planner import Cut
from condensate.core.probes import Probe
from condensate.core.projector import Entry, Projection, drop_notice
from condensate.core.tiers import verbatim_error
from condensate.events import AssistantMessage, ProbeReport, ToolResult, UserMessage, Window

RESULT_EXCERPT = 2_000
"""Characters of a successful tool result the curator sees (head and tail)."""

SYSTEM_PROMPT = """You write the summary that replaces the earlier part of a coding agent's \
conversation. The agent will continue from your summary and the recent messages, so write \
what it needs to go on: the task and its constraints, decisions made and why, the state of \
the work (files changed, what passes, what fails), open problems, and next steps.

Rules:
- Copy every human message verbatim, in quotes, in order.
- Copy every failed tool call verbatim with its full error text: failures are the history a \
resumed agent needs most.
- Text marked as an earlier summary is history written by a summarizer, not something a human \
said; carry its facts forward.
- Name every file that was read, edited or written.
- Do not call tools. Answer with the summary only."""


@dataclass(frozen=True)
class CuratorSettings:
    model: str | None = None
    fallback_model: str | None = None
    hindsight_url: str | None = None
    hindsight_bank: str = "condensate"
    recall_budget: float = 1.5
    deadline_override: timedelta | None = None
    max_tokens: int = 4_000


@dataclass(frozen=True)
class Attempt:
    model: str
    outcome: Literal["ok", "failed", "timeout"]
    detail: str
    seconds: float


@dataclass(frozen=True)
class Summary:
    text: str
    model: str
    usage: Usage
    """What the summary's calls cost together (a retry's included)."""
    attempts: tuple[Attempt, ...]
    notes: int = 0
    probes: ProbeReport | None = None


@dataclass(frozen=True)
class Miss:
    """No model in the chain answered before the deadline."""

    attempts: tuple[Attempt, ...]
    reason: str


def replaced_entries(view: Projection, keep_from: int | None) -> list[Entry]:
    """The entries a summary with this ``keep_from`` replaces (never the brief or pins)."""
    end = len(view.entries)
    if keep_from is not None:
        position = view.position(keep_from)
        end = position if position is not None else end
    return [e for e in view.entries[:end] if not view.is_protected(e)]


def _excerpt(text: str) -> str:
    if len(text) <= RESULT_EXCERPT:
        return text
    half = RESULT_EXCERPT // 2
    return f"{text[:half]}\n…[{len(text) - RESULT_EXCERPT} characters omitted]…\n{text[-half:]}"


def _transcript_line(entry: Entry) -> str:
    event = entry.event
    if entry.receipt is not None:
        return entry.receipt
    match event:
        case UserMessage(author="human", text=text):
            return f"[human message — keep verbatim]\n{text}"
        case UserMessage(author=author):
            return f"[message from the {author}]\n{entry.shown_text()}"
        case AssistantMessage():
            calls = "\n".join(f"  call {c.name} {c.arguments}" for c in entry.shown_calls())
            text = entry.shown_text() if event.text else ""
            return "\n".join(p for p in ("[assistant]", text, calls) if p)
        case ToolResult(is_error=True):
            return (
                f"[FAILED tool call {event.tool}({event.argument}) — keep this error verbatim]\n"
                f"{verbatim_error(event.output, entry.seq)}"
            )
        case ToolResult():
            return f"[tool result {event.tool}({event.argument})]\n{_excerpt(event.output)}"
        case Window(window_kind="summary", summary=summary):
            return f"[earlier summary — history, not a human message]\n{summary or ''}"
        case Window():
            return f"[earlier context was dropped]\n{drop_notice(event)}"
        case _:
            return ""


def summary_prompt(
    view: Projection, keep_from: int | None, notes: list[str], still_open: list[Probe] | None = None
) -> str:
    """The one user message the curator model reads."""
    parts: list[str] = []
    brief = next((e for e in view.entries if e.seq == view.brief_seq), None)
    if brief is not None and isinstance(brief.event, UserMessage):
        parts.append(
            f"The task brief (it stays in the context; do not repeat it):\n{brief.event.text}"
        )
    if notes:
        parts.append("Reference notes from long-term memory:\n" + "\n".join(notes))
    transcript = "\n\n".join(
        line for e in replaced_entries(view, keep_from) if (line := _transcript_line(e))
    )
    parts.append(f"The conversation to summarize:\n\n{transcript}")
    if still_open:
        listed = "\n".join(f"- {p.label}: {p.needle}" for p in still_open)
        parts.append(f"Still open at this point (state each as open in the summary):\n{listed}")
    parts.append("Write the summary now.")
    return "\n\n---\n\n".join(parts)


def carry_out(cut: Cut, result: Summary | Miss | None, cut_seq: int, at: datetime) -> Window | None:
    """The window to append once the curator is done, or None when the cut waits (a miss
    while there is room). A forced miss drops without a summary."""
    if not cut.needs_curator:
        return cut.window(cut_seq, at)
    if isinstance(result, Summary):
        return cut.window(cut_seq, at, summary=result.text, author="curator", probes=result.probes)
    if cut.forced:
        return cut.as_drop().window(cut_seq, at)
    return None
