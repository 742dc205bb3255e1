"""The fake curator: a stand-in that does what the curator prompt asks, deterministically.

It names every file read, edited or written, and copies every human message and every failed
call with its error verbatim (``stand_in_summary``). Its text reaches ``Curator`` through the
fake server, so the curator's own calls are billed too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from condensate.core.probes import touched, verbatim_items, waiting
from condensate.core.projector import Entry, Projection
from condensate.core.summary import replaced_entries
from condensate.core.tiers import VERBATIM_HEADING
from condensate.events import ToolResult, Window

FAKE_CURATOR = "fake"
FAKE_CURATOR_MODEL = "claude-haiku-5-5"
"""The fake curator answers under its own model name, so its replies never meet the thread's
(the fake's queues and prompt cache are per model). Its tokens are weighted like the thread's
model, which overstates Condensate's cost when the real curator is a cheaper model."""
FILES_READ = "Files read: "
FILES_CHANGED = "Files edited or written: "


def _listed(summary: str, prefix: str) -> list[str]:
    for line in summary.splitlines():
        if line.startswith(prefix):
            return [p for p in line[len(prefix) :].split(", ") if p and p != "(none)"]
    return []


def touched_files(entries: Sequence[Entry]) -> tuple[list[str], list[str]]:
    """(files read, files edited or written) named anywhere in ``entries``, in order, the
    lists of earlier stand-in summaries included."""
    read: list[str] = []
    changed: list[str] = []
    for entry in entries:
        if isinstance(entry.event, Window) and entry.event.summary:
            read += _listed(entry.event.summary, FILES_READ)
            changed += _listed(entry.event.summary, FILES_CHANGED)
    now_read, now_changed = touched(entries)
    read = list(dict.fromkeys([*read, *now_read]))
    changed = list(dict.fromkeys([*changed, *now_changed]))
    return read, changed


def stand_in_summary(view: Projection, keep_from: int | None) -> str:
    """What a curator that follows its prompt writes, deterministically: the counts of what
    happened, every file touched, the latest test outcome, what waits on someone (an
    approval, a child), and the verbatim record (every human message, every failed call with
    its error, earlier summaries' records; an unfinished instruction is among them)."""
    entries = replaced_entries(view, keep_from)
    read, changed = touched_files(entries)
    tools: Counter[str] = Counter()
    failed = 0
    last_test = ""
    for entry in entries:
        if isinstance(entry.event, ToolResult):
            tools[entry.event.tool] += 1
            failed += entry.event.is_error
            if "test" in entry.event.argument:
                lines = entry.event.output.strip().splitlines()
                last_test = f"{entry.event.argument}: {lines[-1] if lines else ''}"
    done = ", ".join(f"{n} {tool}" for tool, n in sorted(tools.items())) or "no tool calls"
    parts = [
        f"Work so far: {done} ({failed} failed).",
        FILES_READ + (", ".join(read) or "(none)"),
        FILES_CHANGED + (", ".join(changed) or "(none)"),
    ]
    if last_test:
        parts.append(f"Latest test run: {last_test}")
    if still_open := waiting(view):
        parts.append("Still open: " + "; ".join(f"{p.label}: {p.needle}" for p in still_open))
    items = verbatim_items(entries)
    text = "\n".join(parts)
    if items:
        text += f"\n\n{VERBATIM_HEADING}\n" + "\n\n".join(items)
    return text
