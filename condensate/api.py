"""The HTTP API's request bodies and its OpenAPI document. Pure: the server serves both."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from condensate import __version__
from condensate.context_tools import ANSWERED_TOOLS
from condensate.events import AskMode

INT64_MAX = 2**63 - 1
"""Integers in a body must fit SQLite's 64 bits; larger ones are refused before validation."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ResetBody(_Body):
    """``"reset"``: the thread's agent condenses its own context (a ``condense`` tool with a
    note to its future self); nothing is cut for it."""

    warnings: list[float] = Field(default_factory=lambda: [0.75, 0.80, 0.85, 0.90], max_length=16)
    """Shares of the input budget at which the agent is warned, ascending, each in (0, 1]."""
    budget: int | None = Field(default=None, gt=0, le=INT64_MAX)
    """The input budget the warnings measure against (default: the model's window)."""
    emergency_model: str | None = Field(default=None, alias="emergencyModel")
    """The model that summarizes the whole view when the provider refuses a prompt as too
    long (default: none; such a refusal then stops the turn)."""

    @field_validator("warnings")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(not 0 < level <= 1 for level in value):
            msg = "each warning level is a share of the budget, above 0 and at most 1"
            raise ValueError(msg)
        if value != sorted(set(value)):
            msg = "warning levels must ascend, each once"
            raise ValueError(msg)
        return value


class CreateThread(_Body):
    engine: str | None = None
    """One of the engines the daemon runs (``GET /openapi.json`` lists them); none: its
    default engine."""
    model: str = Field(examples=["anthropic:claude-sonnet-4-5"])
    cwd: str = Field(examples=["/home/me/src/project"])
    brief: str = Field(min_length=1, examples=["Make the failing tests pass."])
    persona: str = ""
    tools: list[str] = Field(default_factory=list)
    permissions: str = "default"
    head: bool = False
    """A head faces an operator: its line is the model's window less the reserves, and on the
    CLI engines it is asked to compact rather than cut. Only when asked for."""
    reset: ResetBody | None = None
    """Agent-reset mode: the agent condenses its own context; absent: Condensate windows it."""
    output_cap: int | None = Field(default=None, alias="outputCap", gt=0, le=1_000_000)
    """Tokens of a tool result the view shows; a larger one is paged: its beginning and a
    reference to read the rest by (the log keeps it all). Absent: results are not paged."""
    near_limit_warnings: bool = Field(default=False, alias="nearLimitWarnings")
    """Each request near the line carries an URGENT (70 % of the line) or CRITICAL (90 %)
    notice in its system prompt, that request only (on the CLI engines the gateway adds it)."""


class SendMessage(_Body):
    text: str = Field(min_length=1)
    pinned: bool = False


class PinMessage(_Body):
    """``POST /threads/:id/pins``: the seq of a message to keep through every tier."""

    seq: int = Field(ge=1, le=INT64_MAX)


class Interrupt(_Body):
    """``POST /threads/:id/interrupt`` takes no body, or an empty object."""


class ApprovalAnswer(_Body):
    """``POST /threads/:id/approvals``: allow or deny one pending request."""

    id: str = Field(min_length=1)
    decision: Literal["allow", "deny"]
    reason: str = ""


class CompactAnswer(_Body):
    mode: AskMode
    keep_from: int | None = Field(default=None, alias="keepFrom", ge=1, le=INT64_MAX)
    summary: str | None = None
    reason: str = ""
    by: Literal["operator", "thread"] = "operator"


