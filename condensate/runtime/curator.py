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
from datetime import timedelta

import aiohttp
import anyio
import structlog

from condensate.core.messages import Completion, Message, Request, Text, Usage
from condensate.core.planner import Cut, deadline
from condensate.core.probes import (
    Answers,
    Probe,
    missed,
    probes_for,
    repaired,
    retry_request,
    verbatim_items,
    with_verbatim_record,
)
from condensate.core.probes import report as probe_report
from condensate.core.projector import Projection
from condensate.core.summary import (
    SYSTEM_PROMPT,
    Attempt,
    CuratorSettings,
    Miss,
    Summary,
    replaced_entries,
    summary_prompt,
)
from condensate.errors import CondensateError
from condensate.events import UserMessage
from condensate.providers import ModelClient, parse_model

log = structlog.get_logger()


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
