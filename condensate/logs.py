"""Logging: structlog to stderr, JSON when not on a terminal (or when asked), console
otherwise. ``configure_logging`` is called once, by the command line."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, Literal

import structlog

log = structlog.get_logger()

THROTTLE_SECONDS = 60.0
"""A repeating warning anyone can cause (accept failing, connections shed, a refused gateway
pass) is logged once per interval."""


def configure_logging(fmt: Literal["json", "console", "auto"] = "auto") -> None:
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # The pure core logs through the standard library (it loads no logging library of its
    # own): its records reach stderr in the same shape.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=renderer,
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.ExtraAdder(),
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
        )
    )
    core = logging.getLogger("condensate")
    core.handlers = [handler]
    core.setLevel(logging.INFO)
    core.propagate = False


@dataclass
class Throttled:
    """A warning logged at most once per ``interval``, with how many it stood for: what a
    client without a token can cause (a bad request, a refused gateway pass) must not fill the
    log."""

    event: str
    interval: float = THROTTLE_SECONDS
    _last: float = float("-inf")
    _count: int = 0

    def hit(self, **fields: Any) -> None:
        self._count += 1
        now = time.monotonic()
        if now - self._last >= self.interval:
            log.warning(self.event, times=self._count, interval_s=self.interval, **fields)
            self._last = now
            self._count = 0
