"""The curator writes summaries: one call without tools, down a chain of models, within a
deadline.

The chain is ``CONDENSATE_CURATOR_MODEL`` (thinking off), ``CONDENSATE_CURATOR_FALLBACK_MODEL``,
then the thread's own model. The whole chain has 180 s plus 10 s per 10,000 tokens in use
(``CONDENSATE_WINDOW_DEADLINE_MS`` overrides); each model gets an even share of what is left.
Human messages and failed tool calls with their error text are kept verbatim: the prompt asks
for it, and whatever the model left out is appended word for word. Earlier summaries are
history, not human words. With ``CONDENSATE_HINDSIGHT_URL`` set, reference notes are recalled
first within about 1.5 s; a slow or failed recall costs the summary nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

import aiohttp
import anyio
import structlog

from condensate.errors import CondensateError
from condensate.events import AssistantMessage, ToolResult, UserMessage, Window
from condensate.planner import Cut, deadline
from condensate.projector import DROP_NOTICE, Entry, Projection
from condensate.providers import ModelClient, parse_model
from condensate.providers.types import Completion, Message, Request, Usage
from condensate.tiers import VERBATIM_FAILURES_CHARS, VERBATIM_HEADING, verbatim_error

log = structlog.get_logger()

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
    attempts: tuple[Attempt, ...]
    notes: int = 0


@dataclass(frozen=True)
class Miss:
    """No model in the chain answered before the deadline."""

    attempts: tuple[Attempt, ...]
    reason: str


# -- the prompt (pure) ------------------------------------------------------------------------


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
        case UserMessage(author=author, text=text):
            return f"[message from the {author}]\n{text}"
        case AssistantMessage():
            calls = "\n".join(f"  call {c.name} {c.arguments}" for c in event.tool_calls)
            return "\n".join(p for p in ("[assistant]", event.text, calls) if p)
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
            return f"[earlier context was dropped]\n{DROP_NOTICE}"
        case _:
            return ""


def verbatim_items(entries: list[Entry]) -> list[str]:
    """What must reach the summary word for word: human messages, failed calls with their
    errors, and the verbatim records of earlier summaries."""
    items: list[str] = []
    for entry in entries:
        match entry.event:
            case UserMessage(author="human", text=text):
                items.append(f'Human: "{text}"')
            case ToolResult(is_error=True) as failed:
                error = verbatim_error(failed.output, entry.seq)
                items.append(f"Failed {failed.tool}({failed.argument}):\n{error}")
            case Window(window_kind="summary", summary=summary) if summary:
                _, _, record = summary.partition(VERBATIM_HEADING + "\n")
                items += [item for item in record.split("\n\n") if item.strip()]
            case _:
                pass
    return _within_bound(items)


def _within_bound(items: list[str]) -> list[str]:
    """Every human message; the failures' error texts newest first up to
    ``VERBATIM_FAILURES_CHARS``, an older failure as its call and its error's first line."""
    room = VERBATIM_FAILURES_CHARS
    kept: list[str] = []
    for item in reversed(items):
        shown = item
        if item.startswith("Failed ") and len(item) > room:
            call, _, error = item.partition(":\n")
            first = error.strip().splitlines()[0][:200] if error.strip() else ""
            shown = f"{call}:\n{first} [error cut; the log keeps it]"
        if shown.startswith("Failed "):
            room = max(room - len(shown), 0)
        kept.append(shown)
    kept.reverse()
    return kept


def summary_prompt(view: Projection, keep_from: int | None, notes: list[str]) -> str:
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
    parts.append("Write the summary now.")
    return "\n\n---\n\n".join(parts)


def with_verbatim_record(text: str, items: list[str]) -> str:
    """``text`` plus, word for word, every item the model did not already copy."""
    missing = [item for item in items if item not in text and _body(item) not in text]
    if not missing:
        return text
    return f"{text.rstrip()}\n\n{VERBATIM_HEADING}\n" + "\n\n".join(missing)


def _body(item: str) -> str:
    """The part of an item a model would quote: the message or the error text."""
    if item.startswith('Human: "') and item.endswith('"'):
        return item[len('Human: "') : -1]
    return item.partition(":\n")[2] or item


