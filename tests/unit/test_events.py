"""The golden event file: every (kind, v) ever written still decodes, and events stay frozen."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from condensate import events as ev
from condensate.errors import UnknownEventVersion

GOLDEN = Path(__file__).parent.parent / "data" / "events.jsonl"


def _golden() -> list[dict[str, Any]]:
    with GOLDEN.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _current() -> list[dict[str, Any]]:
    return [raw for raw in _golden() if raw["v"] == ev.current_version(raw["kind"])]


def _ids(lines: list[dict[str, Any]]) -> list[str]:
    return [f"{raw['kind']}-v{raw['v']}" for raw in lines]


@pytest.mark.parametrize("raw", _golden(), ids=_ids(_golden()))
def test_every_golden_line_decodes(raw: dict[str, Any]) -> None:
    """Every stored shape in the golden file decodes to the current model of its kind."""
    event = ev.decode(dict(raw))
    assert event.kind == raw["kind"]
    assert event.v == ev.current_version(raw["kind"])
    assert isinstance(event, ev.EVENT_TYPES[raw["kind"]])


def test_golden_file_covers_every_kind_at_its_current_version() -> None:
    """Adding a kind or bumping a version without a golden line fails here."""
    present = {(raw["kind"], raw["v"]) for raw in _golden()}
    wanted = {(kind, ev.current_version(kind)) for kind in ev.EVENT_TYPES}
    assert wanted - present == set()


def test_golden_file_holds_each_kind_and_version_once() -> None:
    """The golden file has exactly one line per (kind, v), so it reads as a catalogue."""
    counts = Counter((raw["kind"], raw["v"]) for raw in _golden())
    assert [key for key, n in counts.items() if n > 1] == []


def test_golden_file_keeps_every_old_version_it_can_upcast() -> None:
    """Each (kind, v) an upcaster starts from has a golden line, so old rows stay tested."""
    present = {(raw["kind"], raw["v"]) for raw in _golden()}
    assert set(ev.UPCASTERS) - present == set()


@pytest.mark.parametrize("raw", _current(), ids=_ids(_current()))
def test_current_line_round_trips_through_encode(raw: dict[str, Any]) -> None:
    """Re-encoding a current-version event and decoding it again gives an equal event."""
    event = ev.decode(dict(raw))
    again = ev.decode(json.loads(ev.encode(event)))
    assert again == event
    assert json.loads(ev.encode(again)) == json.loads(ev.encode(event))


def test_usage_v1_line_upcasts_to_v2_split() -> None:
    """The v1 usage line (input included the cached part) reads as v2 with input minus cache."""
    (raw,) = [r for r in _golden() if (r["kind"], r["v"]) == ("model.usage", 1)]
    event = ev.decode(dict(raw))
    assert isinstance(event, ev.ModelUsage)
    assert (event.v, event.input, event.cache_read, event.cache_write, event.output) == (
        2,
        raw["input_tokens"] - raw["cached_tokens"],
        raw["cached_tokens"],
        0,
        raw["output_tokens"],
    )


@pytest.mark.parametrize("raw", _current(), ids=_ids(_current()))
def test_every_field_of_every_event_is_frozen(raw: dict[str, Any]) -> None:
    """Assigning to any field of a decoded event raises instead of changing it."""
    event = ev.decode(dict(raw))
    for name in type(event).model_fields:
        before = getattr(event, name)
        with pytest.raises(ValidationError, match="frozen"):
            setattr(event, name, before)
        assert getattr(event, name) == before


@pytest.mark.parametrize("raw", _golden(), ids=_ids(_golden()))
def test_extra_fields_are_refused(raw: dict[str, Any]) -> None:
    """A stored event with a field its version does not define fails to decode."""
    with pytest.raises(ValidationError, match="surprise"):
        ev.decode({**raw, "surprise": 1})


def test_unknown_kind_is_refused() -> None:
    """A kind this version does not know raises UnknownEventVersion, not a validation error."""
    with pytest.raises(UnknownEventVersion, match=r"future\.kind"):
        ev.decode({"kind": "future.kind", "v": 1, "at": "2025-01-01T00:00:00Z"})


def test_newer_version_is_refused() -> None:
    """A version above the current one raises UnknownEventVersion naming both versions."""
    with pytest.raises(UnknownEventVersion, match="v9"):
        ev.decode({"kind": "turn.started", "v": 9, "at": "2025-01-01T00:00:00Z"})
