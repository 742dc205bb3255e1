"""Reading what a provider sent. Pure: no I/O. Used by every client.

Anything a reply cannot be read as (a non-JSON line or body, JSON of the wrong shape) becomes
``MalformedResponse``, which is retried. Tool arguments that cannot be read are not an error:
``arguments`` says why, and the completion lists the call in ``invalid_arguments``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from condensate.errors import MalformedResponse

QUOTED = 200
"""Characters of a bad line, body or arguments text quoted in a message."""


def quote(text: str, limit: int = QUOTED) -> str:
    """The start of ``text``, marked when cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def malformed(provider: str, detail: str) -> MalformedResponse:
    """``detail`` is a sentence saying what was wrong; the message names the provider."""
    return MalformedResponse(f"The {provider} reply could not be read: {detail}", provider=provider)


def event_data(provider: str, data: str) -> dict[str, Any]:
    """One stream event's JSON object."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        msg = f"a stream event's data line is not JSON: {quote(data)!r}."
        raise malformed(provider, msg) from exc
    if not isinstance(parsed, dict):
        msg = f"a stream event is not a JSON object: {quote(data)!r}."
        raise malformed(provider, msg)
    return parsed


def body(provider: str, raw: bytes, content_type: str) -> dict[str, Any]:
    """A whole reply's JSON object. An HTML page sent with 200 (a proxy, a captive portal)
    is a malformed response too, not an outage: the call may go through next time."""
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        kind = f" ({content_type})" if content_type else ""
        msg = f"it answered 200 with a body that is not JSON{kind}: {quote(text)!r}."
        raise malformed(provider, msg) from exc
    if not isinstance(parsed, dict):
        msg = f"it answered 200 with JSON that is not an object: {quote(text)!r}."
        raise malformed(provider, msg)
    return parsed


@contextmanager
def shaped(provider: str, what: str) -> Iterator[None]:
    """Turns a missing key or a wrong type met while reading ``what`` into MalformedResponse,
    so that no KeyError or TypeError from a provider's JSON escapes a client."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        msg = f"{what} has the wrong shape ({type(exc).__name__}: {exc})."
        raise malformed(provider, msg) from exc


def need(provider: str, value: Any, kind: type, what: str) -> Any:
    """``value`` when it is a ``kind``; else MalformedResponse naming ``what``."""
    if not isinstance(value, kind):
        msg = f"{what} is not {_KIND_NAMES.get(kind, kind.__name__)}: {quote(repr(value))}."
        raise malformed(provider, msg)
    return value


_KIND_NAMES: dict[type, str] = {dict: "a JSON object", list: "a JSON list", str: "a string"}


@dataclass(frozen=True)
class Arguments:
    """A tool call's arguments as read: ``problem`` is None, or a sentence saying why they
    could not be read (then ``value`` is empty)."""

    value: dict[str, Any]
    problem: str | None = None


def arguments(tool: str, raw: str, *, cut: bool) -> Arguments:
    """Reads a call's arguments text. ``cut`` says the reply stopped at its token limit, so
    unreadable text is named as cut off rather than as invalid.

    Empty text is no arguments. JSON that is not an object is refused too: every tool takes
    an object, and running one on a wrapped guess would do what the model never asked.
    """
    if not raw.strip():
        return Arguments({})
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        reason = f"{exc.msg} at {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        if cut:
            problem = (
                f"The arguments of {tool} were cut off at max_tokens before they were "
                f"complete: {quote(raw)}"
            )
        else:
            problem = f"The arguments of {tool} were not valid JSON ({reason}): {quote(raw)}"
        return Arguments({}, problem)
    if not isinstance(parsed, dict):
        return Arguments({}, f"The arguments of {tool} were JSON but not an object: {quote(raw)}")
    return Arguments(parsed)


def input_object(tool: str, value: Any, *, cut: bool) -> Arguments:
    """Reads an already decoded ``input`` (an Anthropic JSON reply): an object, or a problem."""
    if value is None:
        return Arguments({})
    if isinstance(value, dict):
        return Arguments(value)
    if isinstance(value, str):
        return arguments(tool, value, cut=cut)
    text = quote(json.dumps(value))
    return Arguments({}, f"The arguments of {tool} were JSON but not an object: {text}")
