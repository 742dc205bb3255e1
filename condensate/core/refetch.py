"""What a cut would make the agent fetch again: the results it takes from the view that the
thread's recent steps still use. Pure: no I/O.

The rule: a result the cut clears (or a summary replaces) must be fetched again when, within
the thread's last ``RECENT_CALLS`` model calls, a call made after it names what it named (the
same file, command, pattern or URL, as ``receipts.argument_of`` names a call: an edit of a file
it read, the same command run again, a read of a file it edited), or an assistant message
after it cites its seq (``seq 42``, ``recall(seq=42)``). Not when the agent still holds that
target after the cut: a later result naming it, of the same tool or a read, stays shown whole.
Of several cleared results of one tool and one target, the latest stands for them all: it is
fetched once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from condensate.core.projector import Entry, Projection
from condensate.core.receipts import argument_of, bare_tool, files_named, named_by
from condensate.events import AssistantMessage, ToolResult

RECENT_CALLS = 12
"""The model calls whose names count as the agent's current work (docs/decisions.md)."""

_CITED = re.compile(r"\bseq\s*[=:#]?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Refetch:
    seq: int
    tool: str
    target: str
    """What its call named: a file, a command, a pattern, a URL."""
    tokens: int
    """What the view shows of it now: about what fetching it again brings back."""
    named_by: int
    """The seq of the latest assistant message that names it again or cites it."""


@dataclass(frozen=True)
class _Step:
    """One of the recent model calls: what its tool calls name and the seqs it cites."""

    seq: int
    targets: frozenset[str]
    cited: frozenset[int]


def _targets(tool: str, argument: str) -> frozenset[str]:
    return frozenset(files_named(tool, argument))


def _logged_argument(entry: Entry | None) -> str:
    """The argument the engine logged with a call's result (a cleared one: its receipt's)."""
    if entry is None:
        return ""
    if isinstance(entry.event, ToolResult):
        return entry.event.argument
    named = None if entry.receipt is None else named_by(entry.receipt)
    return "" if named is None else named[1]


def _recent_steps(view: Projection) -> list[_Step]:
    replies = [e for e in view.entries if isinstance(e.event, AssistantMessage)]
    results = {e.call_id: e for e in view.entries if e.role == "tool"}
    steps = []
    for entry in replies[-RECENT_CALLS:]:
        assert isinstance(entry.event, AssistantMessage)
        targets: set[str] = set()
        cited = {int(found) for found in _CITED.findall(entry.event.text)}
        for call in entry.event.tool_calls:
            argument = argument_of(call.name, call.arguments)
            argument = argument or _logged_argument(results.get(call.id))
            targets |= _targets(call.name, argument)
            seq = call.arguments.get("seq")
            if isinstance(seq, int):
                cited.add(seq)
        steps.append(_Step(entry.seq, frozenset(targets), frozenset(cited)))
    return steps


def fetch_again(view: Projection, cleared: Iterable[int]) -> tuple[Refetch, ...]:
    """The results among ``cleared`` (seqs of results the view shows whole now) that the agent
    would have to fetch again after the cut, oldest first."""
    going = set(cleared)
    steps = _recent_steps(view)
    if not going or not steps:
        return ()
    # What stays shown whole after the cut, by target: (seq, tool, a read).
    held: dict[str, list[tuple[int, str, bool]]] = {}
    for entry in view.entries:
        if entry.seq in going or entry.receipt is not None:
            continue
        if isinstance(entry.event, ToolResult):
            shown = entry.event
            for target in _targets(shown.tool, shown.argument):
                kept = (entry.seq, bare_tool(shown.tool), entry.category == "reread")
                held.setdefault(target, []).append(kept)
    found: dict[int, Refetch] = {}
    newest: dict[tuple[str, str], Refetch] = {}
    """The newest cleared result of each tool and target: it stands for the older ones."""
    for seq in sorted(going, reverse=True):
        position = view.position(seq)
        if position is None:
            continue
        entry = view.entries[position]
        result = entry.event
        if not isinstance(result, ToolResult):
            continue
        tool = bare_tool(result.tool)
        targets = _targets(result.tool, result.argument)
        keys = [(tool, target) for target in targets]
        own = Refetch(seq, result.tool, result.argument, entry.tokens, 0)
        stand = next((newest[k] for k in keys if k in newest), own)
        newest.update(dict.fromkeys(keys, stand))
        naming = [s.seq for s in steps if s.seq > seq and (s.targets & targets or seq in s.cited)]
        if not naming or any(
            later > seq and (other == tool or read)
            for target in targets
            for later, other, read in held.get(target, ())
        ):
            continue
        named = max(naming[-1], found[stand.seq].named_by if stand.seq in found else 0)
        found[stand.seq] = replace(stand, named_by=named)
    return tuple(found[seq] for seq in sorted(found))
