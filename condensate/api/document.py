"""The OpenAPI 3.1 document of the API, built from the same models the server answers with
and the requests are validated by. Pure.

Each route is one ``Operation`` of ``OPERATIONS``: its method and path, a stable
``operationId``, its body and its answers by status (a model, or a media type no model
describes), and the error statuses it may answer besides those of every route; every error
is the one ``Error`` schema. Describing a new route is adding an ``Operation``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, RootModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from condensate import __version__
from condensate.api.answer import Error, Health, Ready
from condensate.api.approvals import ApprovalAnswered, Approvals
from condensate.api.bodies import (
    ApprovalAnswer,
    Attach,
    CompactAnswer,
    CreateThread,
    Detach,
    Interrupt,
    PinMessage,
    SendMessage,
)
from condensate.api.compaction import CompactAnswered, Compaction
from condensate.api.log import TailPage
from condensate.api.threads import (
    AnyThread,
    Archived,
    Attached,
    Detached,
    Interrupted,
    MessageSent,
    Pinned,
    Thread,
    ThreadList,
    ToolAnswer,
)
from condensate.core.context_tools import ANSWERED_TOOLS


class ThreadOrElsewhere(RootModel[AnyThread]):
    """``GET /threads/:id``: the thread, or in a fleet where it is."""


class OpenAPIDocument(BaseModel):
    """This document (its top keys; the rest as OpenAPI 3.1 says)."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]
    security: list[dict[str, list[str]]]


GUARDED = (401, 421, 500)
"""Every route but /health and /ready needs the token (401) and the daemon's own Host (421);
any route may fail inside the daemon (500 internal-error)."""
EVENTS = "text/event-stream"
SECONDS = "end the stream after this many seconds (default: when the client goes)"
WITH_BODY = (400, 408, 413, 415, 422)
"""A route that reads a body: malformed JSON or an integer past 64 bits (400), a body that
did not arrive in time (408), too large (413), not application/json (415), invalid (422)."""


