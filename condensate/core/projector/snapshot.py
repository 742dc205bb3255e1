"""The snapshot codec: a view as JSON and back, so that a snapshot plus a replay of what
followed equals a full replay (``eventlog.rebuild``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from condensate.core.projector.billing import Bill
from condensate.core.projector.entries import Anchor, Entry, Requested, WindowRecord
from condensate.core.projector.view import Projection
from condensate.events import ApprovalRequested, AskOpened, decode


def dump(view: Projection) -> str:
    """The view as a snapshot's state."""
    return json.dumps(_dump(view), separators=(",", ":"))


def load(text: str) -> Projection:
    """The view a snapshot's state holds."""
    return _load(json.loads(text))


def _dump(p: Projection) -> dict[str, Any]:
    data = {
        name: getattr(p, name)
        for name in Projection.__dataclass_fields__
        if not name.startswith("_")
        and name
        not in (
            "entries",
            "anchor",
            "windows",
            "ask",
            "approvals",
            "requested",
            "billed",
            "layout",
            "memo",
            "tiers_memo",
        )
    }
    data["billed"] = {key: asdict(bill) for key, bill in p.billed.items()}
    data["entries"] = [
        {
            **{k: v for k, v in asdict_entry(e).items() if k != "event"},
            "event": None if e.event is None else e.event.model_dump(mode="json"),
        }
        for e in p.entries
    ]
    data["anchor"] = None if p.anchor is None else asdict(p.anchor)
    data["windows"] = [{**asdict(w), "at": w.at.isoformat()} for w in p.windows]
    data["ask"] = None if p.ask is None else p.ask.model_dump(mode="json")
    data["approvals"] = [a.model_dump(mode="json") for a in p.approvals.values()]
    data["requested"] = None if p.requested is None else asdict(p.requested)
    data["open_calls"] = p._calls
    return data


def asdict_entry(entry: Entry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in Entry.__slots__}


def _load(data: dict[str, Any]) -> Projection:
    entries = [
        Entry(**{**raw, "event": None if raw["event"] is None else decode(raw["event"])})
        for raw in data.pop("entries")
    ]
    anchor = data.pop("anchor")
    windows = data.pop("windows")
    ask = data.pop("ask")
    approvals = [ApprovalRequested.model_validate(a) for a in data.pop("approvals", [])]
    requested = data.pop("requested")
    calls = data.pop("open_calls")
    billed = {key: Bill(**bill) for key, bill in data.pop("billed", {}).items()}
    projection = Projection(
        **data,
        entries=entries,
        anchor=None if anchor is None else Anchor(**anchor),
        windows=[WindowRecord(**{**w, "at": datetime.fromisoformat(w["at"])}) for w in windows],
        ask=None if ask is None else AskOpened.model_validate(ask),
        approvals={a.approval_id: a for a in approvals},
        requested=None if requested is None else Requested(**requested),
        billed=billed,
    )
    projection._index = {e.seq: i for i, e in enumerate(entries)}
    projection._calls = {str(k): int(v) for k, v in calls.items()}
    return projection
