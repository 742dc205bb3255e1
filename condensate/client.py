"""A small client for the daemon's HTTP API: synchronous (``DaemonClient``, the command
line's) and asynchronous (``AsyncDaemonClient``, on aiohttp), each call typed by the model the
daemon answers with (``condensate.api``), read back strictly: an answer that is not what the
API says is an error, not a dict.

It finds the daemon by itself: ``CONDENSATE_URL``, else the ``daemon.json`` the daemon writes
into its state directory, else the configured host and port; the token comes from the state
directory. Every error, the daemon's or the connection's, is a ``DaemonError``::

    client = DaemonClient.find(Settings())
    thread = client.create(CreateThread(model="anthropic:claude-opus-5-5", cwd=".", brief="..."))
    page = client.tail(thread.id, wait=10)
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar

import aiohttp
from pydantic import BaseModel, TypeAdapter, ValidationError

from condensate import api, statedir
from condensate.errors import CondensateError
from condensate.events import AskMode
from condensate.providers.sse import SSEParser
from condensate.settings import Settings

T = TypeVar("T")


class DaemonError(CondensateError):
    """The daemon answered with an error, or could not be reached, or answered something that
    is not what the API says."""

    def __init__(self, *, code: str, detail: str, status: int = 0) -> None:
        super().__init__(detail)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class Request(Generic[T]):
    """One call of the API: what is sent, and how its answer is read."""

    method: Literal["GET", "POST"]
    path: str
    body: Any
    read: Callable[[Any], T]


_ANY_THREAD: TypeAdapter[api.AnyThread] = TypeAdapter(api.AnyThread)


def _thread_path(thread_id: str, tail: str = "") -> str:
    return f"/threads/{urllib.parse.quote(thread_id, safe='')}{tail}"


def _body(model: BaseModel) -> dict[str, Any]:
    """A request body with only what the caller set: the daemon's defaults stay its own."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Requests:
    """Every call of the API as a ``Request``; both clients send these."""

    @staticmethod
    def health() -> Request[api.Health]:
        return Request("GET", "/health", None, api.Health.model_validate)

    @staticmethod
    def ready() -> Request[api.Ready]:
        """503 ``not-ready`` (a ``DaemonError``) while the daemon recovers its threads."""
        return Request("GET", "/ready", None, api.Ready.model_validate)

    @staticmethod
    def threads() -> Request[list[api.AnyThread]]:
        return Request(
            "GET", "/threads", None, lambda data: api.ThreadList.model_validate(data).threads
        )

    @staticmethod
    def thread(thread_id: str) -> Request[api.AnyThread]:
        return Request("GET", _thread_path(thread_id), None, _ANY_THREAD.validate_python)

    @staticmethod
    def create(body: api.CreateThread) -> Request[api.Thread]:
        return Request("POST", "/threads", _body(body), api.Thread.model_validate)

    @staticmethod
    def attach(body: api.Attach) -> Request[api.Attached]:
        return Request("POST", "/attach", _body(body), api.Attached.model_validate)

    @staticmethod
    def detach(thread_id: str, exit_code: int) -> Request[api.Detached]:
        body = _body(api.Detach(exit_code=exit_code))
        return Request(
            "POST", _thread_path(thread_id, "/detach"), body, api.Detached.model_validate
        )

    @staticmethod
    def send(thread_id: str, text: str, *, pinned: bool = False) -> Request[api.MessageSent]:
        body = _body(api.SendMessage(text=text, pinned=pinned))
        return Request(
            "POST", _thread_path(thread_id, "/messages"), body, api.MessageSent.model_validate
        )

    @staticmethod
    def tail(
        thread_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        history: bool = False,
        wait: int = 0,
    ) -> Request[api.TailPage]:
        query: dict[str, int] = {"after": after}
        if limit is not None:
            query["limit"] = limit
        if history:
            query["history"] = 1
        if wait:
            query["wait"] = wait
        path = _thread_path(thread_id, "/tail?" + urllib.parse.urlencode(query))
        return Request("GET", path, None, api.TailPage.model_validate)

    @staticmethod
    def compaction(thread_id: str) -> Request[api.Compaction]:
        return Request(
            "GET", _thread_path(thread_id, "/compact"), None, api.Compaction.model_validate
        )

    @staticmethod
    def answer(
        thread_id: str,
        mode: AskMode,
        *,
        keep_from: int | None = None,
        summary: str | None = None,
        reason: str = "",
    ) -> Request[api.CompactAnswered]:
        body = api.CompactAnswer(mode=mode, keep_from=keep_from, summary=summary, reason=reason)
        path = _thread_path(thread_id, "/compact")
        return Request("POST", path, _body(body), api.CompactAnswered.model_validate)

    @staticmethod
    def interrupt(thread_id: str) -> Request[api.Interrupted]:
        path = _thread_path(thread_id, "/interrupt")
        return Request("POST", path, {}, api.Interrupted.model_validate)

    @staticmethod
    def approvals(thread_id: str) -> Request[list[api.Approval]]:
        return Request(
            "GET",
            _thread_path(thread_id, "/approvals"),
            None,
            lambda data: api.Approvals.model_validate(data).approvals,
        )

    @staticmethod
    def approve(
        thread_id: str,
        approval_id: str,
        decision: Literal["allow", "deny"] = "allow",
        *,
        reason: str = "",
    ) -> Request[api.ApprovalAnswered]:
        body = api.ApprovalAnswer(id=approval_id, decision=decision, reason=reason)
        path = _thread_path(thread_id, "/approvals")
        return Request("POST", path, _body(body), api.ApprovalAnswered.model_validate)

    @staticmethod
    def pin(thread_id: str, seq: int) -> Request[api.Pinned]:
        body = _body(api.PinMessage(seq=seq))
        return Request("POST", _thread_path(thread_id, "/pins"), body, api.Pinned.model_validate)

    @staticmethod
    def archive(thread_id: str) -> Request[api.Archived]:
        return Request("POST", _thread_path(thread_id, "/archive"), {}, api.Archived.model_validate)

    @staticmethod
    def tool(
        thread_id: str, name: str, arguments: Mapping[str, Any] | None = None
    ) -> Request[api.ToolAnswer]:
        path = _thread_path(thread_id, f"/tools/{urllib.parse.quote(name, safe='')}")
        return Request("POST", path, dict(arguments or {}), api.ToolAnswer.model_validate)


