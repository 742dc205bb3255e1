"""The emergency condenser of an agent-reset thread: when the provider refuses its prompt as
too long for the window, the whole eligible view (all of it but the input after the refused
request, which the reset keeps as it is) is summarized on the thread's emergency model from
event previews. Up to ``attempts`` tries, each with previews ``scaling`` times shorter than
the one before; any provider error is a failed try. An edge: it calls the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from condensate.core import reset
from condensate.core.messages import Message, Request, Text, Usage
from condensate.core.projector import Entry, Projection
from condensate.core.render import entry_text
from condensate.engine import TurnContext
from condensate.errors import ProviderError
from condensate.events import EmergencyReset, ResetPolicy, SystemLine
from condensate.providers import ModelClient, parse_model

PREVIEW_CHARS = 4_000
"""An event's preview in the first try (then ``scaling`` times shorter each try)."""
SUMMARY_TOKENS = 4_000

SYSTEM = (
    "You write the summary a coding agent resumes its work from: its context overflowed the "
    "model's window and everything before this point is replaced by your summary. Keep what "
    "the agent needs to carry on: the user's requests and instructions (quoted where short), "
    "decisions made, what was tried and failed with its errors, the files touched and their "
    "state, and exactly what was in progress and what is left. Be concrete and brief."
)


@dataclass(frozen=True)
class Summary:
    text: str
    attempts: int
    usage: Usage
    model: str


def eligible(view: Projection, boundary: int) -> list[Entry]:
    """What the summary covers: the whole view but the genuine input after ``boundary``
    (which the reset keeps as it is)."""
    kept = {e.seq for e in view.pending_after(boundary)}
    return [e for e in view.entries if e.seq not in kept]


def previews(view: Projection, entries: Sequence[Entry], chars: int) -> str:
    """The entries as text, each cut to its first and last ``chars / 2`` characters."""
    parts: list[str] = []
    for entry in entries:
        text = entry_text(entry, view)
        if not text:
            continue
        if len(text) > chars:
            half = max(chars // 2, 1)
            gap = len(text) - 2 * half
            text = f"{text[:half]}\n[... {gap:,} characters left out ...]\n{text[-half:]}"
        parts.append(text)
    return "\n\n".join(parts)


async def summarize(
    view: Projection, boundary: int, client: ModelClient, policy: ResetPolicy
) -> Summary | list[str]:
    """The summary, or why each try failed."""
    assert policy.emergency_model is not None
    model = parse_model(policy.emergency_model).name
    entries = eligible(view, boundary)
    chars = float(PREVIEW_CHARS)
    failures: list[str] = []
    for attempt in range(1, policy.emergency_attempts + 1):
        transcript = previews(view, entries, max(int(chars), 200))
        request = Request(
            model=model,
            messages=(Message("user", (Text(f"The conversation so far:\n\n{transcript}"),)),),
            system=SYSTEM,
            tools=(),
            max_tokens=SUMMARY_TOKENS,
            cached=False,
        )
        try:
            reply = await client.complete(request)
        except ProviderError as exc:
            failures.append(f"try {attempt}: {exc}")
            chars *= policy.emergency_scaling
            continue
        if reply.text.strip():
            return Summary(reply.text.strip(), attempt, reply.usage, reply.model or model)
        failures.append(f"try {attempt}: the summary came back empty")
        chars *= policy.emergency_scaling
    return failures


async def condense(ctx: TurnContext, policy: ResetPolicy, window: int, boundary: int) -> str | None:
    """The provider refused the prompt as too long: an agent-reset thread's emergency
    condensation, logged (the summary's count as a side call, then the reset), or why there is
    none, said in the log (the turn then stops, its history kept). ``boundary`` is the last seq
    the refused request held: the input after it is kept as it is."""
    view = ctx.view
    why: str | None = None
    if view.baseline_tokens >= window:
        why = reset.fixed_too_large(view.baseline_tokens, window)
    elif policy.emergency_model is None:
        why = reset.NO_EMERGENCY
    elif view.emergency_blocked:
        why = reset.BLOCKED
    else:
        done = await summarize(view, boundary, ctx.client(policy.emergency_model), policy)
        if not isinstance(done, Summary):
            why = reset.exhausted(done)
        else:
            await ctx.append(
                [
                    done.usage.logged(ctx.now(), done.model, side=True),
                    EmergencyReset(
                        at=ctx.now(),
                        summary=done.text,
                        boundary=boundary,
                        model=policy.emergency_model,
                        attempts=done.attempts,
                    ),
                ]
            )
            return None
    await ctx.append(SystemLine(at=ctx.now(), code="emergency-unavailable", text=f"{why}."))
    return why
