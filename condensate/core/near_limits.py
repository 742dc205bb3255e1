"""Notices near the line, for a thread that asks for them (``nearLimitWarnings``): the model
is told how close its context is to the line that would cut it, so that it can wrap up and save
what matters first. Pure.

Where the notice goes is the engine's: the native loop puts it after the last message of one
request, past the prompt cache's last breakpoint, so nothing of it stays; the gateway adds each
level's notice once to a CLI session's conversation and keeps it there (a notice that came and
went would change what the model's later signed thinking is bound to).
"""

from __future__ import annotations

from condensate.core.meter import ContextUsage

URGENT_SHARE = 0.70
"""Of the line: from here the notice is URGENT..."""
CRITICAL_SHARE = 0.90
"""... and from here CRITICAL (the next results may well start a window)."""

URGENT = (
    "[Condensate] URGENT: your context is at {percent}% of its line ({used:,} of {line:,} "
    "tokens). Before long older tool results are cleared and older turns summarized: keep "
    "what you will need in files, and finish what you can."
)
CRITICAL = (
    "[Condensate] CRITICAL: your context is at {percent}% of its line ({used:,} of {line:,} "
    "tokens). A window is imminent: save what you will need in files now, and conclude "
    "the current step."
)


def level(usage: ContextUsage) -> str | None:
    """``"urgent"`` or ``"critical"``, or None below ``URGENT_SHARE``."""
    if usage.line <= 0:
        return None
    share = usage.used / usage.line
    if share < URGENT_SHARE:
        return None
    return "critical" if share >= CRITICAL_SHARE else "urgent"


def notice(usage: ContextUsage) -> str | None:
    """The notice the next request carries, or None below ``URGENT_SHARE``."""
    named = level(usage)
    if named is None:
        return None
    text = CRITICAL if named == "critical" else URGENT
    return text.format(percent=int(usage.used / usage.line * 100), used=usage.used, line=usage.line)
