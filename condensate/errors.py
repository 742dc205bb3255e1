"""Condensate's errors. Callers catch the branches, so the tree stays small:

CondensateError
├── ConfigError            a CONDENSATE_* setting is unusable; the message names it
├── EventLogError          the SQLite log refused or failed an operation
│   ├── UnknownEventVersion   a stored event this version cannot read
│   ├── UnknownThread
│   └── EventNotFound
└── PlanningError          the planner was handed a state it cannot plan from

Programming mistakes stay ValueError and TypeError.
"""

from __future__ import annotations


class CondensateError(Exception):
    """The root of every error Condensate raises on purpose."""

    code = "condensate-error"


class ConfigError(CondensateError):
    code = "config-error"


class EventLogError(CondensateError):
    code = "event-log-error"


class UnknownEventVersion(EventLogError):
    code = "unknown-event-version"


class UnknownThread(EventLogError):
    code = "unknown-thread"


class EventNotFound(EventLogError):
    code = "event-not-found"


class PlanningError(CondensateError):
    code = "planning-error"
