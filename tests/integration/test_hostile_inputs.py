"""Hostile inputs on a real daemon: one table of method, path, body and headers, each with the
status and error code it must get, every answer a JSON ``{"error", "detail"}``; then what the
table cannot hold (a request head that is not HTTP, a body that never arrives, a handler that
raises).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from condensate.client import DaemonClient
from condensate.http.edge import BODY_TIMEOUT
from condensate.http.server import errors_middleware
from tests.integration.daemon import DaemonProcess

MODEL = "anthropic:claude-sonnet-4-5"
JSON = {"Content-Type": "application/json"}
THREAD = "{thread}"
"""Stands in a path for the module's thread."""
DEEP = b"[" * 10_000 + b"]" * 10_000
HUGE_TEXT = "lorem ipsum dolor sit amet " * 20_000
"""About 120,000 tokens in 540 kB: past a non-head thread's line on a 200,000-token window
(about 72,000), within the 1 MiB body limit."""


def _create(**change: Any) -> bytes:
    body = {"model": MODEL, "cwd": "/", "brief": "never started", "head": False, **change}
    return json.dumps(body).encode()


CASES: list[tuple[str, str, str, bytes | None, dict[str, str], int, str]] = [
    # (name, method, path, body, headers, status, code)
    (
        "unknown-provider",
        "POST",
        "/threads",
        _create(model="martian:x1"),
        JSON,
        422,
        "unknown-model",
    ),
    (
        "bare-unknown-model",
        "POST",
        "/threads",
        _create(model="nosuch-model"),
        JSON,
        422,
        "unknown-model",
    ),
    ("not-utf8", "POST", "/threads", b'{"model": "\xff\xfe"}', JSON, 400, "malformed-json"),
    ("too-deep", "POST", "/threads", DEEP, JSON, 400, "malformed-json"),
    ("nan", "POST", "/threads", b'{"model": NaN}', JSON, 400, "malformed-json"),
    ("int-past-int64", "POST", "/threads", _create(extra=2**70), JSON, 400, "integer-out-of-range"),
    (
        "int-below-int64",
        "POST",
        "/threads",
        _create(extra=-(2**63) - 1),
        JSON,
        400,
        "integer-out-of-range",
    ),
    (
        "int-of-5000-digits",
        "POST",
        "/threads",
        b'{"x": ' + b"9" * 5000 + b"}",
        JSON,
        400,
        "integer-out-of-range",
    ),
    (
        "keep-from-past-int64",
        "POST",
        f"/threads/{THREAD}/compact",
        json.dumps({"mode": "summary", "keepFrom": 2**70}).encode(),
        JSON,
        400,
        "integer-out-of-range",
    ),
    (
        "keep-from-float-past-int64",
        "POST",
        f"/threads/{THREAD}/compact",
        b'{"mode": "summary", "keepFrom": 1e30}',
        JSON,
        422,
        "invalid-body",
    ),
    (
        "text-plain",
        "POST",
        "/threads",
        _create(),
        {"Content-Type": "text/plain"},
        415,
        "unsupported-media-type",
    ),
    (
        "no-content-type",
        "POST",
        f"/threads/{THREAD}/messages",
        b'{"text": "hi"}',
        {},
        415,
        "unsupported-media-type",
    ),
    (
        "form",
        "POST",
        f"/threads/{THREAD}/compact",
        b"mode=summary",
        {"Content-Type": "application/x-www-form-urlencoded"},
        415,
        "unsupported-media-type",
    ),
    (
        "query-past-int64",
        "GET",
        f"/threads/{THREAD}/tail?after={2**70}",
        None,
        {},
        400,
        "bad-query",
    ),
    (
        "brief-past-the-line",
        "POST",
        "/threads",
        _create(brief=HUGE_TEXT),
        JSON,
        413,
        "message-too-large",
    ),
    (
        "message-past-the-line",
        "POST",
        f"/threads/{THREAD}/messages",
        json.dumps({"text": HUGE_TEXT}).encode(),
        JSON,
        413,
        "message-too-large",
    ),
    (
        "interrupt-with-a-field",
        "POST",
        f"/threads/{THREAD}/interrupt",
        b'{"now": true}',
        JSON,
        422,
        "invalid-body",
    ),
    ("interrupt-idle", "POST", f"/threads/{THREAD}/interrupt", None, {}, 409, "not-running"),
    (
        "interrupt-idle-empty-object",
        "POST",
        f"/threads/{THREAD}/interrupt",
        b"{}",
        JSON,
        409,
        "not-running",
    ),
    ("delete-threads", "DELETE", "/threads", None, {}, 405, "method-not-allowed"),
    ("put-thread", "PUT", f"/threads/{THREAD}", None, {}, 405, "method-not-allowed"),
    ("get-messages", "GET", f"/threads/{THREAD}/messages", None, {}, 405, "method-not-allowed"),
]
ALLOW = {"delete-threads": "GET, POST", "put-thread": "GET", "get-messages": "POST"}