@dataclass(frozen=True)
class Reply:
    """One answer of an operation: a model's JSON, or ``media`` with ``schema``."""

    description: str
    model: type[BaseModel] | None = None
    media: str = "application/json"
    schema: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Operation:
    method: Literal["GET", "POST"]
    path: str
    id: str
    """The ``operationId``: stable, a generated client's method name."""
    summary: str
    replies: Mapping[int, Reply]
    errors: tuple[int, ...] = ()
    """Error statuses besides ``GUARDED`` (``WITH_BODY`` too, for a route with a body)."""
    body: type[BaseModel] | None = None
    body_required: bool = True
    arguments: Mapping[str, Any] | None = None
    """A body no model describes (a context tool's arguments): its schema."""
    query: tuple[tuple[str, str], ...] = ()
    """Integer query parameters: (name, what it does)."""
    path_names: Mapping[str, Any] = field(default_factory=dict)
    """Path parameters besides ``thread_id``: their schemas."""
    headers: tuple[tuple[str, str], ...] = ()
    """Integer request headers it reads: (name, what it does)."""
    public: bool = False
    """Needs no token."""


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _ok(description: str, model: type[BaseModel]) -> Reply:
    return Reply(description, model)


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/health",
        "getHealth",
        "Liveness; needs no token",
        {200: _ok("the daemon is up", Health)},
        public=True,
    ),
    Operation(
        "GET",
        "/ready",
        "getReady",
        "Readiness; needs no token. 503 not-ready (with Retry-After) while the daemon recovers "
        "its threads from the log after a start, and once it is stopping",
        {200: _ok("the daemon serves its threads", Ready)},
        errors=(503,),
        public=True,
    ),
    Operation(
        "GET",
        "/openapi.json",
        "getOpenApi",
        "This document",
        {200: _ok("OpenAPI", OpenAPIDocument)},
    ),
    Operation(
        "GET",
        "/metrics",
        "getMetrics",
        "The daemon's metrics, in the Prometheus text format (0.0.4)",
        {200: Reply("every metric, one sample a line", None, "text/plain", {"type": "string"})},
    ),
    Operation(
        "POST",
        "/threads",
        "createThread",
        "Start a thread (413 message-too-large: a brief past the line)",
        {201: _ok("the new thread", Thread)},
        body=CreateThread,
    ),
    Operation(
        "POST",
        "/attach",
        "attachSession",
        "A thread for a CLI a person runs in their own terminal (condensate claude), and how "
        "to start that CLI through the gateway",
        {201: _ok("the thread and the launch", Attached)},
        errors=(409,),
        body=Attach,
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/detach",
        "detachSession",
        "The person's CLI exited: its session's turn ends (409 not-attached)",
        {200: _ok("ended", Detached)},
        errors=(404, 409),
        body=Detach,
    ),
    Operation("GET", "/threads", "listThreads", "List threads", {200: _ok("threads", ThreadList)}),
    Operation(
        "GET",
        "/threads/{thread_id}",
        "getThread",
        "Inspect a thread: usage, ceiling, line, pending ask, costs",
        {200: _ok("the thread", ThreadOrElsewhere)},
        errors=(404,),
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/messages",
        "sendMessage",
        "Steer a thread (413 message-too-large: a message past the line)",
        {202: _ok("logged", MessageSent)},
        errors=(404, 409),
        body=SendMessage,
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/interrupt",
        "interruptThread",
        "End the running turn now (409 not-running: the thread is idle)",
        {200: _ok("the turn was ended", Interrupted)},
        errors=(404, 409),
        body=Interrupt,
        body_required=False,
    ),
    Operation(
        "GET",
        "/threads/{thread_id}/approvals",
        "listApprovals",
        "Tool calls waiting for an operator (a thread with permissions ask)",
        {200: _ok("pending requests", Approvals)},
        errors=(404, 409),
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/approvals",
        "answerApproval",
        "Allow or deny one pending request (404 unknown-approval)",
        {200: _ok("answered", ApprovalAnswered)},
        errors=(404, 409),
        body=ApprovalAnswer,
    ),
    Operation(
        "GET",
        "/threads/{thread_id}/tail",
        "tailThread",
        "Read the log",
        {200: _ok("a page of events", TailPage)},
        errors=(400, 404),
        query=(
            ("after", "return events after this seq (default 0)"),
            ("limit", "page size, default 200, clamped to 1000"),
            ("history", "1 to include events older than the latest snapshot"),
            ("wait", "seconds to wait for new events (at most 30)"),
        ),
    ),
    Operation(
        "GET",
        "/threads/{thread_id}/compact",
        "getCompaction",
        "The pending ask, a requested compaction, a preview of a cut",
        {200: _ok("ask, requested, preview", Compaction)},
        errors=(404, 409),
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/compact",
        "answerCompaction",
        "Answer the pending ask, or queue a compaction",
        {
            200: _ok("the ask was answered", CompactAnswered),
            202: _ok("a compaction was queued", CompactAnswered),
        },
        errors=(403, 404, 409),  # 403 thread-only: by "thread" without the thread's token
        body=CompactAnswer,
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/pins",
        "pinMessage",
        "Pin a message: it survives every tier (404/422 not-pinnable)",
        {200: _ok("pinned", Pinned)},
        errors=(404, 409),
        body=PinMessage,
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/archive",
        "archiveThread",
        "Move a finished thread out of the live log into its archive file "
        "(409 thread-running, thread-not-finished, thread-archived)",
        {200: _ok("archived", Archived)},
        errors=(404, 409),
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/tools/{name}",
        "callContextTool",
        "Run one of the agent's context tools for a CLI thread's MCP server (404 unknown-tool)",
        {200: _ok("the tool's answer, as its result", ToolAnswer)},
        errors=(404, 409),
        arguments={"type": "object"},
        body_required=False,
        path_names={"name": {"enum": list(ANSWERED_TOOLS)}},
    ),
    Operation(
        "GET",
        "/live",
        "followThreads",
        "Server-sent events: a snapshot of every thread, then each thread's new state as it "
        "changes (at most every 250 ms a thread)",
        {200: Reply("snapshot, thread, gone and resync events", None, EVENTS, _ref("LiveEvent"))},
        errors=(400, 503),  # 503 too-many-streams, with Retry-After
        query=(("seconds", SECONDS),),
    ),
    Operation(
        "GET",
        "/threads/{thread_id}/live",
        "followThread",
        "Server-sent events: every logged event after `after`, then each item as it is "
        "published (id: the seq of a logged event)",
        {
            200: Reply(
                "events, each with its kind; logged ones with their seq",
                None,
                EVENTS,
                _ref("ThreadLiveEvent"),
            )
        },
        errors=(400, 404, 409, 503),  # 503 too-many-streams, with Retry-After
        query=(
            ("after", "send logged events after this seq (default 0)"),
            ("seconds", SECONDS),
        ),
        headers=(("Last-Event-ID", "a reconnecting client's last seq; wins over `after`"),),
    ),
)


