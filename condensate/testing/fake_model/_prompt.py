"""What the model reads of an Anthropic Messages request, in the API's order of work: the beta
fields checked, the request cut into parts, a carried compaction block checked, the thinking
blocks checked as sent (``_thinking``), the dropped ones taken out, the context edits applied
(``_context``), and the rest priced against the prompt cache (``_caching``). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from condensate.testing.fake_model._accounting import Bill
from condensate.testing.fake_model._caching import anthropic_key, breakpoints
from condensate.testing.fake_model._context import apply_edits, carried, compaction_asked, edits_of
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._models import min_cacheable, runs_thinking_check
from condensate.testing.fake_model._parts import Part, anthropic_parts, settle, total_tokens
from condensate.testing.fake_model._state import Details, FakeState, Priced, ThinkingOutcome
from condensate.testing.fake_model._thinking import (
    BINDING_BETA,
    Outcome,
    check,
    drop_requested,
    thinking_enabled,
)


def betas_of(headers: Mapping[str, str]) -> frozenset[str]:
    """The ``anthropic-beta`` values, from a comma-separated header (any position)."""
    return frozenset(v.strip() for v in headers.get("anthropic-beta", "").split(",") if v.strip())


@dataclass(frozen=True)
class Prepared:
    """A checked request: ``sent`` as the client sent it, ``read`` as the model reads it."""

    model: str
    betas: frozenset[str]
    sent: list[Part]
    read: list[Part]
    outcome: Outcome
    thinking_on: bool
    applied_edits: list[dict[str, Any]] | None
    summarize: bool
    carried: bool
    display: str

    @property
    def refusal(self) -> str | None:
        return self.outcome.refusal

    @property
    def tokens(self) -> int:
        return total_tokens(self.read)

    def details(self) -> Details:
        checked = runs_thinking_check(self.model) or self.outcome.checked
        thinking = (
            ThinkingOutcome(
                self.outcome.checked,
                tuple(d.to_json() for d in self.outcome.dropped),
                self.refusal is not None,
            )
            if checked
            else None
        )
        edits = None if self.applied_edits is None else tuple(self.applied_edits)
        compaction: Literal["summarized", "carried"] | None = None
        if self.summarize:
            compaction = "summarized"
        elif self.carried:
            compaction = "carried"
        return Details(thinking, self.outcome.rethink_tokens, edits, compaction)


def _check_binding(body: Mapping[str, Any], betas: frozenset[str]) -> None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and "block_binding" in thinking and BINDING_BETA not in betas:
        msg = f"thinking.{thinking.get('type')}.block_binding: Extra inputs are not permitted"
        raise BadRequest(msg)


def prepare(state: FakeState, body: Mapping[str, Any], headers: Mapping[str, str]) -> Prepared:
    """Checks ``body``; raises ``BadRequest`` for what the API refuses before reading it. A
    failed thinking check is not raised: it is the ``refusal`` of the result, so the log can
    say what the check did."""
    model = str(body["model"])
    betas = betas_of(headers)
    _check_binding(body, betas)
    summarize = compaction_asked(body, betas)
    edits = edits_of(body)
    sent = anthropic_parts(body, model)
    breakpoints(sent, body)
    carrying = carried(state.compactions, sent)
    thinking_on = thinking_enabled(body)
    outcome = check(
        state.thinking,
        model,
        sent,
        drop_block=drop_requested(body),
        beta=BINDING_BETA in betas,
        thinking_on=thinking_on,
        carried=carrying,
    )
    kept = [p for p in sent if not (p.is_thinking and p.path in outcome.dropped_paths)]
    read = settle(model, [_billed(state, part) for part in kept])
    applied = None
    if edits is not None:
        read, applied = apply_edits(model, read, edits)
    return Prepared(
        model,
        betas,
        sent,
        read,
        outcome,
        thinking_on,
        applied,
        summarize,
        carrying is not None,
        _display(model, body),
    )


def _billed(state: FakeState, part: Part) -> Part:
    """A kept thinking block is billed at the thinking it stands for, shown or not: "usable
    blocks stay in context and are billed as input" (preserved thinking)."""
    issued = state.thinking.get(part.signature) if part.is_thinking else None
    return part if issued is None else replace(part, tokens=part.overhead + issued.tokens)


def _display(model: str, body: Mapping[str, Any]) -> str:
    """``thinking.display``; unset, "omitted" on the models that sign their blocks ("`display`
    defaults to "omitted" on newer models", https://platform.claude.com/docs/en/
    build-with-claude/thinking-troubleshooting) and "summarized" on the others."""
    thinking = body.get("thinking")
    display = thinking.get("display") if isinstance(thinking, Mapping) else None
    if isinstance(display, str):
        return display
    return "omitted" if runs_thinking_check(model) else "summarized"


def price(state: FakeState, body: Mapping[str, Any], prepared: Prepared) -> Priced:
    """The bill of what the model reads; answered, it writes the cache and marks the lost
    thinking it re-creates as paid. A compaction request does not use the cache (assumed)."""
    chars = sum(len(p.text) for p in prepared.read)
    if prepared.summarize:
        return Priced(Bill(prepared.tokens), chars)
    bill, write = state.anthropic_cache.price(
        anthropic_key(prepared.model, body),
        prepared.read,
        breakpoints(prepared.read, body),
        min_cacheable(prepared.model),
        state.clock.now(),
    )
    rethought = list(prepared.outcome.rethink or {})

    def commit() -> None:
        write()
        state.thinking.charge(rethought)

    return Priced(bill, chars, commit)
