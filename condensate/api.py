"""The HTTP API's request bodies and its OpenAPI document. Pure: the server serves both."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from condensate import __version__


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CreateThread(_Body):
    engine: Literal["api", "claude", "codex"] = "api"
    model: str
    cwd: str
    brief: str = Field(min_length=1)
    persona: str = ""
    tools: list[str] = Field(default_factory=list)
    permissions: str = "default"
    head: bool = True


class SendMessage(_Body):
    text: str = Field(min_length=1)
    pinned: bool = False


class CompactAnswer(_Body):
    mode: Literal["summary", "microcompact", "decline"]
    keep_from: int | None = Field(default=None, alias="keepFrom", ge=1)
    summary: str | None = None
    reason: str = ""
    seat: str | None = None
    by: Literal["operator", "thread"] = "operator"


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error", "detail"],
    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
}

_THREAD_ID = {"name": "thread_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(s): {
            "description": "error",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for s in (401, 421, *statuses)
    }


def _ok(status: int, description: str) -> dict[str, Any]:
    return {
        str(status): {
            "description": description,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    }


def _body(model: type[BaseModel]) -> dict[str, Any]:
    return {
        "required": True,
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


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route the daemon serves."""
    thread = [_THREAD_ID]
    paths: dict[str, dict[str, Any]] = {
        "/health": {
            "get": {
                "summary": "Liveness; needs no token",
                "security": [],
                "responses": _ok(200, "the daemon is up"),
            }
        },
        "/openapi.json": {
            "get": {"summary": "This document", "responses": {**_ok(200, "OpenAPI"), **_errors()}}
        },
        "/threads": {
            "post": {
                "summary": "Start a thread",
                "requestBody": _body(CreateThread),
                "responses": {**_ok(201, "the new thread"), **_errors(400, 413, 422)},
            },
            "get": {"summary": "List threads", "responses": {**_ok(200, "threads"), **_errors()}},
        },
        "/threads/{thread_id}": {
            "get": {
                "summary": "Inspect a thread: usage, ceiling, line, pending ask, seats",
                "parameters": thread,
                "responses": {**_ok(200, "the thread"), **_errors(404)},
            }
        },
        "/threads/{thread_id}/messages": {
            "post": {
                "summary": "Steer a thread",
                "parameters": thread,
                "requestBody": _body(SendMessage),
                "responses": {**_ok(202, "logged"), **_errors(400, 404, 413, 422)},
            }
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
                "responses": {**_ok(200, "events, nextAfter, hasMore"), **_errors(400, 404)},
            }
        },
        "/threads/{thread_id}/compact": {
            "get": {
                "summary": "The pending ask, a requested compaction, a preview of a cut",
                "parameters": thread,
                "responses": {**_ok(200, "ask, requested, preview"), **_errors(404)},
            },
            "post": {
                "summary": "Answer the pending ask, or queue a compaction",
                "parameters": [
                    *thread,
                    {
                        "name": "seat",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": _body(CompactAnswer),
                "responses": {
                    **_ok(200, "the ask was answered"),
                    **_ok(202, "a compaction was queued"),
                    **_errors(400, 404, 409, 422),
                },
            },
        },
    }
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    for model in (CreateThread, SendMessage, CompactAnswer):
        schemas[model.__name__] = model.model_json_schema(by_alias=True)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Condensate", "version": __version__},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
