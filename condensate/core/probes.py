"""Probes: what a curator summary must hold, drawn from the log, checked before its window is
committed. Pure: no I/O.

For the range a summary replaces, the probes are every human message since the last summary
(verbatim), every failed call's error text (verbatim, within the bound the curator is asked
to keep), every file touched (named; the files an earlier summary's probes named included, so
that none is lost from one summary to the next), and every item still open (stated): a human
instruction no completed turn has followed, a tool call waiting for an operator's approval, a
child not yet joined. The curator retries once naming what a summary missed, then repairs
what is still missing word for word; the window records the report (``ProbeReport``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from condensate.core.projector import Entry, Projection
from condensate.core.receipts import files_named, named_by
from condensate.core.retention import call_files, file_tool, files_of
from condensate.core.tiers import VERBATIM_HEADING, failure_share, verbatim_error
from condensate.events import AssistantMessage, ProbeReport, ToolResult, UserMessage, Window

ProbeKind = Literal["human", "error", "file", "open"]
KINDS: tuple[ProbeKind, ...] = ("human", "error", "file", "open")
FILES_HEADING = "Files touched: "
OPEN_HEADING = "## Still open"


@dataclass(frozen=True)
class Probe:
    kind: ProbeKind
    label: str
    """How the report names it: ``seq 12 human message``, ``file src/app.py``."""
    needle: str
    """What the summary must hold (compared with runs of white space made one space)."""


@dataclass(frozen=True)
class Item:
    """One part of a summary's verbatim record."""

    text: str
    """As the record shows it: ``Human: "..."``, or ``Failed tool(arg):`` and the error."""
    seq: int | None
    """The entry it comes from; None for a part of an earlier summary's record."""


def record(entries: Sequence[Entry]) -> list[Item]:
    """What must reach a summary word for word: human messages, failed calls with their
    errors, and the verbatim records of earlier summaries, within ``within_bound``."""
    items: list[Item] = []
    for entry in entries:
        match entry.event:
            case UserMessage(author="human", text=text):
                items.append(Item(f'Human: "{text}"', entry.seq))
            case ToolResult(is_error=True) as failed:
                # Cut once, in within_bound, when their number is known.
                text = f"Failed {failed.tool}({failed.argument}):\n{failed.output}"
                items.append(Item(text, entry.seq))
            case Window(window_kind="summary", summary=summary) if summary:
                _, _, kept = summary.partition(VERBATIM_HEADING + "\n")
                items += [Item(part, None) for part in kept.split("\n\n") if part.strip()]
            case _:
                pass
    return within_bound(items)


def verbatim_items(entries: Sequence[Entry]) -> list[str]:
    """The verbatim record's parts, as text."""
    return [item.text for item in record(entries)]


def within_bound(items: list[Item]) -> list[Item]:
    """Every human message whole; every failed call with its error, whole or its head and
    tail within ``failure_share`` of their number, with the seq that holds it whole (an
    earlier summary's part keeps the seq its note named)."""
    share = failure_share(sum(1 for item in items if item.text.startswith("Failed ")))
    kept: list[Item] = []
    for item in items:
        if not item.text.startswith("Failed "):
            kept.append(item)
            continue
        call, _, error = item.text.partition(":\n")
        seq = item.seq if item.seq is not None else _noted_seq(error)
        kept.append(Item(f"{call}:\n{verbatim_error(error, seq, share)}", item.seq))
    return kept


_NOTED_SEQ = re.compile(r"the log keeps them at seq (\d+)\]")


def _noted_seq(error: str) -> int | None:
    """The seq an earlier cut's note named, for an error cut again."""
    found = _NOTED_SEQ.search(error)
    return int(found[1]) if found else None


def with_verbatim_record(text: str, items: list[str]) -> str:
    """``text`` plus, word for word, every item the model did not already copy."""
    missing = [item for item in items if item not in text and body(item) not in text]
    if not missing:
        return text
    return f"{text.rstrip()}\n\n{VERBATIM_HEADING}\n" + "\n\n".join(missing)


def body(item: str) -> str:
    """The part of an item a model would quote: the message or the error text."""
    if item.startswith('Human: "') and item.endswith('"'):
        return item[len('Human: "') : -1]
    return item.partition(":\n")[2] or item


def touched(entries: Iterable[Entry]) -> tuple[list[str], list[str]]:
    """(files read, files edited or written) that ``entries`` name, in order: their results,
    the receipts standing for cleared ones, and the calls."""
    read: dict[str, None] = {}
    changed: dict[str, None] = {}

    def note(tool: str, paths: Iterable[str]) -> None:
        kind = file_tool(tool)
        target = read if kind == "read" else changed if kind is not None else None
        if target is not None:
            target.update(dict.fromkeys(paths))

    for entry in entries:
        event = entry.event
        if entry.receipt is not None:
            named = named_by(entry.receipt)
            if named is not None:
                note(named[0], files_named(*named))
        elif isinstance(event, ToolResult):
            note(event.tool, files_of(event))
        elif isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                note(call.name, call_files(call))
    return list(read), list(changed)


