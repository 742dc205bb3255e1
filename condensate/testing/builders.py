"""Builders for the values tests repeat as long literals: each takes keyword-only arguments
with defaults, so a test names only what it is about (mitmproxy's ``tflow(*, resp=False)``).

>>> usage(used=90_000)                 # a prompt past the default 71,808-token line
>>> finished_thread("one")             # created, one human turn, answered, ended
"""

from __future__ import annotations

from datetime import datetime

from condensate.core.meter import ContextUsage
from condensate.events import (
    AssistantMessage,
    Engine,
    Event,
    ThreadCreated,
    TurnEnded,
    TurnStarted,
    UserMessage,
    Window,
    WindowKind,
    WindowTrigger,
)
from condensate.testing.threads import EPOCH

RESERVE = 8_192
"""The output reserve between a ceiling and its line, as the meter keeps it by default."""


def usage(
    *,
    used: int = 1_000,
    window: int = 200_000,
    ceiling: int = 80_000,
    line: int | None = None,
    anchored: bool = True,
    resolved: bool = True,
    helpless: bool = False,
    measured: int | None = None,
) -> ContextUsage:
    """A meter reading: ``line`` is the ceiling less the output reserve unless given, the
    hard limit the window less it, and ``fraction`` and ``measured`` follow from ``used``."""
    line = ceiling - RESERVE if line is None else line
    return ContextUsage(
        used=used,
        window=window,
        ceiling=ceiling,
        line=line,
        fraction=used / line if line else 1.0,
        anchored=anchored,
        resolved=resolved,
        hard_limit=window - RESERVE,
        limit=ceiling,
        helpless=helpless,
        measured=used if measured is None else measured,
    )


def window(
    *,
    kind: WindowKind = "summary",
    cut: int = 1,
    summary: str | None = "s",
    at: datetime = EPOCH,
    reason: str = "test",
) -> Window:
    """A window taken, its trigger all ones (a test of what follows a window, not of why)."""
    trigger = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=1, reason=reason)
    return Window(at=at, window_kind=kind, cut=cut, summary=summary, trigger=trigger)


def said(text: str, *, at: datetime = EPOCH) -> UserMessage:
    """A human message."""
    return UserMessage(at=at, text=text)


def finished_thread(
    text: str,
    *,
    at: datetime = EPOCH,
    engine: Engine = "api",
    model: str = "anthropic:claude-sonnet-4-5",
    cwd: str = "/w",
) -> list[Event]:
    """A thread whose one turn has ended: created, ``text`` asked, answered, ended."""
    return [
        ThreadCreated(at=at, engine=engine, model=model, cwd=cwd),
        TurnStarted(at=at, cause="human"),
        said(text, at=at),
        AssistantMessage(at=at, text=f"answered {text}"),
        TurnEnded(at=at, outcome="completed"),
    ]
