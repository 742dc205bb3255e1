"""Replay a recorded thread through windowing policies, offline, and measure what it costs.

``loading`` reads a log into a ``Recording``; ``runner`` replays it under each of ``policies``
against an in-process fake model server, ``stand_in`` being the fake curator; ``report`` sets
the bills (``billing``) side by side. This package re-exports the public names of each.
"""

from __future__ import annotations

from condensate.core.receipts import ARGUMENT_CHARS, argument_of
from condensate.replay.billing import WEIGHTS, Bill, Prices, default_prices
from condensate.replay.config import (
    DEFAULT_WINDOW,
    POLICIES,
    SINGLE_SUMMARY_SHARE,
    ReplayConfig,
)
from condensate.replay.loading import load
from condensate.replay.policies import (
    CondensatePolicy,
    Policy,
    SingleSummaryPolicy,
    UnmanagedPolicy,
    make_policy,
)
from condensate.replay.recording import (
    DEFAULT_BASELINE,
    Recording,
    from_events,
    write_events,
)
from condensate.replay.report import PolicyResult, Report, text_report
from condensate.replay.runner import (
    FORGET_REQUESTS_EVERY,
    MAX_ATTEMPTS,
    SUMMARY_REQUEST,
    Progress,
    Run,
    recording_window,
    replay,
    run_policy,
)
from condensate.replay.stand_in import (
    FAKE_CURATOR,
    FAKE_CURATOR_MODEL,
    FILES_CHANGED,
    FILES_READ,
    stand_in_summary,
    touched_files,
)
from condensate.replay.transcripts import TranscriptFormat, formats

__all__ = [
    "ARGUMENT_CHARS",
    "DEFAULT_BASELINE",
    "DEFAULT_WINDOW",
    "FAKE_CURATOR",
    "FAKE_CURATOR_MODEL",
    "FILES_CHANGED",
    "FILES_READ",
    "FORGET_REQUESTS_EVERY",
    "MAX_ATTEMPTS",
    "POLICIES",
    "SINGLE_SUMMARY_SHARE",
    "SUMMARY_REQUEST",
    "WEIGHTS",
    "Bill",
    "CondensatePolicy",
    "Policy",
    "PolicyResult",
    "Prices",
    "Progress",
    "Recording",
    "ReplayConfig",
    "Report",
    "Run",
    "SingleSummaryPolicy",
    "TranscriptFormat",
    "UnmanagedPolicy",
    "argument_of",
    "default_prices",
    "formats",
    "from_events",
    "load",
    "make_policy",
    "recording_window",
    "replay",
    "run_policy",
    "stand_in_summary",
    "text_report",
    "touched_files",
    "write_events",
]