def _files(entries: Sequence[Entry]) -> list[str]:
    """Every file ``entries`` name, in order: an earlier summary's (as its probes had them)
    where it stands."""
    named: dict[str, None] = {}
    for entry in entries:
        if isinstance(entry.event, Window):
            named.update(dict.fromkeys(entry.event.probes.files if entry.event.probes else ()))
        else:
            read, changed = touched([entry])
            named.update(dict.fromkeys([*read, *changed]))
    return list(named)


def _unfinished(view: Projection, entry: Entry) -> bool:
    """A human instruction no completed turn has followed."""
    return (
        isinstance(entry.event, UserMessage)
        and entry.event.author == "human"
        and entry.seq > view.completed_turn_seq
    )


def probes_for(view: Projection, entries: Sequence[Entry]) -> list[Probe]:
    """The probes of a summary of ``view`` that replaces ``entries``."""
    by_seq = {e.seq: e for e in entries}
    probes: list[Probe] = []
    for item in record(entries):
        entry = by_seq.get(item.seq) if item.seq is not None else None
        if entry is None:
            continue  # an earlier summary's record: carried, probed when it was new
        event = entry.event
        if isinstance(event, ToolResult):
            label = f"seq {entry.seq} failed {event.tool}({event.argument})"
            probes.append(Probe("error", label, body(item.text)))
        else:
            probes.append(Probe("human", f"seq {entry.seq} human message", body(item.text)))
    probes += [Probe("file", f"file {path}", path) for path in _files(entries)]
    for entry in entries:
        if _unfinished(view, entry):
            assert isinstance(entry.event, UserMessage)
            label = f"seq {entry.seq} unfinished instruction"
            probes.append(Probe("open", label, entry.event.text))
    return probes + waiting(view)


def waiting(view: Projection) -> list[Probe]:
    """What waits on someone else: a tool call on an operator's approval, a child on its
    join."""
    probes = [
        Probe("open", f"approval {a.approval_id} ({a.tool})", a.argument or a.tool)
        for a in view.approvals.values()
    ]
    return probes + [Probe("open", f"child {c} not yet joined", c) for c in view.unjoined]


def _flat(text: str) -> str:
    return " ".join(text.split())


def missed(text: str, probes: Sequence[Probe]) -> list[Probe]:
    """The probes ``text`` fails."""
    flat = _flat(text)
    return [p for p in probes if _flat(p.needle) not in flat]


def retry_request(missing: Sequence[Probe]) -> str:
    """What the curator's retry is told: the summary again, in full, with what it missed."""
    lines = [f"- {p.label}: {_quoted(p)}" for p in missing]
    return (
        "Your summary missed the following. Write the whole summary again, keeping what it "
        "already says and adding each of these (human messages and error texts word for word, "
        "files by their path, open items stated as still open):\n" + "\n".join(lines)
    )


def _quoted(probe: Probe) -> str:
    if probe.kind in ("human", "error"):
        return f'"{probe.needle}"'
    return probe.needle


def repaired(text: str, missing: Sequence[Probe]) -> str:
    """``text`` with the files and open items of ``missing`` appended (human messages and
    error texts come back with the verbatim record, ``with_verbatim_record``)."""
    files = [p.needle for p in missing if p.kind == "file"]
    still_open = [p for p in missing if p.kind == "open"]
    parts = [text.rstrip()]
    if files:
        parts.append(FILES_HEADING + ", ".join(files))
    if still_open:
        parts.append(
            OPEN_HEADING + "\n" + "\n".join(f"- {p.label}: {p.needle}" for p in still_open)
        )
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Answers:
    """What the curator's answers missed: the first, and the retry's (when there was one)."""

    first: tuple[Probe, ...]
    retried: bool = False
    second: tuple[Probe, ...] = ()


def report(
    probes: Sequence[Probe], answers: Answers, to_repair: Sequence[Probe], final: str
) -> ProbeReport:
    """What the probes found: each kind's count, what the first answer missed, what the
    retry still missed, what the repair appended, and what ``final`` still fails."""
    return ProbeReport(
        checked={kind: sum(p.kind == kind for p in probes) for kind in KINDS},
        missed=tuple(p.label for p in answers.first),
        retried=answers.retried,
        missed_after_retry=tuple(p.label for p in answers.second),
        repaired=tuple(p.label for p in to_repair),
        failing=tuple(p.label for p in missed(final, probes)),
        files=tuple(p.needle for p in probes if p.kind == "file"),
    )


def summary_line(probes: ProbeReport) -> str:
    """The report on one line, as ``condensate tail`` shows it."""
    counts = ", ".join(f"{n} {kind}" for kind, n in probes.checked.items() if n)
    text = f"probes: {counts or 'none'}"
    if not probes.missed:
        return f"{text}; all passed"
    text += f"; first answer missed {len(probes.missed)}: {', '.join(probes.missed)}"
    if probes.retried:
        left = len(probes.missed_after_retry)
        text += f"; retried, {left} still missed" if left else "; retried, all passed"
    if probes.repaired:
        text += f"; repaired: {', '.join(probes.repaired)}"
    if probes.failing:
        text += f"; STILL FAILING: {', '.join(probes.failing)}"
    return text
