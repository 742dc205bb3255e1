"""The API's shapes (``condensate.api``): every kind of event has its logged shape in a tail,
each operation of the document a unique operationId, and every answer's schema is closed and
requires every field it sends."""

from __future__ import annotations

from typing import Any

from condensate import api
from condensate.api.document import STREAM_SCHEMAS
from condensate.events import EVENT_TYPES, BaselineMeasured, UserMessage, now_utc
from condensate.events import Stored as StoredEvent


def test_every_kind_of_event_has_its_logged_shape() -> None:
    """A tail can send every kind the log holds: each shape is the event's fields, seq and
    tokens first."""
    assert set(api.LOGGED) == set(EVENT_TYPES)
    for kind, shape in api.LOGGED.items():
        assert EVENT_TYPES[kind] in shape.__mro__
        own = [name for name in EVENT_TYPES[kind].model_fields if name != "tokens"]
        assert list(shape.model_fields) == ["seq", "tokens", *own]


def test_a_logged_event_is_sent_as_the_log_stores_it_with_seq_and_tokens() -> None:
    """The tail's JSON of an event is the event's own JSON after its seq and its tokens."""
    event = UserMessage(at=now_utc(), text="hello", pinned=True)
    page = api.TailPage(
        events=[api.logged(StoredEvent("t-1", 7, event, 3))], next_after=7, has_more=False
    )
    (sent,) = page.dump()["events"]
    assert sent == {"seq": 7, "tokens": 3, **event.model_dump(mode="json")}
    assert list(sent)[:2] == ["seq", "tokens"]
    assert page.dump()["nextAfter"] == 7


def test_an_events_own_tokens_field_is_the_one_sent() -> None:
    """``baseline.measured`` carries a ``tokens`` of its own (the baseline): the tail sends
    that one, as it always has, and its shape says so."""
    event = BaselineMeasured(at=now_utc(), tokens=4321)
    (sent,) = api.TailPage(
        events=[api.logged(StoredEvent("t-1", 2, event, 0))], next_after=2, has_more=False
    ).dump()["events"]
    assert (sent["seq"], sent["tokens"]) == (2, 4321)


def test_every_operation_has_its_own_id() -> None:
    """operationIds are unique: a generated client's method names."""
    ids = [operation.id for operation in api.OPERATIONS]
    assert len(ids) == len(set(ids))


def closed(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties") is False and set(schema["required"]) == set(
        schema["properties"]
    )


def test_every_answer_is_closed_and_requires_what_it_sends() -> None:
    """Each answer's schema (and each event's) forbids other keys and requires every key."""
    document = api.openapi_document(["api"])
    schemas = document["components"]["schemas"]
    bodies = {"CreateThread", "SendMessage", "CompactAnswer", "ResetBody", "ApprovalAnswer"}
    bodies |= {"PinMessage", "Interrupt", "OpenAPIDocument", "Attach", "Detach"}
    for name, schema in schemas.items():
        if name in STREAM_SCHEMAS:
            # An event's envelope: closed, its id present only on a logged event.
            assert schema.get("additionalProperties") is False or "oneOf" in schema, name
            continue
        if name in bodies or "properties" not in schema:
            continue
        assert closed(schema), name
    error = schemas["Error"]
    assert set(error["required"]) == {"error", "detail"}
    for item in document["paths"].values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    (content,) = response["content"].values()
                    assert content["schema"] == {"$ref": "#/components/schemas/Error"}


def test_every_query_and_header_integer_says_its_64_bit_bounds() -> None:
    """A query or header integer's schema names the 64-bit bounds the daemon keeps (a value
    past them is refused 400), so a client and a fuzzer know them."""
    document = api.openapi_document(["api"])
    parameters = [
        parameter
        for item in document["paths"].values()
        for operation in item.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] in ("query", "header")
    ]
    assert parameters
    for parameter in parameters:
        assert parameter["schema"] == {
            "type": "integer",
            "minimum": -(2**63),
            "maximum": 2**63 - 1,
        }, parameter["name"]
