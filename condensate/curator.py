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
from condensate.events import AssistantMessage, ProbeReport, ToolResult, UserMessage, Window
from condensate.planner import Cut, deadline
from condensate.probes import (
    Answers,
    Probe,
    missed,
    probes_for,
    repaired,
    retry_request,
    verbatim_items,
    with_verbatim_record,
)
from condensate.probes import report as probe_report
from condensate.projector import Entry, Projection, drop_notice
from condensate.providers import ModelClient, parse_model
from condensate.providers.types import Completion, Message, Request, Text, Usage
from condensate.tiers import verbatim_error

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
    """What the summary's calls cost together (a retry's included)."""
    attempts: tuple[Attempt, ...]
    notes: int = 0
    probes: ProbeReport | None = None


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
        """A summary of what ``cut`` replaces, checked by its probes (retried once naming
        what it missed, then repaired), or a Miss when no model answered in time."""
        total = self.deadline_for(cut.usage.used).total_seconds()
        started = self.clock()
        notes = await self.recall(view)
        entries = replaced_entries(view, cut.keep_from)
        probes = probes_for(view, entries)
        still_open = [p for p in probes if p.kind == "open"]
        prompt = summary_prompt(view, cut.keep_from, notes, still_open)
        attempts: list[Attempt] = []
        chain = self.chain(thread_model)
        for index, model in enumerate(chain):
            remaining = total - (self.clock() - started)
            if remaining <= 0:
                break
            share = remaining / (len(chain) - index)
            answer = await self._attempt(model, (Message.user(prompt),), share, attempts)
            if answer is None:
                continue
            text, usage, answers = await self._checked(
                model, prompt, answer, probes, deadline_at=started + total, attempts=attempts
            )
            to_repair = missed(text, probes)
            # Human messages and errors come back with the verbatim record (earlier
            # summaries' records with them); files and open items are appended after it.
            text = repaired(with_verbatim_record(text, verbatim_items(entries)), to_repair)
            report = probe_report(probes, answers, to_repair, text)
            log.info(
                "summary_written",
                model=model,
                attempts=len(attempts),
                output_tokens=usage.output,
                probes_missed=len(report.missed),
                retried=report.retried,
            )
            return Summary(text, model, usage, tuple(attempts), len(notes), report)
        reason = "; ".join(f"{a.model}: {a.outcome} ({a.detail})" for a in attempts)
        log.warning("summary_missed", deadline=total, attempts=reason)
        return Miss(tuple(attempts), reason or "no model could be tried before the deadline")

    async def _attempt(
        self,
        model: str,
        messages: tuple[Message, ...],
        seconds: float,
        attempts: list[Attempt],
        what: str = "",
    ) -> Completion | None:
        """One call within ``seconds``: its completion, or None (the attempt noted)."""
        begun = self.clock()
        try:
            with anyio.fail_after(seconds):
                completion = await self._call(model, messages)
        except TimeoutError:
            detail = f"{what}no answer within {seconds:.1f} s"
            attempts.append(Attempt(model, "timeout", detail, self.clock() - begun))
            return None
        except (CondensateError, ValueError) as exc:
            attempts.append(Attempt(model, "failed", f"{what}{exc}", self.clock() - begun))
            return None
        if not completion.text.strip():
            attempts.append(Attempt(model, "failed", f"{what}empty summary", self.clock() - begun))
            return None
        attempts.append(Attempt(model, "ok", what.rstrip(": "), self.clock() - begun))
        return completion

    async def _checked(
        self,
        model: str,
        prompt: str,
        answer: Completion,
        probes: list[Probe],
        *,
        deadline_at: float,
        attempts: list[Attempt],
    ) -> tuple[str, Usage, Answers]:
        """The answer's text, or the retry's when it misses less: the retry (once, on the
        same model, within what is left of the deadline) is told what the answer missed.
        Returns the text, the calls' usage, and what the answers missed."""
        text = answer.text.strip()
        first = tuple(missed(text, probes))
        remaining = deadline_at - self.clock()
        if not first or remaining <= 0:
            return text, answer.usage, Answers(first)
        messages = (
            Message.user(prompt),
            Message("assistant", (Text(text),)),
            Message.user(retry_request(first)),
        )
        again = await self._attempt(model, messages, remaining, attempts, "retry: ")
        if again is None:
            return text, answer.usage, Answers(first, True, first)
        usage = _plus(answer.usage, again.usage)
        second = tuple(missed(again.text.strip(), probes))
        if len(second) >= len(first):
            return text, usage, Answers(first, True, first)
        return again.text.strip(), usage, Answers(first, True, second)

    async def _call(self, model: str, messages: tuple[Message, ...]) -> Completion:
        name = parse_model(model)
        request = Request(
            model=name.name,
            messages=messages,
            system=SYSTEM_PROMPT,
            max_tokens=self.settings.max_tokens,
            thinking=False,
            cached=False,
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


def _plus(one: Usage, two: Usage) -> Usage:
    return Usage(
        one.input + two.input,
        one.cache_read + two.cache_read,
        one.cache_write + two.cache_write,
        one.output + two.output,
    )
