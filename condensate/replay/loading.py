"""Loading a recording from a log (``load`` tells the formats apart): Condensate's own (the
SQLite file, an archive file, or events as JSON lines, as ``condensate export`` writes them),
or a transcript format an engine's package registers (``transcripts``: a Claude Code
transcript, a Codex rollout). A thread archived out of a SQLite log is read from its archive.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from condensate.errors import CondensateError, EventLogError
from condensate.eventlog.archive import ARCHIVE_DIR, open_archive
from condensate.eventlog.sqlite_sync import EventLog
from condensate.events import (
    EVENT_TYPES,
    decode,
)
from condensate.replay.recording import (
    Recording,
    from_events,
)
from condensate.replay.transcripts import formats

_SQLITE_MAGIC = b"SQLite format 3\x00"


def load(path: Path, thread: str | None = None) -> Recording:
    """A recording from a log file, whichever of the three formats it is."""
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        return _load_sqlite(path, thread)
    lines = _json_lines(path)
    first = lines[0] if lines else None
    if first is None:
        msg = f"{path} holds no JSON lines to replay."
        raise CondensateError(msg)
    if first.get("kind") in EVENT_TYPES:
        return from_events(path.name, "condensate", (decode(_strip(line)) for line in lines))
    for known in formats():
        if known.recognizes(first):
            return known.read(path.name, lines)
    kinds = ", ".join(["a Condensate log", *(known.title for known in formats())])
    msg = f"{path} is not one of: {kinds} (its first line has keys {sorted(first)[:8]})."
    raise CondensateError(msg)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    # Lines end at "\n" only: a JSON string may hold U+2028, U+0085 and the like unescaped,
    # which str.splitlines would take for line ends.
    text = path.read_text(encoding="utf-8")
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            msg = f"{path}, line {number}, is not JSON: {exc}."
            raise CondensateError(msg) from exc
        if isinstance(value, dict):
            out.append(value)
    return out


def _strip(line: dict[str, Any]) -> dict[str, Any]:
    """An event as the tail API (or an export) prints it carries ``seq`` and ``tokens``;
    drop them, but the ``tokens`` of a kind that has one of its own (the baseline's size, a
    refusal's count: the line carries that one)."""
    kind = EVENT_TYPES.get(str(line.get("kind")))
    own = kind is not None and "tokens" in kind.model_fields
    dropped = ("seq", "thread_id") if own else ("seq", "tokens", "thread_id")
    return {k: v for k, v in line.items() if k not in dropped}


def _load_sqlite(path: Path, thread: str | None) -> Recording:
    """A thread of a Condensate log (the one with the most events unless named), opened read
    only: replaying a log never changes it."""
    try:
        with EventLog.open_read_only(path) as log:
            if thread is None:
                sizes = {t: log.last_seq(t) for t in log.thread_ids()}
                if not sizes:
                    msg = f"{path} holds no threads."
                    raise CondensateError(msg)
                thread = max(sizes, key=lambda t: sizes[t])
            events = [stored.event for stored in log.replay(thread)]
            record = log.archived(thread) if not events else None
        if record is not None:
            with open_archive(record, path.parent / ARCHIVE_DIR) as archived:
                events = [stored.event for stored in archived.replay(thread)]
    except EventLogError as exc:
        raise CondensateError(str(exc)) from exc
    if not events:
        msg = f"{path} has no thread {thread!r}."
        raise CondensateError(msg)
    return from_events(f"{path.name}:{thread}", "condensate", events)
