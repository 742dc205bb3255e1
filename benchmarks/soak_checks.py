"""What the crash soak checks after each SIGKILL, and how it finds the daemon's children.

The checks over a thread's log are pure (events as the API's ``tail`` gives them, dicts with
``seq`` and ``kind``); the replay check reads the SQLite file read only; the process helpers
read ``/proc`` (Linux) and nothing else.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from condensate.core.ceilings import CeilingSettings
from condensate.core.meter import ModelWindow, measure
from condensate.core.projector import project
from condensate.eventlog.rebuild import rebuild
from condensate.eventlog.sqlite_sync import EventLog

Event = dict[str, Any]

FIRST_FAILURES = 5
"""Failures kept with their detail per check; the rest are only counted."""

CONVERSATION = ("message.user", "message.assistant", "tool.result")
"""Kinds that move a thread on: a second window for the same cut with none of these between
the two is the same window taken twice."""


CUT_OFF = "Interrupted: the daemon stopped before this call"
"""How recovery closes a tool call a kill cut off."""


@dataclass
class Checks:
    """Pass and fail counts per check, and the first failures of each with their detail."""

    passed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    failed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def record(self, name: str, problems: list[str], context: str) -> None:
        """One evaluation of ``name``: it passes when ``problems`` is empty."""
        if not problems:
            self.passed[name] += 1
            return
        self.failed[name] += 1
        kept = self.failures[name]
        if len(kept) < FIRST_FAILURES:
            kept.append(f"{context}: " + "; ".join(problems[:3]))

    def ok(self) -> bool:
        return not any(self.failed.values())

    def to_json(self, names: list[str]) -> dict[str, Any]:
        return {
            name: {
                "passed": self.passed.get(name, 0),
                "failed": self.failed.get(name, 0),
                "first_failures": list(self.failures.get(name, [])),
            }
            for name in names
        }


def kept_problems(acknowledged: dict[int, Event], events: list[Event]) -> list[str]:
    """Every event read before a kill is still there, unchanged, at its seq."""
    now = {e["seq"]: e for e in events}
    problems: list[str] = []
    for seq, event in sorted(acknowledged.items()):
        later = now.get(seq)
        if later is None:
            problems.append(f"seq {seq} ({event['kind']}) is gone")
        elif later != event:
            changed = sorted(k for k in {*event, *later} if event.get(k) != later.get(k))
            problems.append(f"seq {seq} ({event['kind']}) changed in {changed}")
    return problems


def seq_problems(events: list[Event]) -> list[str]:
    """Seqs run 1, 2, 3, ... with no gap and no duplicate."""
    seqs = [e["seq"] for e in events]
    problems: list[str] = []
    if len(set(seqs)) != len(seqs):
        problems.append(f"duplicate seqs {sorted({s for s in seqs if seqs.count(s) > 1})[:10]}")
    missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
    if missing:
        problems.append(f"seqs missing {missing[:10]}")
    if seqs != sorted(seqs):
        problems.append("seqs out of order")
    return problems


def window_problems(events: list[Event]) -> list[str]:
    """No cut is windowed twice: no two windows planned on the same last seq (``cut``), and no
    two windows with the same kind and ``keep_from`` without conversation between them."""
    problems: list[str] = []
    by_cut: dict[int, int] = {}
    previous: Event | None = None
    moved = False
    for event in events:
        if event["kind"] in CONVERSATION:
            moved = True
            continue
        if event["kind"] != "window":
            continue
        first = by_cut.setdefault(event["cut"], event["seq"])
        if first != event["seq"]:
            problems.append(f"windows at seq {first} and {event['seq']} share cut {event['cut']}")
        if (
            previous is not None
            and not moved
            and event["keep_from"] is not None
            and (previous["window_kind"], previous["keep_from"])
            == (event["window_kind"], event["keep_from"])
        ):
            problems.append(
                f"windows at seq {previous['seq']} and {event['seq']} both "
                f"{event['window_kind']} keep_from {event['keep_from']} with nothing between"
            )
        previous, moved = event, False
    return problems


def answered(events: list[Event], seq: int) -> bool:
    """A final reply (an assistant message that calls no tool) comes after ``seq``."""
    return any(
        e["kind"] == "message.assistant" and e["seq"] > seq and not e.get("tool_calls")
        for e in events
    )


def replay_problems(database: Path) -> tuple[dict[str, list[str]], int]:
    """Per thread of the log file (opened read only): the view rebuilt from the latest
    snapshot and the events after it, as a restart builds it, differs from a full replay
    from seq 0 without any snapshot. Also how many threads had a snapshot to rebuild from."""
    problems: dict[str, list[str]] = {}
    with_snapshot = 0
    log = EventLog.open_read_only(database)
    try:
        for thread in log.thread_ids():
            events = list(log.replay(thread))
            full = project(events)
            if log.latest_snapshot(thread) is not None:
                with_snapshot += 1
            rebuilt = rebuild(log, thread)
            if rebuilt.last_seq != full.last_seq:
                # The log grew between the two reads: compare up to what both saw.
                full = project([e for e in events if e.seq <= rebuilt.last_seq])
            mine, theirs = rebuilt.to_json(), full.to_json()
            problems[thread] = [] if mine == theirs else [_first_difference(mine, theirs)]
    finally:
        log.close()
    return problems, with_snapshot


def evidence(database: Path) -> dict[str, Any]:
    """What the kills left in the log, to show the moments were reached: windows by kind,
    turns resumed after a restart, tool calls a kill cut off (closed with an error result),
    snapshots written, events per engine."""
    windows: dict[str, int] = defaultdict(int)
    events: dict[str, int] = defaultdict(int)
    resumed = cut_off = snapshots = 0
    log = EventLog.open_read_only(database)
    try:
        for thread in log.thread_ids():
            stored = list(log.replay(thread))
            engine = getattr(stored[0].event, "engine", "?")
            events[engine] += len(stored)
            for item in stored:
                event = item.event
                if event.kind == "window":
                    windows[event.window_kind] += 1
                elif event.kind == "turn.started" and event.cause == "resume":
                    resumed += 1
                elif event.kind == "tool.result" and event.output.startswith(CUT_OFF):
                    cut_off += 1
                elif event.kind == "snapshot.taken":
                    snapshots += 1
    finally:
        log.close()
    return {
        "windows": dict(windows),
        "turns_resumed": resumed,
        "tool_calls_cut_off": cut_off,
        "snapshots": snapshots,
        "events": dict(events),
    }


def live_problems(
    database: Path, live: dict[str, Any], window: int, settings: CeilingSettings
) -> list[str]:
    """What the running daemon reports for a thread (``GET /threads/:id``: its last seq and
    usage) is what a full replay of the log up to that seq measures."""
    log = EventLog.open_read_only(database)
    try:
        events = [e for e in log.replay(live["id"]) if e.seq <= live["events"]]
    finally:
        log.close()
    if not events or events[-1].seq != live["events"]:
        have = events[-1].seq if events else 0
        return [f"the daemon reports {live['events']} events, the file holds {have}"]
    usage = measure(project(events), ModelWindow(window, resolved=True), settings)
    replayed = {
        "used": usage.used,
        "window": usage.window,
        "ceiling": usage.ceiling,
        "line": usage.line,
        "anchored": usage.anchored,
    }
    shown = {k: live["usage"][k] for k in replayed}
    return [] if shown == replayed else [f"daemon {shown} != replay {replayed}"]


def _first_difference(a: str, b: str) -> str:
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return (
        f"snapshot+replay differs from a full replay at char {at}: "
        f"{a[at : at + 80]!r} vs {b[at : at + 80]!r}"
    )


# -- processes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int
    """Clock ticks after boot at which it started: tells a pid's reuse apart."""
    command: str


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of ``pid``, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()
    return int(rest[1]), rest[0], int(rest[19])


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def is_cli(command: str) -> bool:
    """A ``claude`` or ``codex`` CLI (the node script or the native binary)."""
    words = command.split()[:2]
    return any(
        "claude" in Path(w).name or "codex" in Path(w).name or "claude-code" in w for w in words
    )


def cli_descendants(root: int) -> list[Proc]:
    """The CLIs among ``root``'s descendants, and everything they started."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            parents[pid], starts[pid] = stat[0], stat[2]
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    found: list[Proc] = []

    def walk(pid: int, inside: bool) -> None:
        for child in children.get(pid, []):
            command = _command(child)
            here = inside or is_cli(command)
            if here:
                found.append(Proc(child, starts[child], command))
            walk(child, here)

    walk(root, False)
    return found


def environment_matches(marks: list[str]) -> list[Proc]:
    """Processes of this user whose environment names any of ``marks`` (the CLIs' state
    directories under the daemon's home): they catch a CLI started just before the kill."""
    found: list[Proc] = []
    for pid in _pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(mark in environ for mark in marks):
            stat = _stat(pid)
            if stat is not None:
                found.append(Proc(pid, stat[2], _command(pid)))
    return found


def alive(proc: Proc) -> bool:
    """Still running: the same process (same start time), not a zombie."""
    stat = _stat(proc.pid)
    return stat is not None and stat[2] == proc.start and stat[1] not in ("Z", "X")