def _read(request: Request[T], data: Any) -> T:
    try:
        return request.read(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        msg = (
            f"The daemon's answer to {request.method} {request.path.partition('?')[0]} is not "
            f"what the API says: '{where}': {first['msg']}."
        )
        raise DaemonError(code="unexpected-answer", detail=msg) from exc


def _failed(status: int, raw: bytes, otherwise: str) -> DaemonError:
    """The daemon's ``{"error", "detail"}``; for a body that is not one, ``otherwise``."""
    try:
        failure = api.Error.model_validate_json(raw)
    except ValidationError:
        return DaemonError(code="http-error", detail=otherwise, status=status)
    return DaemonError(code=failure.error, detail=failure.detail, status=status)


def _unreachable(url: str, exc: BaseException) -> DaemonError:
    """One sentence a person reads: why the daemon is out of reach in plain words (urllib
    wraps the socket's error as ``<urlopen error [Errno 111] Connection refused>``)."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        why = "nothing listens there"
    elif isinstance(reason, TimeoutError):
        why = "it did not answer in time"
    elif isinstance(reason, OSError) and reason.strerror:
        why = reason.strerror[0].lower() + reason.strerror[1:]
    else:
        why = str(reason)
    msg = f"Cannot reach the daemon at {url}: {why}. Is 'condensate serve' running?"
    return DaemonError(code="unreachable", detail=msg)


STARTING_WAIT = 30.0
"""Seconds a command waits for a daemon that holds its state directory but serves nothing
yet (``condensate serve &`` typed just before it)."""
APPEARING_WAIT = 2.0
"""Seconds a command with no daemon in sight waits for one to take the state directory (a
``serve`` started a moment before it is still loading)."""


def _wait_for_start(home: Path) -> None:
    """Return once a daemon serves from ``home``, or none is starting there."""
    began = time.monotonic()
    while time.monotonic() - began < STARTING_WAIT:
        if statedir.starting(home):
            time.sleep(0.1)
        elif (home / "token").exists() or time.monotonic() - began > APPEARING_WAIT:
            return
        else:
            time.sleep(0.1)


def _located(settings: Settings) -> tuple[str, str]:
    """The daemon's URL and its token, from the settings and the state directory; a daemon
    still starting is waited for."""
    if settings.url is None:
        _wait_for_start(settings.home)
    url = settings.url
    if url is None:
        found = settings.home / "daemon.json"
        if found.exists():
            url = json.loads(found.read_text())["url"]
        else:
            url = f"http://{settings.host}:{settings.port}"
    token_file = settings.home / "token"
    if not token_file.exists():
        msg = (
            f"No token at {token_file}: start the daemon first (condensate serve), or set "
            "CONDENSATE_HOME to its state directory."
        )
        raise DaemonError(code="no-token", detail=msg)
    return url.rstrip("/"), token_file.read_text().strip()


@dataclass(frozen=True)
class DaemonClient:
    """The synchronous client: ``call`` for any route as JSON, a typed method per call."""

    url: str
    token: str
    timeout: float = 60.0

    @classmethod
    def find(cls, settings: Settings) -> DaemonClient:
        url, token = _located(settings)
        return cls(url, token)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """``method path`` with ``body`` as JSON; the answer's JSON."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the URL is the daemon's, http only
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise _failed(exc.code, exc.read(), str(exc)) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise _unreachable(self.url, exc) from exc

    def send_request(self, request: Request[T]) -> T:
        """Send one of ``Requests``; its answer, typed."""
        return _read(request, self.call(request.method, request.path, request.body))

    def health(self) -> api.Health:
        return self.send_request(Requests.health())

    def ready(self) -> api.Ready:
        return self.send_request(Requests.ready())

    def threads(self) -> list[api.AnyThread]:
        """This daemon's threads; in a fleet, the others' after them (``ThreadElsewhere``)."""
        return self.send_request(Requests.threads())

    def thread(self, thread_id: str) -> api.AnyThread:
        return self.send_request(Requests.thread(thread_id))

    def create(self, body: api.CreateThread) -> api.Thread:
        return self.send_request(Requests.create(body))

    def attach(self, body: api.Attach) -> api.Attached:
        """A thread for a CLI a person runs in their own terminal, and how to start it."""
        return self.send_request(Requests.attach(body))

    def detach(self, thread_id: str, exit_code: int) -> api.Detached:
        """The person's CLI exited with ``exit_code``: its session's turn ends."""
        return self.send_request(Requests.detach(thread_id, exit_code))

    def send(self, thread_id: str, text: str, *, pinned: bool = False) -> api.MessageSent:
        return self.send_request(Requests.send(thread_id, text, pinned=pinned))

    def tail(
        self,
        thread_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        history: bool = False,
        wait: int = 0,
    ) -> api.TailPage:
        """A page of events after ``after``; ``wait`` seconds (at most 30) for a new one."""
        request = Requests.tail(thread_id, after, limit, history=history, wait=wait)
        return self.send_request(request)

    def compaction(self, thread_id: str) -> api.Compaction:
        return self.send_request(Requests.compaction(thread_id))

    def answer(
        self,
        thread_id: str,
        mode: AskMode,
        *,
        keep_from: int | None = None,
        summary: str | None = None,
        reason: str = "",
    ) -> api.CompactAnswered:
        """Answer the pending ask; with none, queue a compaction (``queued``)."""
        request = Requests.answer(
            thread_id, mode, keep_from=keep_from, summary=summary, reason=reason
        )
        return self.send_request(request)

    def interrupt(self, thread_id: str) -> api.Interrupted:
        return self.send_request(Requests.interrupt(thread_id))

    def approvals(self, thread_id: str) -> list[api.Approval]:
        return self.send_request(Requests.approvals(thread_id))

    def approve(
        self,
        thread_id: str,
        approval_id: str,
        decision: Literal["allow", "deny"] = "allow",
        *,
        reason: str = "",
    ) -> api.ApprovalAnswered:
        return self.send_request(Requests.approve(thread_id, approval_id, decision, reason=reason))

    def pin(self, thread_id: str, seq: int) -> api.Pinned:
        return self.send_request(Requests.pin(thread_id, seq))

    def archive(self, thread_id: str) -> api.Archived:
        return self.send_request(Requests.archive(thread_id))

    def tool(
        self, thread_id: str, name: str, arguments: Mapping[str, Any] | None = None
    ) -> api.ToolAnswer:
        return self.send_request(Requests.tool(thread_id, name, arguments))


@dataclass
class AsyncDaemonClient:
    """The asynchronous client, on aiohttp: the same typed methods, awaited. Used as
    ``async with``, its calls share one connection pool; else each opens its own."""

    url: str
    token: str
    timeout: float = 60.0
    _session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)

    @classmethod
    def find(cls, settings: Settings) -> AsyncDaemonClient:
        url, token = _located(settings)
        return cls(url, token)

    async def __aenter__(self) -> AsyncDaemonClient:
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        """``method path`` with ``body`` as JSON; the answer's JSON."""
        if self._session is None:
            async with aiohttp.ClientSession() as session:
                return await self._call(session, method, path, body)
        return await self._call(self._session, method, path, body)

    async def _call(self, session: aiohttp.ClientSession, method: str, path: str, body: Any) -> Any:
        try:
            async with session.request(
                method,
                self.url + path,
                data=None if body is None else json.dumps(body),
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": "application/json",
                },
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise _failed(response.status, raw, f"HTTP {response.status} {response.reason}")
                return json.loads(raw or b"null")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unreachable(self.url, exc) from exc

    async def send_request(self, request: Request[T]) -> T:
        """Send one of ``Requests``; its answer, typed."""
        return _read(request, await self.call(request.method, request.path, request.body))

    async def live(
        self, thread_id: str, after: int = 0
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The thread's live stream (``GET /threads/:id/live``) from ``after``: (kind, data)
        per item, logged events and ephemeral ones alike; read again from the last seq seen
        when the daemon says the reader fell behind. Needs ``async with``."""
        if self._session is None:
            msg = "AsyncDaemonClient.live needs the client opened with `async with`."
            raise RuntimeError(msg)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        while True:
            path = _thread_path(thread_id, f"/live?after={after}")
            try:
                async with self._session.get(
                    self.url + path, headers=headers, timeout=timeout
                ) as response:
                    if response.status != 200:
                        raw = await response.read()
                        raise _failed(response.status, raw, f"HTTP {response.status}")
                    parser = SSEParser()
                    resync = False
                    async for chunk in response.content.iter_any():
                        for event in parser.feed(chunk):
                            if event.event == "resync":
                                resync = True
                                break
                            item = json.loads(event.data) if event.data else {}
                            if isinstance(item.get("seq"), int):
                                after = item["seq"]
                            yield event.event, item
                        if resync:
                            break
            except (aiohttp.ClientError, OSError) as exc:
                raise _unreachable(self.url, exc) from exc
            if not resync:
                return

    async def health(self) -> api.Health:
        return await self.send_request(Requests.health())

    async def ready(self) -> api.Ready:
        return await self.send_request(Requests.ready())

    async def threads(self) -> list[api.AnyThread]:
        """This daemon's threads; in a fleet, the others' after them (``ThreadElsewhere``)."""
        return await self.send_request(Requests.threads())

    async def thread(self, thread_id: str) -> api.AnyThread:
        return await self.send_request(Requests.thread(thread_id))

    async def create(self, body: api.CreateThread) -> api.Thread:
        return await self.send_request(Requests.create(body))

    async def attach(self, body: api.Attach) -> api.Attached:
        return await self.send_request(Requests.attach(body))

    async def detach(self, thread_id: str, exit_code: int) -> api.Detached:
        return await self.send_request(Requests.detach(thread_id, exit_code))

    async def send(self, thread_id: str, text: str, *, pinned: bool = False) -> api.MessageSent:
        return await self.send_request(Requests.send(thread_id, text, pinned=pinned))

    async def tail(
        self,
        thread_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        history: bool = False,
        wait: int = 0,
    ) -> api.TailPage:
        """A page of events after ``after``; ``wait`` seconds (at most 30) for a new one."""
        request = Requests.tail(thread_id, after, limit, history=history, wait=wait)
        return await self.send_request(request)

    async def compaction(self, thread_id: str) -> api.Compaction:
        return await self.send_request(Requests.compaction(thread_id))

    async def answer(
        self,
        thread_id: str,
        mode: AskMode,
        *,
        keep_from: int | None = None,
        summary: str | None = None,
        reason: str = "",
    ) -> api.CompactAnswered:
        """Answer the pending ask; with none, queue a compaction (``queued``)."""
        request = Requests.answer(
            thread_id, mode, keep_from=keep_from, summary=summary, reason=reason
        )
        return await self.send_request(request)

    async def interrupt(self, thread_id: str) -> api.Interrupted:
        return await self.send_request(Requests.interrupt(thread_id))

    async def approvals(self, thread_id: str) -> list[api.Approval]:
        return await self.send_request(Requests.approvals(thread_id))

    async def approve(
        self,
        thread_id: str,
        approval_id: str,
        decision: Literal["allow", "deny"] = "allow",
        *,
        reason: str = "",
    ) -> api.ApprovalAnswered:
        request = Requests.approve(thread_id, approval_id, decision, reason=reason)
        return await self.send_request(request)

    async def pin(self, thread_id: str, seq: int) -> api.Pinned:
        return await self.send_request(Requests.pin(thread_id, seq))

    async def archive(self, thread_id: str) -> api.Archived:
        return await self.send_request(Requests.archive(thread_id))

    async def tool(
        self, thread_id: str, name: str, arguments: Mapping[str, Any] | None = None
    ) -> api.ToolAnswer:
        return await self.send_request(Requests.tool(thread_id, name, arguments))


def status_page_url(base: str, token: str) -> str:
    """The status page's address on the daemon at ``base``, with the token in its fragment; a daemon
    bound to every address is reached on loopback (a browser cannot ask for 0.0.0.0)."""
    parts = urllib.parse.urlsplit(base.rstrip("/"))
    if parts.hostname in ("0.0.0.0", "::"):  # noqa: S104 - compared, not bound
        loopback = "127.0.0.1" if parts.hostname == "0.0.0.0" else "[::1]"  # noqa: S104
        parts = parts._replace(netloc=f"{loopback}:{parts.port}")
    return f"{urllib.parse.urlunsplit(parts)}/ui#token={token}"
