"""Request-scoped notices near the line, for a thread that asks for them
(``nearLimitWarnings``): the system prompt of one request says how close the context is to
the window that would cut it, so that the model can wrap up and save what matters first.
Never written into the history, so nothing of it stays. Pure.
"""

from __future__ import annotations

from condensate.meter import ContextUsage

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


def notice(usage: ContextUsage) -> str | None:
    """The notice the next request's system prompt carries, or None below ``URGENT_SHARE``."""
    if usage.line <= 0:
        return None
    share = usage.used / usage.line
    if share < URGENT_SHARE:
        return None
    text = CRITICAL if share >= CRITICAL_SHARE else URGENT
    return text.format(percent=int(share * 100), used=usage.used, line=usage.line)