def _sse(event: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """One server-sent event: its kind, and its data, a line of JSON matching ``data``
    (OpenAPI 3.1 has a stream's ``schema`` describe each event)."""
    return {
        "type": "object",
        "required": ["data", "event"],
        "additionalProperties": False,
        "properties": {
            "event": event,
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
        },
    }


STREAM_SCHEMAS: dict[str, Any] = {
    "ThreadLiveEvent": _sse(
        {"type": "string", "description": "a logged event's kind, or an ephemeral item's"},
        {
            "type": "object",
            "description": "a logged event (with its id, the seq) is the tail's event; an "
            "ephemeral item (thread.status, thread.gone, message.delta, resync) has none",
        },
    ),
    "LiveEvent": {
        "oneOf": [
            _sse({"const": "snapshot"}, _ref("ThreadList")),
            _sse({"const": "thread"}, _ref("Thread")),
            _sse(
                {"const": "gone"},
                {
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "required": ["id"],
                    "additionalProperties": False,
                },
            ),
            _sse({"const": "resync"}, {"type": "object", "additionalProperties": False}),
        ]
    },
}
"""The live channel's events (``condensate.http.live_routes``): no model sends them as JSON."""


class _Schema(GenerateJsonSchema):
    """Every field of an answer is required (the server always sends it, defaults too), and
    a field's title is left out (its name says it; a model's title is its name)."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization":
            return not field.get("serialization_exclude")
        return super().field_is_required(field, total)

    def field_title_should_be_set(self, schema: object) -> bool:
        return False


def _json(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    names = {"thread_id": {"type": "string"}} if "{thread_id}" in operation.path else {}
    names.update(operation.path_names)
    found = [{"name": n, "in": "path", "required": True, "schema": s} for n, s in names.items()]
    for name, description in operation.query:
        found.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": description,
                "schema": INT64_SCHEMA,
            }
        )
    for name, description in operation.headers:
        found.append(
            {
                "name": name,
                "in": "header",
                "required": False,
                "description": description,
                "schema": INT64_SCHEMA,
            }
        )
    return found


INT64_SCHEMA = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
"""A query or header integer: the daemon refuses one past 64 bits (400 bad-query)."""


def _operation(
    operation: Operation, refs: Mapping[tuple[str, JsonSchemaMode], Any]
) -> dict[str, Any]:
    described: dict[str, Any] = {"operationId": operation.id, "summary": operation.summary}
    parameters = _parameters(operation)
    if parameters:
        described["parameters"] = parameters
    if operation.public:
        described["security"] = []
    with_body = operation.body is not None or operation.arguments is not None
    if operation.body is not None:
        schema = refs[operation.body.__name__, "validation"]
        described["requestBody"] = {"required": operation.body_required, "content": _json(schema)}
    elif operation.arguments is not None:
        described["requestBody"] = {
            "required": operation.body_required,
            "description": "The tool's arguments",
            "content": _json(operation.arguments),
        }
    responses: dict[str, Any] = {}
    for status, reply in operation.replies.items():
        if reply.model is not None:
            content = _json(refs[reply.model.__name__, "serialization"])
        else:
            content = {reply.media: {"schema": dict(reply.schema)}}
        responses[str(status)] = {"description": reply.description, "content": content}
    guarded = (421, 500) if operation.public else GUARDED
    errors = {*guarded, *operation.errors, *(WITH_BODY if with_body else ())}
    for status in sorted(errors):
        responses[str(status)] = {"description": "error", "content": _json(_ref("Error"))}
    described["responses"] = responses
    return described


@functools.cache
def _schemas() -> tuple[dict[tuple[str, JsonSchemaMode], Any], dict[str, Any]]:
    """Each model's schema (a reference into the components) by (name, mode), and the
    components: request bodies as they are validated, answers as they are sent."""
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(Error, "serialization")]
    for operation in OPERATIONS:
        if operation.body is not None:
            inputs.append((operation.body, "validation"))
        inputs.extend((r.model, "serialization") for r in operation.replies.values() if r.model)
    unique = list(dict.fromkeys(inputs))
    keys, top = models_json_schema(
        unique,
        by_alias=True,
        ref_template="#/components/schemas/{model}",
        schema_generator=_Schema,
    )
    refs = {(model.__name__, mode): schema for (model, mode), schema in keys.items()}
    schemas: dict[str, Any] = top.get("$defs", {})
    return refs, schemas


def openapi_document(engines: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route the daemon serves, whose threads run on
    ``engines``."""
    refs, shared = _schemas()
    schemas = {**copy.deepcopy(shared), **STREAM_SCHEMAS}
    names = sorted(engines)
    schemas["CreateThread"]["properties"]["engine"] = {
        "anyOf": [{"enum": names}, {"type": "null"}],
        "default": None,
        "description": "One of the engines the daemon runs; null or absent: its default.",
    }
    schemas["Thread"]["properties"]["engine"] = {"enum": names}
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Condensate",
            "version": __version__,
            "description": "Every error is {error, detail}. A method a path does not take is "
            "405 method-not-allowed with an Allow header.",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
