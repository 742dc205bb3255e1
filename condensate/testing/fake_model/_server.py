"""``FakeModelServer``: one aiohttp app on loopback serving the Anthropic and OpenAI routes plus
the ``/_fake/*`` control API. Runs as an async context manager in the caller's loop, or in a
daemon thread with its own loop for sync code (``FakeModelServer.in_thread``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from enum import Enum
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from condensate.testing.fake_model import _anthropic, _openai
from condensate.testing.fake_model._accounting import DEFAULT_WINDOW, Windows
from condensate.testing.fake_model._models import DEFAULT_MODELS
from condensate.testing.fake_model._responses import responses
from condensate.testing.fake_model._script import Reply, reply_from_json
from condensate.testing.fake_model._state import (
    Api,
    Config,
    Endpoint,
    FakeState,
    OverflowMode,
    RecordedRequest,
)
from condensate.testing.fake_model._wire import STATE, record

_ENDPOINTS: dict[str, Endpoint] = {
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/models": "models",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}
_MAX_BODY = 256 * 1024 * 1024


class _Unset(Enum):
    UNSET = 0


UNSET = _Unset.UNSET


def _api_of(request: web.Request) -> Api:
    if request.path.startswith("/v1/messages"):
        return "anthropic"
    if request.path == "/v1/models" and "anthropic-version" in request.headers:
        return "anthropic"
    if request.path == "/v1/models" and "x-api-key" in request.headers:
        return "anthropic"
    return "openai"


async def _json_or_none(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"null")
    except ValueError:
        return None


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Marks activity (for ``--idle-exit``) and turns away a wrong key in the API's shape."""
    state = request.app[STATE]
    state.started()
    try:
        endpoint = _ENDPOINTS.get(request.path)
        if endpoint is not None and not state.key_ok(request.headers):
            api = _api_of(request)
            body = await _json_or_none(request)
            record(request, api, endpoint, body, status=401, reply="unauthorized")
            if api == "anthropic":
                return _anthropic.unauthorized(request.headers)
            return _openai.unauthorized(request.headers)
        return await handler(request)
    finally:
        state.finished()


async def _models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    names = state.config.listed_models()
    api = _api_of(request)
    if api == "anthropic":
        data = _anthropic.models_json(names)
    else:
        data = _openai.models_json(names, {n: state.config.windows.limit(n) for n in names})
    record(request, api, "models", None, status=200, reply="models")
    return web.json_response(data)