@pytest.fixture(scope="module")
def thread(daemon: DaemonProcess) -> str:
    """An idle, non-head thread (line about 72,000 tokens) whose first turn is over."""
    client = DaemonClient(daemon.url, daemon.token)
    thread = str(client.call("POST", "/threads", json.loads(_create(brief="idle")))["id"])
    deadline = time.monotonic() + 30
    while client.call("GET", f"/threads/{thread}")["status"] != "idle":
        assert time.monotonic() < deadline, f"Thread {thread} did not settle."
        time.sleep(0.05)
    return thread


def _is_error(body: Any, code: str) -> None:
    assert isinstance(body, dict), body
    assert set(body) == {"error", "detail"}, body
    assert body["error"] == code, body
    assert isinstance(body["detail"], str)
    assert body["detail"]


@pytest.mark.parametrize(
    ("name", "method", "path", "body", "headers", "status", "code"),
    CASES,
    ids=[case[0] for case in CASES],
)
async def test_a_hostile_input_gets_its_json_error(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    thread: str,
    name: str,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    """Each hostile input gets its status and error code as a JSON {error, detail}; a 405
    says which methods the path takes in Allow."""
    async with session.request(
        method,
        daemon.url + path.replace(THREAD, thread),
        data=body,
        headers={**daemon.headers, **headers},
        skip_auto_headers=["Content-Type"],
    ) as response:
        assert response.status == status, await response.text()
        assert response.content_type == "application/json"
        _is_error(await response.json(), code)
        if name in ALLOW:
            assert response.headers["Allow"] == ALLOW[name]


async def test_a_message_past_the_line_names_its_size_and_the_line(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str
) -> None:
    """A message larger than the thread's line is refused naming its tokens and the line."""
    async with session.get(f"{daemon.url}/threads/{thread}", headers=daemon.headers) as response:
        line = (await response.json())["line"]
    async with session.post(
        f"{daemon.url}/threads/{thread}/messages",
        json={"text": HUGE_TEXT},
        headers=daemon.headers,
    ) as response:
        detail = (await response.json())["detail"]
    assert f"line is {line:,} tokens" in detail
    assert " tokens;" in detail


async def test_an_unknown_model_is_named(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """An unknown model's 422 names the model."""
    async with session.post(
        daemon.url + "/threads",
        data=_create(model="martian:x1"),
        headers={**daemon.headers, **JSON},
    ) as response:
        assert "martian:x1" in (await response.json())["detail"]


def _raw(daemon: DaemonProcess, request: bytes, seconds: float) -> bytes:
    host, port = daemon.url.rsplit("/", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=seconds) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_head_that_is_not_http_gets_a_json_400(daemon: DaemonProcess) -> None:
    """A request head aiohttp cannot parse (a NUL in a header) is answered 400 with a JSON
    error, and the daemon logs no traceback for it."""
    answer = _raw(daemon, b"GET /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\x00b\r\n\r\n", 10)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400", answer
    assert b"application/json" in head
    _is_error(json.loads(body), "bad-request")
    assert "Traceback" not in daemon.log_tail()


def test_a_body_that_never_arrives_is_408(daemon: DaemonProcess) -> None:
    """A body that stops short of its Content-Length gets 408 body-timeout once the body
    timeout has passed."""
    host = daemon.url.rsplit("/", 1)[1]
    head = (
        f"POST /threads HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {daemon.token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    began = time.monotonic()
    answer = _raw(daemon, head + b'{"model": ', BODY_TIMEOUT + 10)
    assert time.monotonic() - began >= BODY_TIMEOUT - 0.5
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 408"), answer
    _is_error(json.loads(body), "body-timeout")


async def test_an_unexpected_exception_is_a_json_500_logged_once() -> None:
    """A handler that raises an exception nobody expected gets a JSON 500 internal-error, and
    the failure is logged once, with its traceback."""

    async def broken(request: web.Request) -> web.Response:
        msg = "a bug"
        raise RuntimeError(msg)

    app = web.Application(middlewares=[errors_middleware])
    app.router.add_get("/broken", broken)
    with structlog.testing.capture_logs() as logs:
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/broken")
            assert response.status == 500
            _is_error(await response.json(), "internal-error")
    crashes = [entry for entry in logs if entry["event"] == "request_crashed"]
    assert len(crashes) == 1
    assert crashes[0]["exc_info"] is True