def carry_out(cut: Cut, result: Summary | Miss | None, cut_seq: int, at: datetime) -> Window | None:
    """The window to append once the curator is done, or None when the cut waits (a miss
    while there is room). A forced miss drops without a summary."""
    if not cut.needs_curator:
        return cut.window(cut_seq, at)
    if isinstance(result, Summary):
        return cut.window(cut_seq, at, summary=result.text, author="curator")
    if cut.forced:
        return cut.as_drop().window(cut_seq, at)
    return None


# -- the calls (I/O) ------------------------------------------------------------------------


@dataclass
class Curator:
    """Writes summaries through the model chain. ``client_for`` builds a client per model."""

    settings: CuratorSettings
    client_for: Callable[[str], ModelClient]
    session: aiohttp.ClientSession | None = None
    clock: Callable[[], float] = field(default=time.monotonic)

    def chain(self, thread_model: str) -> list[str]:
        models = [self.settings.model, self.settings.fallback_model, thread_model]
        out: list[str] = []
        for model in models:
            if model and model not in out:
                out.append(model)
        return out

    def deadline_for(self, used: int) -> timedelta:
        return deadline(used, self.settings.deadline_override)

    async def summarize(self, view: Projection, cut: Cut, thread_model: str) -> Summary | Miss:
        """A summary of what ``cut`` replaces, or a Miss when no model answered in time."""
        total = self.deadline_for(cut.usage.used).total_seconds()
        started = self.clock()
        notes = await self.recall(view)
        entries = replaced_entries(view, cut.keep_from)
        prompt = summary_prompt(view, cut.keep_from, notes)
        items = verbatim_items(entries)
        attempts: list[Attempt] = []
        chain = self.chain(thread_model)
        for index, model in enumerate(chain):
            remaining = total - (self.clock() - started)
            if remaining <= 0:
                break
            share = remaining / (len(chain) - index)
            attempt_started = self.clock()
            try:
                with anyio.fail_after(share):
                    completion = await self._call(model, prompt)
            except TimeoutError:
                attempts.append(
                    Attempt(
                        model,
                        "timeout",
                        f"no answer within {share:.1f} s",
                        self.clock() - attempt_started,
                    )
                )
                continue
            except (CondensateError, ValueError) as exc:
                attempts.append(Attempt(model, "failed", str(exc), self.clock() - attempt_started))
                continue
            if not completion.text.strip():
                attempts.append(
                    Attempt(model, "failed", "empty summary", self.clock() - attempt_started)
                )
                continue
            attempts.append(Attempt(model, "ok", "", self.clock() - attempt_started))
            text = with_verbatim_record(completion.text.strip(), items)
            log.info(
                "summary_written",
                model=model,
                attempts=len(attempts),
                output_tokens=completion.usage.output,
            )
            return Summary(text, model, completion.usage, tuple(attempts), len(notes))
        reason = "; ".join(f"{a.model}: {a.outcome} ({a.detail})" for a in attempts)
        log.warning("summary_missed", deadline=total, attempts=reason)
        return Miss(tuple(attempts), reason or "no model could be tried before the deadline")

    async def _call(self, model: str, prompt: str) -> Completion:
        name = parse_model(model)
        request = Request(
            model=name.name,
            messages=(Message.user(prompt),),
            system=SYSTEM_PROMPT,
            max_tokens=self.settings.max_tokens,
            thinking=False,
        )
        return await self.client_for(model).complete(request)

    async def recall(self, view: Projection) -> list[str]:
        """Reference notes from Hindsight, or none when it is absent, slow or failing."""
        url = self.settings.hindsight_url
        if not url or self.session is None:
            return []
        query = _recall_query(view)
        endpoint = (
            f"{url.rstrip('/')}/v1/default/banks/{self.settings.hindsight_bank}/memories/recall"
        )
        try:
            with anyio.fail_after(self.settings.recall_budget):
                async with self.session.post(endpoint, json={"query": query}) as response:
                    if response.status != 200:
                        log.info("recall_failed", status=response.status)
                        return []
                    body = await response.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            log.info("recall_failed", error=str(exc) or type(exc).__name__)
            return []
        results = body.get("results", []) if isinstance(body, dict) else []
        return [str(r["text"]) for r in results if isinstance(r, dict) and r.get("text")]


def _recall_query(view: Projection) -> str:
    humans = [
        e.event.text
        for e in view.entries
        if isinstance(e.event, UserMessage) and e.event.author == "human"
    ]
    picked = [humans[0], humans[-1]] if len(humans) > 1 else humans
    return "\n".join(picked)[:1_000]