def _control(
    handler: Callable[[FakeState, Any, web.Request], dict[str, Any]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """Runs a control handler on the JSON body; a bad payload is a 400 naming the problem."""

    async def wrapped(request: web.Request) -> web.Response:
        try:
            data = json.loads(await request.read() or b"{}")
            return web.json_response(handler(request.app[STATE], data, request))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)

    return wrapped


def _queue(state: FakeState, data: Any, request: web.Request) -> dict[str, Any]:
    replies = [reply_from_json(r) for r in data["replies"]]
    model = data.get("model")
    state.script.queue(replies, None if model is None else str(model))
    return {"queued": len(replies), "pending": state.script.pending()}


def _requests(state: FakeState, data: Any, request: web.Request) -> dict[str, Any]:
    since = int(request.query.get("since", "0"))
    return {"requests": [asdict(r) for r in state.requests if r.number > since]}


def _reset(state: FakeState, data: Any, request: web.Request) -> dict[str, Any]:
    state.reset()
    return {"reset": True}


def _clock(state: FakeState, data: Any, request: web.Request) -> dict[str, Any]:
    seconds = data.get("advance", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        msg = f"advance must be a number of seconds, not {seconds!r}."
        raise ValueError(msg)
    return {"offset": state.clock.advance(float(seconds))}


def _config(state: FakeState, data: Any, request: web.Request) -> dict[str, Any]:
    if request.method == "POST":
        state.config.update(data)
    return {**state.config.to_json(), "pending": state.script.pending()}


def build_app(state: FakeState) -> web.Application:
    """The aiohttp application over ``state``; ``FakeModelServer`` serves it on loopback."""
    app = web.Application(client_max_size=_MAX_BODY, middlewares=[_guard])
    app[STATE] = state
    app.router.add_post("/v1/messages", _anthropic.messages)
    app.router.add_post("/v1/messages/count_tokens", _anthropic.count_tokens)
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/v1/chat/completions", _openai.chat_completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/_fake/queue", _control(_queue))
    app.router.add_get("/_fake/requests", _control(_requests))
    app.router.add_post("/_fake/reset", _control(_reset))
    app.router.add_get("/_fake/config", _control(_config))
    app.router.add_post("/_fake/config", _control(_config))
    app.router.add_post("/_fake/clock", _control(_clock))
    return app


class FakeModelServer:
    """A fake Anthropic + OpenAI model server on ``http://127.0.0.1:<port>``.

    ``async with FakeModelServer(window=200_000) as fake:`` in async code;
    ``with FakeModelServer.in_thread(window=50_000) as fake:`` from sync code. Point an
    Anthropic client at ``fake.url`` and an OpenAI one at ``fake.url + "/v1"``.
    """

    def __init__(
        self,
        *,
        window: int | None = DEFAULT_WINDOW,
        windows: Mapping[str, int] | None = None,
        api_key: str | None = None,
        responses_overflow: OverflowMode = "400",
        models: Sequence[str] = DEFAULT_MODELS,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        config = Config(
            Windows(window, dict(windows or {})), api_key, responses_overflow, tuple(models)
        )
        self._state = FakeState(config)
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        if self._runner is None:
            msg = "The fake model server is not running; use it as a context manager."
            raise RuntimeError(msg)
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, without a trailing slash or ``/v1``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every model-API request so far, oldest first (a copy)."""
        return self._state.requests

    def idle_seconds(self) -> float:
        """Seconds since the last request finished; 0 while one is in flight."""
        return self._state.idle_seconds()

    def queue(self, *replies: Reply, model: str | None = None) -> None:
        """Queues replies for ``model`` (a request model equal to it or starting with it), or for
        any model when ``None``. A model's own queue is used before the any-model queue."""
        self._state.script.queue(replies, model)

    def pending(self) -> dict[str, int]:
        """Replies still queued, per queue (``"*"`` is the any-model queue)."""
        return self._state.script.pending()

    def configure(
        self,
        *,
        window: int | _Unset | None = UNSET,
        windows: Mapping[str, int | None] | None = None,
        api_key: str | _Unset | None = UNSET,
        responses_overflow: OverflowMode | None = None,
        models: Sequence[str] | None = None,
        bearer_token: str | _Unset | None = UNSET,
        thinking_tokens: int | None = None,
    ) -> None:
        """Changes what is given, like ``POST /_fake/config``; ``window=None`` lifts the limit,
        ``bearer_token="tok"`` accepts only ``Authorization: Bearer tok``,
        ``thinking_tokens`` sets how long default thinking is."""
        data: dict[str, Any] = {}
        if window is not UNSET:
            data["window"] = window
        if windows is not None:
            data["windows"] = dict(windows)
        if api_key is not UNSET:
            data["api_key"] = api_key
        if responses_overflow is not None:
            data["responses_overflow"] = responses_overflow
        if models is not None:
            data["models"] = list(models)
        if bearer_token is not UNSET:
            data["bearer_token"] = bearer_token
        if thinking_tokens is not None:
            data["thinking_tokens"] = thinking_tokens
        self._state.config.update(data)

    def advance(self, seconds: float) -> None:
        """Moves the fake's clock ``seconds`` forward, like ``POST /_fake/clock``: cache
        entries age as if that time had passed."""
        self._state.clock.advance(seconds)

    def reset(self) -> None:
        """Forgets queued replies, the prompt caches, the thinking and compaction blocks it
        issued and the request log; keeps the config and the clock."""
        self._state.reset()

    async def start(self) -> None:
        runner = web.AppRunner(build_app(self._state), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._port = sock.getsockname()[1]
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @classmethod
    @contextmanager
    def in_thread(
        cls,
        *,
        window: int | None = DEFAULT_WINDOW,
        windows: Mapping[str, int] | None = None,
        api_key: str | None = None,
        responses_overflow: OverflowMode = "400",
        models: Sequence[str] = DEFAULT_MODELS,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> Iterator[FakeModelServer]:
        """Runs the server on its own event loop in a daemon thread while the block runs."""
        server = cls(
            window=window,
            windows=windows,
            api_key=api_key,
            responses_overflow=responses_overflow,
            models=models,
            host=host,
            port=port,
        )
        loop_thread = _LoopThread(server)
        loop_thread.start()
        try:
            yield server
        finally:
            loop_thread.stop()


class _LoopThread:
    def __init__(self, server: FakeModelServer) -> None:
        self.server = server
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.done: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="fake-model")

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.done = asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self.ready.set()
        try:
            await self.done.wait()
        finally:
            await self.server.stop()

    def start(self) -> None:
        self.thread.start()
        self.ready.wait()
        if self.error is not None:
            self.thread.join()
            raise self.error

    def stop(self) -> None:
        if self.loop is not None and self.done is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.done.set)
        self.thread.join(timeout=10)
