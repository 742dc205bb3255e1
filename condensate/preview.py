"""What a cut would remove right now, for operators deciding how to answer an ask. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condensate import tiers
from condensate.meter import ContextUsage
from condensate.planner import PlannerSettings, Stop, summary_plan
from condensate.projector import Entry, Projection
from condensate.receipts import receipt


@dataclass(frozen=True)
class Preview:
    microcompact_freed: int
    microcompact_receipts: tuple[str, ...]
    collapse_freed: int
    summary_keep_from: int | None
    summary_removed: dict[str, int]
    summary_possible: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "microcompact": {
                "freed": self.microcompact_freed,
                "receipts": list(self.microcompact_receipts),
            },
            "collapse": {"freed": self.collapse_freed},
            "summary": {
                "possible": self.summary_possible,
                "keepFrom": self.summary_keep_from,
                "removedByKind": self.summary_removed,
            },
        }


def _kind(entry: Entry) -> str:
    if entry.role == "tool":
        return f"tool:{entry.category}" if entry.receipt is None else "receipt"
    return entry.role


def preview(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Preview:
    micro = tiers.cheap_clearing(view, "microcompact", settings.tiers, view.protect_from)
    collapse = tiers.cheap_clearing(view, "collapse", settings.tiers, view.protect_from)
    receipts = []
    for seq in micro.cleared:
        position = view.position(seq)
        entry = view.entries[position] if position is not None else None
        if entry is not None and entry.event is not None:
            receipts.append(receipt(entry.event, seq, entry.full_tokens, category=entry.category))  # type: ignore[arg-type]
    chosen = summary_plan(view, usage, settings)
    removed: dict[str, int] = {}
    keep_from = None
    if not isinstance(chosen, Stop):
        keep_from = chosen.keep_from
        end = len(view.entries) if keep_from is None else view.position(keep_from) or 0
        for entry in view.entries[:end]:
            if not view.is_protected(entry):
                removed[_kind(entry)] = removed.get(_kind(entry), 0) + entry.tokens
    return Preview(
        micro.freed,
        tuple(receipts),
        collapse.freed,
        keep_from,
        removed,
        not isinstance(chosen, Stop),
    )