def _object(properties: dict[str, Any], *, closed: bool = True) -> dict[str, Any]:
    """An object with every one of ``properties`` required."""
    schema: dict[str, Any] = {
        "type": "object",
        "required": sorted(properties),
        "properties": properties,
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


_INT = {"type": "integer"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_INT = {"type": ["integer", "null"]}
_OPEN_OBJECT = {"type": "object"}

ERROR_SCHEMA = _object({"error": _STR, "detail": _STR})

RESPONSE_SCHEMAS: dict[str, Any] = {
    "Health": _object({"ok": {"const": True}, "version": _STR}),
    "Usage": _object(
        {
            "used": _INT,
            "window": _INT,
            "ceiling": _INT,
            "line": _INT,
            "fraction": {"type": "number"},
            "anchored": _BOOL,
            "resolved": _BOOL,
        }
    ),
    "Tokens": _object({"input": _INT, "cacheWrite": _INT, "cacheRead": _INT, "output": _INT}),
    "Costs": _object(
        {
            "calls": _INT,
            "tokens": {"$ref": "#/components/schemas/Tokens"},
            "usd": {"type": ["number", "null"]},
            "unpriced": {"type": "array", "items": _STR},
            "sessions": {
                "type": "array",
                "items": _object(
                    {
                        "session": _STR,
                        "model": _STR,
                        "calls": _INT,
                        "tokens": {"$ref": "#/components/schemas/Tokens"},
                        "usd": {"type": ["number", "null"]},
                    }
                ),
            },
        }
    ),
    "Thread": _object(
        {
            "id": _STR,
            "engine": _STR,
            "model": _STR,
            "cwd": _STR,
            "head": _BOOL,
            "parent": _NULLABLE_STR,
            "status": {"enum": ["running", "idle"]},
            "owner": _NULLABLE_STR,
            "events": _INT,
            "usage": {"$ref": "#/components/schemas/Usage"},
            "ceiling": _INT,
            "line": _INT,
            "overLine": _NULLABLE_STR,
            "costs": {"$ref": "#/components/schemas/Costs"},
            "pendingAsk": {"type": ["object", "null"]},
            "reset": {"type": ["object", "null"]},
            "children": {"type": "array", "items": _STR},
        }
    ),
    "ThreadElsewhere": _object(
        {
            "id": _STR,
            "status": {"enum": ["elsewhere", "unowned"]},
            "owner": _STR,
            "ownerUrl": _STR,
            "events": _INT,
        }
    ),
    "AnyThread": {
        "oneOf": [
            {"$ref": "#/components/schemas/Thread"},
            {"$ref": "#/components/schemas/ThreadElsewhere"},
        ]
    },
    "ThreadList": _object(
        {"threads": {"type": "array", "items": {"$ref": "#/components/schemas/AnyThread"}}}
    ),
    "Logged": _object({"seq": _INT, "thread": _STR}),
    "TailPage": _object(
        {
            "events": {
                "type": "array",
                "items": _object({"seq": _INT, "tokens": _INT, "kind": _STR}, closed=False),
            },
            "nextAfter": _INT,
            "hasMore": _BOOL,
        }
    ),
    "Compaction": _object(
        {
            "ask": {"type": ["object", "null"]},
            "requested": {
                "oneOf": [
                    {"type": "null"},
                    _object(
                        {
                            "seq": _INT,
                            "mode": _STR,
                            "by": _STR,
                            "keepFrom": _NULLABLE_INT,
                            "summary": _NULLABLE_STR,
                        }
                    ),
                ]
            },
            "preview": _object(
                {"microcompact": _OPEN_OBJECT, "collapse": _OPEN_OBJECT, "summary": _OPEN_OBJECT}
            ),
            "usage": _object({"used": _INT, "line": _INT, "ceiling": _INT}),
        }
    ),
    "CompactAnswered": _object({"seq": _INT, "kind": _STR, "queued": _BOOL}),
    "Interrupted": _object({"interrupted": {"const": True}, "thread": _STR}),
    "Approvals": _object(
        {
            "approvals": {
                "type": "array",
                "items": _object(
                    {
                        "id": _STR,
                        "tool": _STR,
                        "argument": _STR,
                        "detail": _STR,
                        "callId": _NULLABLE_STR,
                        "requestedAt": _STR,
                        "deadline": _STR,
                    }
                ),
            }
        }
    ),
    "ToolAnswer": _object({"text": _STR, "isError": _BOOL}),
    "Pinned": _object(
        {"seq": _NULLABLE_INT, "pinned": _INT, "pins": {"type": "array", "items": _INT}}
    ),
    "ApprovalAnswered": _object({"seq": _INT, "id": _STR, "decision": {"enum": ["allow", "deny"]}}),
    "Archived": _object(
        {
            "thread": _STR,
            "file": _STR,
            "host": _STR,
            "archivedAt": _STR,
            "lastSeq": _INT,
            "events": _INT,
            "snapshots": _INT,
            "digest": _STR,
        }
    ),
    "OpenAPI": _object(
        {"openapi": _STR, "info": _OPEN_OBJECT, "paths": _OPEN_OBJECT}, closed=False
    ),
}

GUARDED = (401, 421, 500)
"""Every route but /health needs the token (401) and the daemon's own Host (421); any route
may fail inside the daemon (500 internal-error)."""
WITH_BODY = (400, 408, 413, 415, 422)
"""A route that reads a body: malformed JSON or an integer past 64 bits (400), a body that
did not arrive in time (408), too large (413), not application/json (415), invalid (422)."""

_THREAD_ID = {"name": "thread_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _errors(*statuses: int, guarded: bool = True) -> dict[str, Any]:
    codes = sorted({*(GUARDED if guarded else (421, 500)), *statuses})
    return {
        str(s): {
            "description": "error",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for s in codes
    }


def _ok(status: int, description: str, schema: str) -> dict[str, Any]:
    return {
        str(status): {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
    }


def _body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    return {
        "required": required,
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
        },
    }


def _query(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "integer"},
    }


def _stream(description: str, event: str) -> dict[str, Any]:
    """A 200 that is a stream of server-sent events; ``event`` is the schema of one event
    (OpenAPI 3.1 has ``schema`` describe each event: its ``event``, ``data`` and ``id``)."""
    return {
        "200": {
            "description": description,
            "content": {"text/event-stream": {"schema": {"$ref": f"#/components/schemas/{event}"}}},
        }
    }


def _sse(event: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """One server-sent event: its kind, and its data, a line of JSON matching ``data``."""
    return {
        "type": "object",
        "required": ["data", "event"],
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
            "ephemeral item (thread.status, thread.gone, resync) has none",
        },
    ),
    "LiveEvent": {
        "oneOf": [
            _sse({"const": "snapshot"}, {"$ref": "#/components/schemas/ThreadList"}),
            _sse({"const": "thread"}, {"$ref": "#/components/schemas/Thread"}),
            _sse({"const": "gone"}, _object({"id": _STR})),
            _sse({"const": "resync"}, _object({})),
        ]
    },
}


_SECONDS = _query(
    "seconds", "end the stream after this many seconds (default: when the client goes)"
)


def _live_paths(thread: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The server-sent event streams of the live channel (``condensate.live_routes``)."""
    return {
        "/live": {
            "get": {
                "summary": "Server-sent events: a snapshot of every thread, then each "
                "thread's new state as it changes (at most every 250 ms a thread)",
                "parameters": [_SECONDS],
                "responses": {
                    **_stream("snapshot, thread, gone and resync events", "LiveEvent"),
                    **_errors(400),
                },
            }
        },
        "/threads/{thread_id}/live": {
            "get": {
                "summary": "Server-sent events: every logged event after `after`, then each "
                "item as it is published (id: the seq of a logged event)",
                "parameters": [
                    *thread,
                    _query("after", "send logged events after this seq (default 0)"),
                    _SECONDS,
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": "a reconnecting client's last seq; wins over `after`",
                        "schema": {"type": "integer"},
                    },
                ],
                "responses": {
                    **_stream(
                        "events, each with its kind; logged ones with their seq",
                        "ThreadLiveEvent",
                    ),
                    **_errors(400, 404, 409),
                },
            }
        },
    }


def openapi_document(engines: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route the daemon serves, whose threads run on
    ``engines``."""
    thread = [_THREAD_ID]
    paths: dict[str, dict[str, Any]] = {
        "/health": {
            "get": {
                "summary": "Liveness; needs no token",
                "security": [],
                "responses": {**_ok(200, "the daemon is up", "Health"), **_errors(guarded=False)},
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {**_ok(200, "OpenAPI", "OpenAPI"), **_errors()},
            }
        },
        "/metrics": {
            "get": {
                "summary": "The daemon's metrics, in the Prometheus text format (0.0.4)",
                "responses": {
                    "200": {
                        "description": "every metric, one sample a line",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors(),
                },
            }
        },
        "/threads": {
            "post": {
                "summary": "Start a thread (413 message-too-large: a brief past the line)",
                "requestBody": _body(CreateThread),
                "responses": {**_ok(201, "the new thread", "Thread"), **_errors(*WITH_BODY)},
            },
            "get": {
                "summary": "List threads",
                "responses": {**_ok(200, "threads", "ThreadList"), **_errors()},
            },
        },
        "/threads/{thread_id}": {
            "get": {
                "summary": "Inspect a thread: usage, ceiling, line, pending ask, costs",
                "parameters": thread,
                "responses": {**_ok(200, "the thread", "AnyThread"), **_errors(404)},
            }
        },
        "/threads/{thread_id}/messages": {
            "post": {
                "summary": "Steer a thread (413 message-too-large: a message past the line)",
                "parameters": thread,
                "requestBody": _body(SendMessage),
                "responses": {**_ok(202, "logged", "Logged"), **_errors(404, 409, *WITH_BODY)},
            }
        },
        "/threads/{thread_id}/interrupt": {
            "post": {
                "summary": "End the running turn now (409 not-running: the thread is idle)",
                "parameters": thread,
                "requestBody": _body(Interrupt, required=False),
                "responses": {
                    **_ok(200, "the turn was ended", "Interrupted"),
                    **_errors(404, 409, *WITH_BODY),
                },
            }
        },
        "/threads/{thread_id}/approvals": {
            "get": {
                "summary": "Tool calls waiting for an operator (a thread with permissions ask)",
                "parameters": thread,
                "responses": {**_ok(200, "pending requests", "Approvals"), **_errors(404, 409)},
            },
            "post": {
                "summary": "Allow or deny one pending request (404 unknown-approval)",
                "parameters": thread,
                "requestBody": _body(ApprovalAnswer),
                "responses": {
                    **_ok(200, "answered", "ApprovalAnswered"),
                    **_errors(404, 409, *WITH_BODY),
                },
            },
        },
        "/threads/{thread_id}/tail": {
            "get": {
                "summary": "Read the log",
                "parameters": [
                    *thread,
                    _query("after", "return events after this seq (default 0)"),
                    _query("limit", "page size, default 200, clamped to 1000"),
                    _query("history", "1 to include events older than the latest snapshot"),
                    _query("wait", "seconds to wait for new events (at most 30)"),
                ],
                "responses": {**_ok(200, "a page of events", "TailPage"), **_errors(400, 404)},
            }
        },
        "/threads/{thread_id}/compact": {
            "get": {
                "summary": "The pending ask, a requested compaction, a preview of a cut",
                "parameters": thread,
                "responses": {
                    **_ok(200, "ask, requested, preview", "Compaction"),
                    **_errors(404, 409),
                },
            },
            "post": {
                "summary": "Answer the pending ask, or queue a compaction",
                "parameters": thread,
                "requestBody": _body(CompactAnswer),
                "responses": {
                    **_ok(200, "the ask was answered", "CompactAnswered"),
                    **_ok(202, "a compaction was queued", "CompactAnswered"),
                    **_errors(404, 409, *WITH_BODY),
                },
            },
        },
        "/threads/{thread_id}/pins": {
            "post": {
                "summary": "Pin a message: it survives every tier (404/422 not-pinnable)",
                "parameters": thread,
                "requestBody": _body(PinMessage),
                "responses": {
                    **_ok(200, "pinned", "Pinned"),
                    **_errors(404, 409, *WITH_BODY),
                },
            }
        },
        "/threads/{thread_id}/archive": {
            "post": {
                "summary": "Move a finished thread out of the live log into its archive file "
                "(409 thread-running, thread-not-finished, thread-archived)",
                "parameters": thread,
                "responses": {**_ok(200, "archived", "Archived"), **_errors(404, 409)},
            }
        },
        "/threads/{thread_id}/tools/{name}": {
            "post": {
                "summary": "Run one of the agent's context tools for a CLI thread's MCP "
                "server (404 unknown-tool)",
                "parameters": [
                    *thread,
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "schema": {"enum": list(ANSWERED_TOOLS)},
                    },
                ],
                "requestBody": {
                    "required": False,
                    "description": "The tool's arguments",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": {
                    **_ok(200, "the tool's answer, as its result", "ToolAnswer"),
                    **_errors(404, 409, *WITH_BODY),
                },
            }
        },
    }
    paths.update(_live_paths(thread))
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA, **RESPONSE_SCHEMAS, **STREAM_SCHEMAS}
    for model in (CreateThread, SendMessage, CompactAnswer, Interrupt, ApprovalAnswer, PinMessage):
        schema = model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    names = sorted(engines)
    schemas["CreateThread"]["properties"]["engine"] = {
        "anyOf": [{"enum": names}, {"type": "null"}],
        "default": None,
        "description": "One of the engines the daemon runs; null or absent: its default.",
    }
    thread_schema = schemas["Thread"] = copy.deepcopy(schemas["Thread"])
    thread_schema["properties"]["engine"] = {"enum": names}
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
